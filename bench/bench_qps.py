"""Search under concurrent clients (issue 14): queries/s with 1, 4 and 16 clients, and zvec's query threads.

    python -m bench.bench_qps [--size 100000] [--clients 1,4,16] [--query-threads 1,2] [--seconds 20] [--writer]

A flat collection of `--size` synthetic chunks (bench_index.synth: 512-d vectors around 1,000 centres, 60 Zipf
words of a Chinese and English vocabulary), bulk-loaded and flushed, not optimized (as the agent keeps it). For
each `zvec.init(query_threads=K)` of `--query-threads`, in a process of its own (a deadlock cannot be undone):
for each client count C, C threads each run hybrid queries (a perturbed chunk vector and two of its words, as
bench_index) through ragd's index backend for `--seconds`; printed: queries/s, p50 and p95 latency. With
`--writer`, one more thread rewrites a source (10 chunks) every 0.1 s and flushes every second, as the agent's
index writer does while a user edits: a run in which no query completes for 30 s is reported as stalled (the deadlock
docs/zvec-notes.md records with more than one query thread) and its process killed.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

STALL_S = 30.0


def one(size: int, clients: list[int], query_threads: int, seconds: float, writer: bool) -> None:
    """In this process: build, then each client count; a JSON line per figure (the parent prints them)."""
    import zvec

    from bench.bench_index import DIM, bulk_load, synth
    from ragd.config import IndexConfig
    from ragd.index import open_index
    from ragd.model import EmbeddingIdentity

    vecs, texts = synth(size)
    with tempfile.TemporaryDirectory(prefix="ragd-bench-qps-") as tmp:
        idx = open_index(Path(tmp), EmbeddingIdentity("bench-512", DIM), IndexConfig(type="flat"))
        t0 = time.perf_counter()
        bulk_load(idx, vecs, texts)
        idx.flush()
        # after ragd's own init (one query thread): a later init takes effect, see docs/zvec-notes.md
        zvec.init(query_threads=query_threads)
        print(json.dumps({"built": size, "s": time.perf_counter() - t0}), flush=True)
        for c in clients:
            r = measure(idx, vecs, texts, c, seconds, writer)
            print(json.dumps(r), flush=True)
            if r.get("stalled"):
                os._exit(3)  # threads stuck inside zvec cannot be joined
        idx.close()


def measure(
    idx: Any, vecs: np.ndarray, texts: list[str], c: int, seconds: float, writer: bool
) -> dict[str, Any]:
    """`c` clients querying `idx` for `seconds` (and the writer, if asked): their figures."""
    from bench.bench_index import DIM
    from ragd.index import IndexChunk

    size = len(texts)
    stop = threading.Event()
    done: list[list[float]] = [[] for _ in range(c)]
    last = [time.monotonic()]
    words = [t.split()[:60] for t in texts]

    def client(i: int) -> None:
        r, noise = random.Random(i), np.random.default_rng(i)
        while not stop.is_set():
            j = r.randrange(size)
            v = vecs[j] + 0.3 * noise.standard_normal(DIM).astype(np.float32)
            t = time.perf_counter()
            idx.query(vector=v / np.linalg.norm(v), text=" ".join(r.sample(words[j], 2)), k=10)
            done[i].append(1000 * (time.perf_counter() - t))
            last[0] = time.monotonic()

    def write() -> None:
        n = 0
        while not stop.is_set():
            src, base = f"/bench/edits/f{n % 50}.md", (n * 10) % (size - 10)
            chunks = [IndexChunk(src, k, texts[base + k], f"e{n}-{k}", "File: bench", vecs[base + k])
                      for k in range(10)]  # fmt: skip
            idx.replace_source(src, f"md5-{n}", "/bench", chunks)
            if n % 10 == 9:  # a flush a second, as a busy agent's writer
                idx.flush()
            n += 1
            time.sleep(0.1)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(c)]
    if writer:
        threads.append(threading.Thread(target=write, daemon=True))
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        time.sleep(0.5)
        if time.monotonic() - last[0] > STALL_S:
            return {"clients": c, "stalled": True}
    stop.set()
    for t in threads:
        t.join(STALL_S)
        if t.is_alive():
            return {"clients": c, "stalled": True}
    lat = sorted(x for d in done for x in d)
    elapsed = time.monotonic() - t0
    return {"clients": c, "queries": len(lat), "qps": len(lat) / elapsed, "p50": lat[len(lat) // 2],
            "p95": lat[int(0.95 * (len(lat) - 1))]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--query-threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument(
        "--writer", action="store_true", help="one thread rewriting a source every 0.1 s meanwhile"
    )
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: this query_threads value
    a = ap.parse_args(argv)
    clients = [int(x) for x in a.clients.split(",") if x]
    if a.one is not None:
        one(a.size, clients, a.one, a.seconds, a.writer)
        return 0
    print(f"# {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; {a.size:,} chunks, "
          f"flat, not optimized; hybrid queries{'; a writer beside them' if a.writer else ''}")  # fmt: skip
    print("| zvec query threads | clients | queries/s | p50 ms | p95 ms |")
    print("|---|---|---|---|---|")
    for qt in (int(x) for x in a.query_threads.split(",") if x):
        cmd = [sys.executable, "-m", "bench.bench_qps", "--one", str(qt), "--size", str(a.size),
               "--clients", a.clients, "--seconds", str(a.seconds), *(["--writer"] if a.writer else [])]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            r = json.loads(line)
            if "built" in r:
                print(f"<!-- built {r['built']:,} chunks in {r['s']:.0f} s -->", flush=True)
            elif r.get("stalled"):
                print(
                    f"| {qt} | {r['clients']} | stalled: no query completed for {STALL_S:.0f} s | | |",
                    flush=True,
                )
            else:
                print(
                    f"| {qt} | {r['clients']} | {r['qps']:.1f} | {r['p50']:.1f} | {r['p95']:.1f} |",
                    flush=True,
                )
        proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
