"""Benchmarks of the zvec index (issue 3). Prints figures; asserts nothing.

    python -m bench.bench_index --sizes 10000,100000 [--queries 200] [--types flat,hnsw]
    python -m bench.bench_index --reconcile 10000
    python -m bench.bench_index --sync-only --sizes 10000,100000 [--sync-chunks 5000]

For each size N (512-d synthetic vectors drawn around 1,000 cluster centres; chunk texts of 60 words drawn with
Zipf frequencies from a 20,000-word vocabulary that includes Chinese and English words): index sync throughput (chunks/s through `replace_source`, 10 chunks per source), optimize time, query
latency p50/p95 for hybrid, vector and keyword with the index optimized, recall@10 of HNSW against flat (exact),
and the process's RSS after building. `--reconcile N` times the start-up check of N indexed sources against their
sidecars (an index written by `ragd run --once` on a generated tree).

`--sync-only` measures index sync on top of a collection of each size (bulk-loaded, flat, not optimized: as the
agent keeps it below `index.hnsw_after`): chunks/s writing new sources and rewriting existing ones (10 chunks
each, shrunk to 8), through replace_source (one source per call) and through write_sources with 100 sources per
call (how a batch of change notes is written), with the count checked at the end. Each write goes to the
collection and to its keyword index (committed at every call).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
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


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # as ragd stores it


def bulk_load(idx: object, vecs: np.ndarray, texts: list[str]) -> None:
    """Insert straight into the collection, 1,024 documents a call (zvec's limit), skipping replace_source's
    per-source lookup: how a 1M-chunk collection can be built for measuring queries in reasonable time."""
    from ragd.index.zvec.schema import to_doc
    from ragd.index.zvec.writes import keyword_doc

    with idx._exclusive("write") as coll:  # type: ignore[attr-defined]
        keywords = idx._keywords()  # type: ignore[attr-defined]
        for s in range(0, len(texts), 1024):
            docs = [to_doc(f"/bench/d{i // 10000}/f{i // 10}.md", "md5", "/bench",
                           IndexChunk(f"/bench/d{i // 10000}/f{i // 10}.md", i % 10, texts[i], _md5(texts[i]), "File: bench",
                                      vecs[i]), DIM, 10)
                    for i in range(s, min(s + 1024, len(texts)))]  # fmt: skip
            coll.insert(docs)
            keywords.add([keyword_doc(d.id, d.fields) for d in docs])
        keywords.commit()


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
        chunks = [IndexChunk(src, i, texts[s + i], _md5(texts[s + i]), "File: bench", vecs[s + i])
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
    from ragd.index.write.sync import IndexSync
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


def _sync_pass(idx: object, how: str, sources: list[tuple[str, list[IndexChunk]]]) -> tuple[float, float]:
    """Write `sources` one of two ways, flush; returns chunks per second of wall time and of CPU time (the
    process's, all threads: less affected by other load on a shared machine)."""
    from ragd.index import SourceWrite

    t0, c0 = time.perf_counter(), time.process_time()
    if how == "write_sources":
        writes = [SourceWrite(src, "md5", "/bench", chunks) for src, chunks in sources]
        for s in range(0, len(writes), 100):
            idx.write_sources(writes[s : s + 100])  # type: ignore[attr-defined]
    for src, chunks in sources if how != "write_sources" else ():
        idx.replace_source(src, "md5", "/bench", chunks)  # type: ignore[attr-defined]
    idx.flush()  # type: ignore[attr-defined]
    n = sum(len(c) for _, c in sources)
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def bench_sync(n: int, m: int, tmp: Path) -> None:
    """Sync throughput on top of n bulk-loaded chunks: m chunks of new sources, then m/10 sources rewritten."""
    hows = ["replace_source", "write_sources"]
    vecs, texts = synth(n + 2 * m * len(hows))
    idx = open_index(tmp / f"sync-{n}", EmbeddingIdentity("bench-512", DIM), IndexConfig(type="flat"))
    t0 = time.perf_counter()
    bulk_load(idx, vecs[:n], texts[:n])
    idx.flush()
    print(
        f"N={n}: base bulk-loaded in {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.1f}"
    )
    fresh = iter(range(n, len(texts)))

    def chunks(src: str, k: int) -> list[IndexChunk]:
        return [
            IndexChunk(src, i, texts[j], str(j), "File: bench", vecs[j])
            for i, j in enumerate(itertools.islice(fresh, k))
        ]

    expected = n
    for h, how in enumerate(hows):
        new = [(f"/bench/new-{how}/f{s}.md", chunks(f"/bench/new-{how}/f{s}.md", 10)) for s in range(m // 10)]
        # existing sources of the base (10 chunks each), rewritten with 8: their last 2 chunks must go
        olds = [f"/bench/d{i // 10000}/f{i // 10}.md" for i in range(h * 10, n, 10 * len(hows))][: m // 10]
        rewrite = [(src, chunks(src, 8)) for src in olds]
        add, change = _sync_pass(idx, how, new), _sync_pass(idx, how, rewrite) if rewrite else (0.0, 0.0)
        expected += 10 * len(new) - 2 * len(rewrite)
        print(f"  {how:14s} new sources {add[0]:6,.0f} chunks/s ({add[1]:6,.0f}/CPU-s)   "
              f"rewritten (shrunk) {change[0]:6,.0f} chunks/s ({change[1]:6,.0f}/CPU-s)")  # fmt: skip
    count = idx.count()
    print(
        f"  chunks in the index: {count:,} ({'as expected' if count == expected else f'EXPECTED {expected:,}'})"
    )
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
    ap.add_argument("--sync-only", action="store_true", help="sync throughput on top of each size")
    ap.add_argument("--sync-chunks", type=int, default=5000, help="chunks written per --sync-only figure")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="ragd-bench-index-") as t:
        for n in (int(x) for x in a.sizes.split(",") if x):
            if a.sync_only:
                bench_sync(n, a.sync_chunks, Path(t))
                continue
            bench_size(n, a.types.split(","), a.queries, Path(t), a.bulk)
        if a.reconcile:
            bench_reconcile(a.reconcile, Path(t))


if __name__ == "__main__":
    main()
