"""Search at scale (issue 14): query latency and vector recall on one large collection.

    python -m bench.bench_scale [--size 100000] [--queries 200] [--type flat|hnsw] [--ef N] [--path DIR]
                                [--vectors DIR] [--m M] [--ef-construction N]

A collection of `--size` synthetic chunks (bench_index.synth: 60 Zipf words of a 20,000-word Chinese and English
vocabulary, its 39 named words each in 15-99.8 % of the chunks; 512-d vectors around 1,000 centres), bulk-loaded
into the collection and its keyword index (`--path DIR` keeps both there and reuses them in a later run). With
`--type hnsw` the collection is optimized (the graph built) once after loading. Queries as bench_index's: a
perturbed chunk vector, and two words of that chunk. Printed: the load and optimize times, the first query, then
p50 / p95 / max per mode (vector, keyword, hybrid; k = 10), the vector side's recall@10 against exact search
(numpy over the same vectors), the process's RSS and the load average, and the time to list the sources below a
folder that holds none (what each new folder's first job asks of the index writer). Prints figures; asserts
nothing.

With `--vectors DIR` (made by `python -m bench.real_vectors DIR`: passages of real documentation and their
vectors from the bundled model) the collection holds the first `--size` of those passages instead, and the
queries are the last `--queries` passages, which the collection does not hold: the vector of another passage,
and two words of it. `--m` and `--ef-construction` set the HNSW graph's degree and build breadth.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_index import DIM, bulk_load, pct, rss_mib, synth
from ragd.config import IndexConfig
from ragd.index import open_index
from ragd.model import EmbeddingIdentity


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--type", choices=["flat", "hnsw"], default="flat")
    ap.add_argument("--ef", type=int, default=0, help="HNSW search breadth (0: IndexConfig's default)")
    ap.add_argument("--path", type=Path, help="keep the collection here (reused when it exists)")
    ap.add_argument(
        "--vectors", type=Path, help="real passages and vectors (bench.real_vectors) instead of synth"
    )
    ap.add_argument("--m", type=int, default=16, help="HNSW graph degree (IndexConfig.hnsw_m)")
    ap.add_argument("--ef-construction", type=int, default=200, help="HNSW build breadth")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    r = random.Random(9)
    if a.vectors:
        vecs, texts, qv, qtexts = real(a.vectors, a.size, a.queries)
    else:
        vecs, texts = synth(a.size)
        rng = np.random.default_rng(9)
        picks = rng.integers(0, a.size, a.queries)
        qv = vecs[picks] + 0.3 * rng.standard_normal((a.queries, DIM)).astype(np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        qtexts = [texts[int(i)] for i in picks]
    queries = [
        (qv[i], " ".join(r.sample(qtexts[i].split()[:60], min(2, len(qtexts[i].split())))))
        for i in range(a.queries)
    ]
    cfg = IndexConfig(type=a.type, hnsw_m=a.m, hnsw_ef_construction=a.ef_construction,
                      **({"hnsw_ef": a.ef} if a.ef else {}))  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ragd-bench-scale-") as t:
        path = a.path or Path(t) / "c"
        fresh = not path.exists()
        idx: Any = open_index(path, EmbeddingIdentity("bench-512", DIM), cfg)
        if fresh:
            t0, c0 = time.perf_counter(), time.process_time()
            bulk_load(idx, vecs, texts)
            idx.flush()
            took, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(f"N={a.size}: bulk-loaded in {took:.0f} s ({a.size / took:,.0f} chunks/s, "
                  f"{a.size / cpu:,.0f} per CPU-s), collection and keyword index")  # fmt: skip
        if idx.needs_optimize:
            t0 = time.perf_counter()
            idx.optimize()
            print(f"optimize ({a.type}): {time.perf_counter() - t0:.0f} s")
        t0 = time.perf_counter()
        idx.query(vector=queries[0][0], text=queries[0][1], k=10)
        print(f"first hybrid query: {(time.perf_counter() - t0) * 1000:.0f} ms; RSS {rss_mib():.0f} MiB")
        for mode in ("vector", "keyword", "hybrid"):
            lat = []
            for vec, text in queries:
                t0 = time.perf_counter()
                idx.query(
                    vector=None if mode == "keyword" else vec, text=None if mode == "vector" else text, k=10
                )
                lat.append((time.perf_counter() - t0) * 1000)
            print(f"  {mode:7s} p50 {pct(lat, 50):7.2f} ms  p95 {pct(lat, 95):7.2f} ms  max {max(lat):7.1f} ms"
                  f"  (load {os.getloadavg()[0]:.1f})")  # fmt: skip
        recall = []
        for vec, _ in queries:
            exact = np.argsort(-(vecs @ vec))[:10]
            want = {f"{i // 10}#{i % 10}" for i in exact.tolist()}
            got = {f"{int(h.source_path.rsplit('/f', 1)[1][:-3])}#{h.chunk_index}"
                   for h in idx.query(vector=vec, text=None, k=10)}  # fmt: skip
            recall.append(len(want & got) / 10)
        print(f"  vector recall@10 against exact search: {np.mean(recall):.3f}; RSS {rss_mib():.0f} MiB")
        # what a folder found with no store costs the index writer (IndexSync.prune_gone): its indexed sources
        # listed, none for a new folder
        lat = []
        for i in range(50):
            t0 = time.perf_counter()
            idx.sources(f"/nowhere/new folder {i}")
            lat.append((time.perf_counter() - t0) * 1000)
        print(f"  sources below a folder with none indexed: p50 {pct(lat, 50):.2f} ms  max {max(lat):.1f} ms")
        idx.close()


def real(where: Path, size: int, queries: int) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """The first `size` passages of `where` (bench.real_vectors) and their vectors; the last `queries` as queries."""
    vectors = np.load(where / "vectors.npy", mmap_mode="r")
    texts = json.loads((where / "texts.json").read_text())
    if size + queries > len(texts):
        raise SystemExit(f"{where} holds {len(texts):,} passages: fewer than --size + --queries")
    from ragd.index.keyword.words import joined

    return (np.ascontiguousarray(vectors[:size]), texts[:size], np.ascontiguousarray(vectors[-queries:]),
            [joined(t) for t in texts[-queries:]])  # fmt: skip


if __name__ == "__main__":
    main()
