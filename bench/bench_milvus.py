"""The index backends side by side: zvec and Milvus Lite, on the same corpus, in one run.

    python -m bench.bench_milvus [--sizes 10000,100000] [--queries 200] [--backends zvec,milvus] [--budget 30]

For each size N and each backend, in a fresh interpreter of its own (the script runs itself with `--one BACKEND`
and reads one JSON line back, so neither backend's memory, threads or caches weigh on the other's figures):

- the corpus of bench_index (`synth(N)`: 512-d unit vectors around 1,000 centres, chunk texts of 60 Zipf words of
  a 20,000-word Chinese and English vocabulary), as `IndexChunk`s as bench_index makes them (header
  "File: bench", content hash the md5 of the text), 10 chunks per source;
- the index opened through `ragd.index.open_index` with `EmbeddingIdentity("bench", 512)`: zvec with
  `IndexConfig()` (flat, as the agent keeps it: never optimized), Milvus Lite with
  `IndexConfig(backend="milvus", uri=DIR/kb.db)` (in-process, pure Python; a FLAT vector index and BM25 over
  its jieba analyzer);
- insert: the index built from empty through `write_sources`, 100 sources of 10 chunks a call (as the agent's
  index sync writes a batch of change notes: `held` unknown, so the backend looks each source up), then one
  `flush`; chunks/s of wall time and of the process's CPU time (all threads: Milvus Lite's server runs in
  them; less affected by other load on a shared machine), and the flush's share. A build that passes `--budget`
  minutes is stopped there and reported as a rate (no queries then);
- the process's RSS (VmRSS) once the corpus is in memory and after the build (their difference is the index's),
  and its peak (VmHWM); the index's size on disk and what it is kept in (zvec: segments and blocks; Milvus
  Lite: data files, its segments, each of which keeps its own BM25 statistics), after the build and the queries;
- query latency p50/p95 over `--queries` queries per mode, through `index.query(vector=..., text=..., k=10)`:
  vector only (a chunk's vector perturbed), keyword only (two words of that chunk: what a person remembers of a
  document) and hybrid (both), the three modes in turn query by query (so a change in the machine's load weighs
  on each alike); each mode's first query (caches cold) is timed apart and not in the percentiles; and the mean
  CPU time of a query (the process's, all threads);
- as a check of the answers: how often the chunk a query was drawn from is in its top 10, and how many of the
  top 10 the two backends share (the same vectors: exact cosine on both; BM25 statistics differ).

Printed: the command, the machine (cores, Python, load average before and after), and markdown tables.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_index import DIM, _md5, pct, synth

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = {"zvec": "zvec", "milvus": "Milvus Lite"}
MODES = ("vector", "keyword", "hybrid")
SOURCES_PER_CALL = 100
CHUNKS_PER_SOURCE = 10
K = 10


def proc_status() -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of this process, MiB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def disk_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def segments(idx: Any, data: Path) -> str:
    """zvec: its segments and blocks (stats); Milvus Lite: its data files (segments; Milvus Lite 3 keeps BM25
    statistics per segment)."""
    if (data / "kb.db").exists():
        return f"data files {len(list((data / 'kb.db').glob('collections/*/partitions/*/data/*.parquet')))}"
    st = idx.stats()
    return f"segments {st['segments']}, blocks {st['blocks']}"


def make_queries(vecs: np.ndarray, texts: list[str], nq: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """As bench_index.bench_size: (the chunk each query is about, its perturbed vector, two of its words)."""
    n = len(texts)
    rng = np.random.default_rng(9)
    r = random.Random(9)
    picks = rng.integers(0, n, nq)
    qv = vecs[picks] + 0.3 * rng.standard_normal((nq, DIM)).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    words = [" ".join(r.sample(texts[int(picks[i])].split()[:60], 2)) for i in range(nq)]
    return picks, qv, words


def source_of(i: int) -> str:
    return f"/bench/d{i // 10000}/f{i // CHUNKS_PER_SOURCE}.md"


def one(backend: str, n: int, nq: int, budget_s: float) -> dict[str, Any]:
    """In this process: build one backend's index of n chunks, query it; the figures as a dict."""
    from ragd.config import IndexConfig
    from ragd.index import IndexChunk, SourceWrite, open_index
    from ragd.index.keyword import lexicon
    from ragd.model import EmbeddingIdentity

    out: dict[str, Any] = {"backend": backend, "n": n, "load_start": os.getloadavg()[0]}
    vecs, texts = synth(n)
    picks, qv, words = make_queries(vecs, texts, nq)
    out["rss_corpus"] = proc_status()["VmRSS"]
    with tempfile.TemporaryDirectory(prefix=f"ragd-bench-milvus-{backend}-") as t:
        data = Path(t)
        cfg = IndexConfig(backend="milvus", uri=str(data / "kb.db")) if backend == "milvus" else IndexConfig()
        t0 = time.perf_counter()
        idx = open_index(data, EmbeddingIdentity("bench", DIM), cfg)
        idx.count()  # Milvus connects (and creates its collection) at the first use
        out["open_s"] = time.perf_counter() - t0
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            per_call = SOURCES_PER_CALL * CHUNKS_PER_SOURCE
            written, report = 0, 0.0
            for s in range(0, n, per_call):
                writes = []
                for first in range(s, min(s + per_call, n), CHUNKS_PER_SOURCE):
                    src = source_of(first)
                    chunks = [IndexChunk(src, i - first, texts[i], _md5(texts[i]), "File: bench", vecs[i])
                              for i in range(first, min(first + CHUNKS_PER_SOURCE, n))]  # fmt: skip
                    writes.append(SourceWrite(src, "md5", "/bench", chunks))
                idx.write_sources(writes)
                written = min(s + per_call, n)
                took = time.perf_counter() - t0
                if took >= report:  # progress, for whoever watches a long run
                    print(f"  [{backend} N={n:,}] {written:,} chunks in {took:.0f} s ({written / took:,.0f}/s)",
                          file=sys.stderr, flush=True)  # fmt: skip
                    report = took + 60
                if took > budget_s and written < n:
                    break
            f0 = time.perf_counter()
            idx.flush()
            out["flush_s"] = time.perf_counter() - f0
            out["build_s"] = time.perf_counter() - t0
            out["build_cpu_s"] = time.process_time() - c0
            out["written"] = written
            out["count"] = idx.count()
            status = proc_status()
            out["rss_built"], out["rss_peak_built"] = status["VmRSS"], status["VmHWM"]
            out["disk_mib"] = disk_mib(data)
            print(f"  [{backend} N={n:,}] built: {written:,} chunks in {out['build_s']:.1f} s "
                  f"(flush {out['flush_s']:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip
            out["segments"] = segments(idx, data)
            if written < n:
                return out
            t1 = time.perf_counter()  # the Chinese-English lexicon hybrid queries load once (either backend)
            lexicon.shared().glosses("电池 向量")
            out["lexicon_ms"] = (time.perf_counter() - t1) * 1000
            ask = {m: (qv if m != "keyword" else None, words if m != "vector" else None) for m in MODES}

            def timed(mode: str, j: int) -> tuple[float, float, list[str]]:
                vec, text = ask[mode]
                t1, c1 = time.perf_counter(), time.process_time()
                hits = idx.query(
                    vector=None if vec is None else vec[j], text=None if text is None else text[j], k=K
                )
                ms, cpu = (time.perf_counter() - t1) * 1000, (time.process_time() - c1) * 1000
                return ms, cpu, [f"{h.source_path}#{h.chunk_index}" for h in hits]

            for mode in MODES:  # each mode's first query: caches cold
                out[f"{mode}_first_ms"] = timed(mode, 0)[0]
            runs: dict[str, list[tuple[float, float, list[str]]]] = {m: [] for m in MODES}
            for j in range(nq):  # the modes in turn, so a change in the machine's load weighs on each alike
                for mode in MODES:
                    runs[mode].append(timed(mode, j))
            for mode in MODES:
                out[f"{mode}_ms"] = [ms for ms, _, _ in runs[mode]]
                out[f"{mode}_cpu_ms"] = statistics.mean(cpu for _, cpu, _ in runs[mode])
                out[f"{mode}_top"] = tops = [top for _, _, top in runs[mode]]
                out[f"{mode}_found"] = sum(
                    f"{source_of(int(p))}#{int(p) % CHUNKS_PER_SOURCE}" in top
                    for p, top in zip(picks, tops, strict=True)
                ) / len(tops)
                print(f"  [{backend} N={n:,}] {mode}: p50 {pct(out[f'{mode}_ms'], 50):.1f} ms", file=sys.stderr,
                      flush=True)  # fmt: skip
            out["rss_end"], out["rss_peak"] = proc_status()["VmRSS"], proc_status()["VmHWM"]
            out["segments_end"] = segments(idx, data)
        finally:
            idx.close()
    out["load_end"] = os.getloadavg()[0]
    return out


def run_child(backend: str, n: int, nq: int, budget_min: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.bench_milvus", "--one", backend, "--sizes", str(n), "--queries", str(nq),
           "--budget", str(budget_min)]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {
            "backend": backend,
            "n": n,
            "failed": f"exit {proc.returncode}",
            "wall_s": time.perf_counter() - t0,
        }
    return {**json.loads(lines[-1]), "wall_s": time.perf_counter() - t0}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def print_tables(results: list[dict[str, Any]], nq: int) -> None:
    print("\n### Insert: from empty, `write_sources` of 100 sources × 10 chunks, then `flush`\n")
    print("| backend | N | chunks/s | chunks/CPU-s | build s | of which flush s | chunks counted | RSS corpus MiB "
          "| RSS built MiB | index RSS MiB | peak RSS MiB | disk MiB | segments | load at start |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        name = BACKENDS[r["backend"]]
        if "failed" in r:
            print(f"| {name} | {r['n']:,} | failed ({r['failed']}) |" + " |" * 11)
            continue
        w = r["written"]
        partial = "" if w == r["n"] else f" (stopped at {w:,})"
        print(f"| {name} | {r['n']:,}{partial} | {w / r['build_s']:,.0f} | {w / r['build_cpu_s']:,.0f} "
              f"| {r['build_s']:.1f} | {r['flush_s']:.1f} | {r['count']:,} | {r['rss_corpus']:.0f} "
              f"| {r['rss_built']:.0f} | {r['rss_built'] - r['rss_corpus']:+.0f} | {r['rss_peak_built']:.0f} "
              f"| {r['disk_mib']:.0f} | {r['segments']} | {r['load_start']:.2f} |")  # fmt: skip
    print(
        f"\n### Query latency, ms, over {nq} queries a mode (k={K}); first: the first query of the mode (not in "
        "the percentiles); lexicon load: the Chinese-English lexicon hybrid queries load once, loaded before\n"
    )
    print("| backend | N | vector p50 | p95 | first | keyword p50 | p95 | first | hybrid p50 | p95 | first "
          "| lexicon load | RSS after queries MiB | segments after |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        if "vector_ms" not in r:
            continue
        cells = " | ".join(f"{pct(r[f'{m}_ms'], 50):.1f} | {pct(r[f'{m}_ms'], 95):.1f} | {r[f'{m}_first_ms']:.1f}"
                           for m in MODES)  # fmt: skip
        print(f"| {BACKENDS[r['backend']]} | {r['n']:,} | {cells} | {r['lexicon_ms']:.0f} | {r['rss_end']:.0f} "
              f"| {r['segments_end']} |")  # fmt: skip
    print(
        "\n### CPU time per query, ms (mean; the process's, all threads: Milvus Lite's server runs in them)\n"
    )
    print("| backend | N | vector | keyword | hybrid |")
    print("|---|--:|--:|--:|--:|")
    for r in results:
        if "vector_ms" in r:
            cells = " | ".join(f"{r[f'{m}_cpu_ms']:.1f}" for m in MODES)
            print(f"| {BACKENDS[r['backend']]} | {r['n']:,} | {cells} |")
    print("\n### Answers: the query's own chunk in the top 10; top-10 overlap of the two backends\n")
    print("| backend | N | vector | keyword | hybrid |")
    print("|---|--:|--:|--:|--:|")
    done = [r for r in results if "vector_ms" in r]
    for r in done:
        cells = " | ".join(f"{r[f'{m}_found']:.1%}" for m in MODES)
        print(f"| {BACKENDS[r['backend']]} | {r['n']:,} | {cells} |")
    for n in sorted({r["n"] for r in done}):
        pair = [r for r in done if r["n"] == n]
        if len(pair) == 2:
            a, b = pair
            cells = " | ".join(
                f"{statistics.mean(len(set(x) & set(y)) / K for x, y in zip(a[f'{m}_top'], b[f'{m}_top'], strict=True)):.1%}"
                for m in MODES
            )
            print(f"| both (shared top 10) | {n:,} | {cells} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000", help="chunks, comma-separated (1000000 works, given time)")
    ap.add_argument("--queries", type=int, default=200, help="queries per mode")
    ap.add_argument("--backends", default="zvec,milvus")
    ap.add_argument(
        "--budget", type=float, default=30.0, help="minutes a build may take before it is stopped"
    )
    ap.add_argument("--one", choices=sorted(BACKENDS), help=argparse.SUPPRESS)  # the child: this backend
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",") if x]
    if a.one is not None:
        print(json.dumps(one(a.one, sizes[0], a.queries, a.budget * 60)), flush=True)
        return 0
    backends = [b for b in a.backends.split(",") if b]
    for b in backends:
        if b not in BACKENDS:
            ap.error(f"unknown backend {b!r} (choose from {', '.join(BACKENDS)})")
    argv_shown = sys.argv[1:] if argv is None else argv
    print(f"Command: `python -m bench.bench_milvus {shlex.join(argv_shown)}`")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}; each backend in a fresh process", flush=True)  # fmt: skip
    before = loadavg()
    t0 = time.perf_counter()
    results = []
    for n in sizes:
        for b in backends:
            r = run_child(b, n, a.queries, a.budget)
            results.append(r)
            if r.get("written"):
                rate = r["written"] / r["build_s"]
                stopped = "" if r["written"] == n else f" (stopped by --budget at {r['written']:,})"
                print(f"{BACKENDS[b]} N={n:,}: built at {rate:,.0f} chunks/s in {r['build_s']:.0f} s{stopped}; the whole "
                      f"child {r['wall_s']:.0f} s; 1,000,000 chunks at this rate: "
                      f"{1_000_000 / rate / 60:.0f} min", flush=True)  # fmt: skip
            else:
                print(f"{BACKENDS[b]} N={n:,}: {r.get('failed', 'no figures')}", flush=True)
    print(f"\nLoad average (1, 5, 15 min): {before} before, {loadavg()} after; "
          f"{time.perf_counter() - t0:.0f} s in all")  # fmt: skip
    print_tables(results, a.queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
