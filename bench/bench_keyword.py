"""Keyword queries on common words (issue 14): before and after the max-score plans, on one collection.

    python -m bench.bench_keyword [--size 100000] [--queries 200] [--rounds 2] [--optimize] [--path DIR]

A flat collection of `--size` synthetic chunks (bench_index.synth: 60 Zipf words of a 20,000-word Chinese and
English vocabulary, 512-d vectors), bulk-loaded and flushed, not optimized (one writing segment, as the agent
keeps it; `--optimize` seals it first). `--path DIR` keeps the collection there and reuses it in a later run.
Queries as bench_index's: a perturbed chunk vector and two words of that chunk. Each mode (keyword, hybrid) runs
the queries the way `ZvecIndex.query` ran them before (`legacy_query`: every term searched in full) and as it runs
them now, alternating round by round so that both see the same load; printed: p50 / p95 / max per way, the load
average, and whether the two ways returned the same hits (the same chunks in the same order, or the same scores:
equal BM25 scores may come in either order), and for hybrid whether the keyword evidence was the same.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import zvec

from bench.bench_index import DIM, bulk_load, pct, synth
from ragd.config import IndexConfig
from ragd.index import Hit, fts, lexicon, open_index
from ragd.index.fusion import KEYWORD_WEIGHT, TRANSLATED_DEPTH, fuse_documents, keyword_evidence
from ragd.index.zvec_schema import EMBEDDING, FTS_TEXT
from ragd.model import EmbeddingIdentity


def legacy_query(idx: Any, vector: np.ndarray | None, text: str, k: int) -> list[Hit]:
    """`ZvecIndex.query` before the keyword plans (no filters): the OR of all the terms, searched in full."""
    qs = fts.query_string(text)
    keyword = zvec.Query(FTS_TEXT, fts=zvec.Fts(query_string=qs)) if qs else None
    if vector is None:
        return idx._run(keyword, k, None, ()) if keyword else []
    dense = zvec.Query(EMBEDDING, vector=vector.tolist())
    depth = min(max(4 * k, 20), 100)
    cosine = [replace(h, score=1.0 - h.score) for h in idx._run(dense, depth, None, ())]
    weight = 1.0 if fts.identifier_like(text) else KEYWORD_WEIGHT
    found = keyword_evidence(idx._run(keyword, depth, None, ())) if keyword else []
    translated: list[Hit] = []
    if glossed := lexicon.shared().query_string(text):
        glosses = zvec.Query(FTS_TEXT, fts=zvec.Fts(query_string=glossed))
        translated = keyword_evidence(idx._run(glosses, min(depth, TRANSLATED_DEPTH), None, ()))
    return fuse_documents(cosine, found, k, weight, translated)


def timed(way: str, idx: Any, vector: np.ndarray | None, text: str) -> tuple[float, list[Hit]]:
    t0 = time.perf_counter()
    if way == "before":
        out = legacy_query(idx, vector, text, 10)
    else:
        out = idx.query(vector=vector, text=text, k=10)
    return (time.perf_counter() - t0) * 1000, out


def ids(hits: list[Hit]) -> list[str]:
    return [f"{h.source_path}#{h.chunk_index}" for h in hits]


def evidence_same(idx: Any, text: str) -> bool:
    """Whether the hybrid search's keyword evidence (its words', and its glosses' if any) is the same both ways:
    the fused lists can still differ where equal BM25 scores come in another order."""
    depth = 40  # k = 10 (ZvecIndex.query: max(4k, 20))
    lists = [(fts.terms(text), depth), (lexicon.shared().terms(text), TRANSLATED_DEPTH)]
    for terms, k in lists:
        if not terms:
            continue
        plain = idx._run(zvec.Query(FTS_TEXT, fts=zvec.Fts(query_string=fts.render(terms))), k, None, ())
        planned = idx._keyword(terms, k, None, (), evidence=True)
        if sorted(scores(keyword_evidence(plain))) != sorted(scores(keyword_evidence(planned))):
            return False
    return True


def scores(hits: list[Hit]) -> list[float]:
    return [round(h.score, 4) for h in hits]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--optimize", action="store_true")
    ap.add_argument("--path", type=Path, help="keep the collection here (reused when it exists)")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    vecs, texts = synth(a.size)
    rng, r = np.random.default_rng(9), random.Random(9)
    picks = rng.integers(0, a.size, a.queries)
    qv = vecs[picks] + 0.3 * rng.standard_normal((a.queries, DIM)).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    queries = [(qv[i], " ".join(r.sample(texts[int(picks[i])].split()[:60], 2))) for i in range(a.queries)]
    with tempfile.TemporaryDirectory(prefix="ragd-bench-keyword-") as t:
        path = a.path or Path(t) / "c"
        fresh = not path.exists()
        idx: Any = open_index(path, EmbeddingIdentity("bench-512", DIM), IndexConfig(type="flat"))
        if fresh:
            t0 = time.perf_counter()
            bulk_load(idx, vecs, texts)
            idx.flush()
            print(f"N={a.size}: bulk-loaded in {time.perf_counter() - t0:.0f} s")
        if a.optimize:
            idx.optimize()
        t0 = time.perf_counter()
        idx.query(vector=None, text=queries[0][1], k=10)  # reads the term sample
        print(f"first keyword query (reads the sample): {(time.perf_counter() - t0) * 1000:.0f} ms")
        for mode in ("keyword", "hybrid"):
            lat: dict[str, list[float]] = {"before": [], "after": []}
            same = tied = 0
            for rnd in range(a.rounds):
                for i, (vec, text) in enumerate(queries):
                    v = None if mode == "keyword" else vec
                    ways = ["before", "after"] if (rnd + i) % 2 == 0 else ["after", "before"]
                    got = {}
                    for way in ways:
                        ms, got[way] = timed(way, idx, v, text)
                        lat[way].append(ms)
                    same += ids(got["before"]) == ids(got["after"])
                    tied += scores(got["before"]) == scores(got["after"])
            n = a.rounds * len(queries)
            print(f"{mode}: load average {os.getloadavg()[0]:.2f}; the same hits in the same order {same}/{n}, "
                  f"the same scores (ties may swap) {tied}/{n}")  # fmt: skip
            if mode == "hybrid":
                print(
                    f"  the same keyword evidence: {sum(evidence_same(idx, t) for _, t in queries)}/{len(queries)}"
                )
            for way, xs in lat.items():
                print(
                    f"  {way:6s} p50 {pct(xs, 50):7.1f} ms  p95 {pct(xs, 95):7.1f} ms  max {max(xs):7.1f} ms"
                )
        idx.close()


if __name__ == "__main__":
    main()
