"""The memory of a compaction (issue 36: the 100,000-note folder's 1 GiB peak was the compaction after its job).
Prints figures; asserts nothing.

    python -m bench.bench_compact [--size 200000] [--path DIR] [--type auto|flat|hnsw]

A flat collection of `--size` synthetic chunks (bench_index.synth, 512-d vectors) is bulk-loaded in a child
process (its memory is not this one's) and kept at `--path DIR/orig` when given (a later run copies it instead of
loading it again). This process then opens a copy of it as the agent would (`type = "auto"` by default: past
`hnsw_after` chunks a compaction makes it HNSW), and compacts it while a thread samples, every 20 ms, its own RSS
(anonymous and file-backed) and its child processes' (a compaction's copy is made by one since issue 36). Printed:
the RSS once open, the peak during the compaction (with when it came and its parts), the RSS right after, after
`malloc_trim`, after a first hybrid search, and the compaction's time.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench.bench_bigfolder import descendants, rss_kib

DIM = 512


def status(pid: int | None = None) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile of a process (this one by default), in MiB (0 when it is gone)."""
    pid = os.getpid() if pid is None else pid
    return {field: rss_kib(pid, field) // 1024 for field in ("VmRSS", "RssAnon", "RssFile")}


def children_rss() -> int:
    """The RSS of this process's child processes (and theirs), MiB."""
    return sum(rss_kib(c) for c in descendants(os.getpid())) // 1024


def build(path: Path, size: int) -> None:
    """Bulk-load a flat collection of `size` chunks at `path`, in a child process."""
    code = (
        "import sys; from pathlib import Path; from bench.bench_index import bulk_load, synth, DIM; "
        "from ragd.config import IndexConfig; from ragd.index import open_index; "
        "from ragd.model import EmbeddingIdentity; "
        f"v, t = synth({size}); "
        f"ix = open_index(Path({str(path)!r}), EmbeddingIdentity('bench-512', DIM), IndexConfig(type='flat')); "
        "bulk_load(ix, v, t); ix.flush(); ix.close()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=200_000)
    ap.add_argument("--path", type=Path, help="keep the loaded collection here (reused when it exists)")
    ap.add_argument("--type", choices=["auto", "flat", "hnsw"], default="auto")
    args = ap.parse_args(argv)
    from ragd.config import IndexConfig
    from ragd.index import open_index
    from ragd.model import EmbeddingIdentity

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ragd-bench-compact-") as tmp:
        orig = (args.path or Path(tmp)) / "orig"
        if not orig.exists():
            t0 = time.perf_counter()
            build(orig, args.size)
            print(f"{args.size} chunks bulk-loaded (flat) in {time.perf_counter() - t0:.0f} s")
        work = Path(tmp) / "work"
        shutil.copytree(orig, work)
        ident = EmbeddingIdentity("bench-512", DIM)
        idx = open_index(work, ident, IndexConfig(type=args.type))
        print(f"opened: {status()} MiB; needs compaction: {idx.needs_compaction}")
        peak: dict[str, float] = {"VmRSS": 0}
        children = [0]
        done = threading.Event()
        t0 = time.perf_counter()

        def sample() -> None:
            while not done.is_set():
                now = status()
                if now["VmRSS"] > peak["VmRSS"]:
                    peak.update(now, at=time.perf_counter() - t0)
                children[0] = max(children[0], children_rss())
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        folded = idx.compact()
        took = time.perf_counter() - t0
        done.set()
        sampler.join()
        print(f"compaction: {folded} blocks folded in {took:.1f} s; {idx.stats().get('index_type')}")
        print(f"  peak {peak['VmRSS']:.0f} MiB at +{peak['at']:.1f} s (anonymous {peak['RssAnon']:.0f}, "
              f"file-backed {peak['RssFile']:.0f}); child processes' peak {children[0]} MiB")  # fmt: skip
        print(f"  right after: {status()} MiB")
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            print(f"  after malloc_trim: {status()} MiB")
        except OSError:
            pass
        t1 = time.perf_counter()
        idx.query(vector=np.ones(DIM, np.float32) / DIM**0.5, text="the", k=10)
        print(f"  first hybrid search {1000 * (time.perf_counter() - t1):.0f} ms; then {status()} MiB")
        idx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
