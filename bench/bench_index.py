"""Benchmarks of the zvec index (issue 3). Prints figures; asserts nothing.

    python -m bench.bench_index --sizes 10000,100000 [--queries 200] [--types flat,hnsw]
    python -m bench.bench_index --reconcile 10000

For each size N (512-d synthetic vectors drawn around 1,000 cluster centres; chunk texts of 60 words drawn with
Zipf frequencies from a 20,000-word vocabulary that includes Chinese and English words): index sync throughput (chunks/s through `replace_source`, 10 chunks per source), optimize time, query
latency p50/p95 for hybrid, vector and keyword with the index optimized, recall@10 of HNSW against flat (exact),
and the process's RSS after building. `--reconcile N` times the start-up check of N indexed sources against their
sidecars (an index written by `ragd run --once` on a generated tree).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ragd.config import IndexConfig
from ragd.index import IndexChunk, open_index
from ragd.model import EmbeddingIdentity

DIM = 512
WORDS = ["battery", "charger", "kubernetes", "gradient", "backup", "socket", "timeout", "vector", "index", "search", "manual", "install", "error", "config", "agent", "folder", "network", "namespace", "release", "sync", "latency", "电池", "快充", "向量", "数据库", "倒排", "索引", "备份", "配置", "手册", "安装", "错误", "网络", "延迟", "同步", "检索", "代理", "文件夹", "模型"]  # fmt: skip


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synth(n: int, seed: int = 5) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, DIM)).astype(np.float32)
    vecs = centres[rng.integers(0, 1000, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vocab = np.array(WORDS + [f"w{i}" for i in range(20000)])
    zipf = 1.0 / np.arange(1, len(vocab) + 1)  # word frequencies as in natural text
    picks = rng.choice(len(vocab), size=(n, 60), p=zipf / zipf.sum())
    texts = [" ".join(vocab[row]) + f" item{i}" for i, row in enumerate(picks)]
    return vecs, texts


def bulk_load(idx: object, vecs: np.ndarray, texts: list[str]) -> None:
    """Insert straight into the collection, 1,024 documents a call (zvec's limit), skipping replace_source's
    per-source lookup: how a 1M-chunk collection can be built for measuring queries in reasonable time."""
    from ragd.index.zvec_schema import to_doc

    with idx._exclusive("write") as coll:  # type: ignore[attr-defined]
        for s in range(0, len(texts), 1024):
            docs = [to_doc(f"/bench/d{i // 10000}/f{i // 10}.md", "md5", "/bench",
                           IndexChunk(f"/bench/d{i // 10000}/f{i // 10}.md", i % 10, texts[i], str(i), "File: bench",
                                      vecs[i]), DIM)
                    for i in range(s, min(s + 1024, len(texts)))]  # fmt: skip
            coll.insert(docs)


def build(
    path: Path, kind: str, vecs: np.ndarray, texts: list[str], bulk: bool = False
) -> tuple[object, float, float]:
    ident = EmbeddingIdentity("bench-512", DIM)
    idx = open_index(path, ident, IndexConfig(type=kind))  # type: ignore[arg-type]
    t0 = time.perf_counter()
    if bulk:
        bulk_load(idx, vecs, texts)
    for s in range(0, 0 if bulk else len(texts), 10):
        src = f"/bench/d{s // 1000}/f{s}.md"
        chunks = [IndexChunk(src, i, texts[s + i], str(s + i), "File: bench", vecs[s + i])
                  for i in range(min(10, len(texts) - s))]  # fmt: skip
        idx.replace_source(src, "md5", "/bench", chunks)
    idx.flush()
    ingest = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx.optimize()
    return idx, ingest, time.perf_counter() - t0


def latencies(idx: object, mode: str, queries: list[tuple[np.ndarray, str]]) -> list[float]:
    out = []
    for vec, text in queries:
        t0 = time.perf_counter()
        idx.query(vector=None if mode == "keyword" else vec, text=None if mode == "vector" else text, k=10)  # type: ignore[attr-defined]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(xs: list[float], p: float) -> float:
    return statistics.quantiles(xs, n=100)[int(p) - 1] if len(xs) > 1 else xs[0]


def bench_size(n: int, kinds: list[str], nq: int, tmp: Path, bulk: bool = False) -> None:
    vecs, texts = synth(n)
    rng = np.random.default_rng(9)
    r = random.Random(9)
    picks = rng.integers(0, n, nq)
    qv = vecs[picks] + 0.3 * rng.standard_normal((nq, DIM)).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    # keyword queries: two words of a chunk the query is about (what a person remembers of a document)
    queries = [(qv[i], " ".join(r.sample(texts[int(picks[i])].split()[:60], 2))) for i in range(nq)]
    results: dict[str, list[list[str]]] = {}
    for kind in kinds:
        idx, ingest, opt = build(tmp / f"{kind}-{n}", kind, vecs, texts, bulk)
        how = "bulk insert" if bulk else "sync"
        print(f"N={n} {kind}: {how} {n / ingest:,.0f} chunks/s ({ingest:.1f} s), optimize {opt:.1f} s, "
              f"RSS {rss_mib():.0f} MiB")  # fmt: skip
        for mode in ("hybrid", "vector", "keyword"):
            lat = latencies(idx, mode, queries)
            print(f"  {mode:7s} p50 {pct(lat, 50):7.2f} ms  p95 {pct(lat, 95):7.2f} ms")
        results[kind] = [[f"{h.source_path}#{h.chunk_index}" for h in idx.query(vector=v, text=None, k=10)]  # type: ignore[attr-defined]
                         for v, _ in queries]  # fmt: skip
        idx.close()  # type: ignore[attr-defined]
    if "flat" in results and "hnsw" in results:
        rec = [len(set(a) & set(b)) / 10 for a, b in zip(results["hnsw"], results["flat"], strict=True)]
        print(f"  recall@10 of HNSW (m=16, ef_construction=200) vs flat: {statistics.mean(rec):.3f}")


def bench_reconcile(n: int, tmp: Path) -> None:
    import subprocess

    from bench.corpus import generate
    from bench.fake_api import EmbeddingsAPI
    from ragd.config import Config
    from ragd.index.sync import IndexSync
    from ragd.pipeline.scan import Ignore, walk_dirs

    root = tmp / "tree"
    generate(root, n, 100, seed=3, mean_bytes=600)
    with EmbeddingsAPI(dim=DIM) as server:
        cfg_text = (f'[embedding]\nprovider = "openai"\nmodel = "fake-512"\ndimension = {DIM}\n'
                    f'base_url = "{server.base_url}"\napi_key = "x"\nbatch_size = 256\n')  # fmt: skip
        (tmp / "c.toml").write_text(cfg_text)
        env = {**os.environ, "RAGD_CONFIG": str(tmp / "c.toml"), "RAGD_DATA_DIR": str(tmp / "data")}
        subprocess.run([sys.executable, "-m", "ragd", "-q", "run", "--once", str(root)], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    cfg = Config.model_validate({"embedding": {"provider": "openai", "model": "fake-512", "dimension": DIM},
                                 "roots": [str(root)]})  # fmt: skip
    idx = open_index(tmp / "data", cfg.identity, cfg.index)
    try:
        sync = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore))
        t0 = time.perf_counter()
        report = sync.reconcile()  # reads every sidecar and the index's source list
        took = time.perf_counter() - t0
        t0 = time.perf_counter()
        sources = idx.sources()
        listing = time.perf_counter() - t0
        print(
            f"start-up reconcile of {len(sources)} sources: {took:.2f} s (index source list alone "
            f"{listing:.2f} s; repaired {report.repaired}); walked {sum(1 for _ in walk_dirs(root, sync.ignore))} dirs"
        )
    finally:
        idx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--types", default="flat,hnsw")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--reconcile", type=int, default=0)
    ap.add_argument(
        "--bulk", action="store_true", help="insert in 1,024-document batches instead of per source"
    )
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="ragd-bench-index-") as t:
        for n in (int(x) for x in a.sizes.split(",") if x):
            bench_size(n, a.types.split(","), a.queries, Path(t), a.bulk)
        if a.reconcile:
            bench_reconcile(a.reconcile, Path(t))


if __name__ == "__main__":
    main()
