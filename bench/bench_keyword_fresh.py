"""Keyword rank and BM25 score of a freshly written document, against the same document after a rebuild.

    python -m bench.bench_keyword_fresh [--chunks 3000,8000] [--per-source 6] [--types flat,hnsw]

Builds a collection the way the agent does: `replace_source` per source, a flush per batch of 20 sources (one
batch of change notes), the agent's optimize policy after each batch (`if needs_optimize: optimize()`), and the
listings the agent makes meanwhile: `sources(root)` (reconcile, every 100 sources and at the end) and
`sources(None)` (`ragctl orphans`, `ragctl index --sources`: every 300 sources and at the end). Then one more source is written, holding the rare word "zanzibarian" in one chunk, and
keyword queries for it are run: the rare word alone, and with a common word of the corpus. The same documents
written into a new collection in one go (what `ragctl index --rebuild` does) give the reference figures.
zvec 0.8 computes BM25 statistics (document count, average length, document frequency) per segment, so a fresh
document that lands in a small segment scores far too low (docs/zvec-notes.md). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from ragd.config import IndexConfig
from ragd.index import IndexBackend, IndexChunk, open_index
from ragd.model import EmbeddingIdentity

from .bench_index import DIM, synth

IDENT = EmbeddingIdentity("bench-512", DIM)
ROOT = "/bench"
FRESH = f"{ROOT}/fresh/renamed report.docx"
RARE = "zanzibarian"


def _chunks(path: str, texts: list[str], vecs: np.ndarray) -> list[IndexChunk]:
    return [IndexChunk(path, i, t, str(hash(t)), f"File: {Path(path).name}", v) for i, (t, v) in enumerate(zip(texts, vecs, strict=True))]  # fmt: skip


def _sources(n: int, per: int) -> list[tuple[str, list[str], np.ndarray]]:
    vecs, texts = synth(n + per)
    out = [(f"{ROOT}/d{s % 25}/f{s}.md", texts[s * per : (s + 1) * per], vecs[s * per : (s + 1) * per])
           for s in range(n // per)]  # fmt: skip
    fresh = list(texts[n : n + per])
    fresh[1] = f"{fresh[1]} {RARE} quarterly figures"
    out.append((FRESH, fresh, vecs[n : n + per]))
    return out


def _agent_build(idx: IndexBackend, sources: list[tuple[str, list[str], np.ndarray]]) -> int:
    optimized = 0
    for s, (path, texts, vecs) in enumerate(sources, 1):
        idx.replace_source(path, "md5", ROOT, _chunks(path, texts, vecs))
        if s % 20 == 0 or s == len(sources):  # end of a batch of change notes
            idx.flush()
            if idx.needs_optimize:
                idx.optimize()
                optimized += 1
        if s % 100 == 0:
            idx.sources(ROOT)  # reconcile
        if s % 300 == 0:
            idx.sources(None)  # status, orphans
    idx.sources(ROOT)  # the reconcile after the rescan,
    idx.sources(None)  # and `ragctl orphans` (or `ragctl index --sources`) to check on it
    return optimized


def _rank(idx: IndexBackend, text: str) -> str:
    hits = idx.query(vector=None, text=text, k=100)
    for rank, hit in enumerate(hits, 1):
        if hit.source_path == FRESH:
            return f"rank {rank:3d}, BM25 {hit.score:6.2f}"
    return "not in the top 100"


def _segments(idx: IndexBackend) -> str:
    return str(sum(1 for p in Path(idx.path).iterdir() if p.name.isdigit()))


def bench(n: int, per: int, kind: str, tmp: Path) -> None:
    sources = _sources(n, per)
    common = sources[0][1][0].split()[3]
    queries = [RARE, f"{RARE} {common}"]
    t0 = time.perf_counter()
    cfg = IndexConfig(type=kind)  # type: ignore[arg-type]
    agent = open_index(tmp / f"agent-{kind}-{n}", IDENT, cfg)
    optimized = _agent_build(agent, sources[:-1])
    path, texts, vecs = sources[-1]
    agent.replace_source(path, "md5", ROOT, _chunks(path, texts, vecs))  # the renamed file
    agent.flush()
    if agent.needs_optimize:
        agent.optimize()
        optimized += 1
    build_s = time.perf_counter() - t0
    rebuilt = open_index(tmp / f"rebuilt-{kind}-{n}", IDENT, cfg)
    for path, texts, vecs in sources:
        rebuilt.replace_source(path, "md5", ROOT, _chunks(path, texts, vecs))
    rebuilt.flush()
    if rebuilt.needs_optimize:
        rebuilt.optimize()
    print(f"{agent.count()} chunks, {kind}, agent pattern ({optimized} optimize, {_segments(agent)} segment dirs, "
          f"built in {build_s:.0f} s) vs rebuilt ({_segments(rebuilt)} segment dirs):")  # fmt: skip
    for q in queries:
        print(f"  {q!r:28s} fresh: {_rank(agent, q)}   after a rebuild: {_rank(rebuilt, q)}")
    agent.close()
    rebuilt.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", default="3000,8000", help="comma-separated collection sizes")
    ap.add_argument("--per-source", type=int, default=6)
    ap.add_argument("--types", default="flat", help="comma-separated index types (flat, hnsw)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragd-bench-kw-") as tmp:
        for kind in args.types.split(","):
            for n in (int(x) for x in args.chunks.split(",")):
                bench(n, args.per_source, kind, Path(tmp))


if __name__ == "__main__":
    main()
