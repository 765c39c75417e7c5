"""A freshly written document ranks for its words as it does after a rebuild.

zvec 0.8 computed its full-text BM25 statistics per segment, and both `iter_docs` on a writable collection and
`optimize()` seal the writing segment: what was written next landed in a small new segment where a rare word's IDF
was that of a handful of documents. The keyword index is tantivy's now (schema 5), with statistics over the whole
collection; these tests still write, list and query real collections the way the agent does, and pin that.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.index import IndexBackend, open_index, open_or_rebuild
from ragd.index.zvec import scan as index_scan
from ragd.index.zvec.backend import ZvecIndex
from ragd.index.zvec.schema import CHUNK_INDEX, SOURCE_PATH
from ragd.model import md5_hex
from tests.unit.index.test_index_zvec import IDENTITY, embed, make_chunks

VOCAB = [f"word{i}" for i in range(400)] + ["battery", "charger", "network", "config", "backup"]
RARE = "zanzibarian"


def _corpus(n_sources: int, per: int = 5) -> dict[str, list[str]]:
    rng = random.Random(5)
    return {
        f"d{s % 7}/f{s}.md": [" ".join(rng.choices(VOCAB, k=40)) for _ in range(per)]
        for s in range(n_sources)
    }


FRESH = "fresh/renamed report.docx"
FRESH_TEXTS = [
    "battery charger quarterly notes " * 3,
    f"the {RARE} figures for the battery line",
    "closing words",
]


def _write(ix: IndexBackend, root: Path, rel: str, texts: list[str]) -> None:
    path = str(root / rel)
    ix.replace_source(path, md5_hex("".join(texts)), str(root), make_chunks(path, texts))


def _agent_pattern(ix: IndexBackend, root: Path, corpus: dict[str, list[str]]) -> None:
    """Batches of change notes (a flush each), the reconcile's and `ragctl orphans`' listings in between."""
    for n, (rel, texts) in enumerate(corpus.items(), 1):
        _write(ix, root, rel, texts)
        if n % 20 == 0:
            ix.flush()
            ix.sources(str(root))
            ix.sources(None)
    ix.flush()
    ix.sources(str(root))  # the reconcile after a rescan
    ix.sources(None)  # `ragctl orphans`
    ix.sources(str(root / "d3"))
    ix.delete_subtree(str(root / "no\\such"))  # a path the filter cannot match exactly (re-checked rows)


def _rank_and_score(ix: IndexBackend, root: Path, text: str) -> tuple[int | None, float]:
    hits = ix.query(vector=None, text=text, k=100)
    for rank, hit in enumerate(hits, 1):
        if hit.source_path == str(root / FRESH):
            return rank, hit.score
    return None, 0.0


def test_fresh_document_ranks_as_after_a_rebuild(tmp_path: Path) -> None:
    root, corpus = tmp_path / "kb", _corpus(80)
    agent = open_index(tmp_path / "agent", IDENTITY, IndexConfig())
    rebuilt = open_index(tmp_path / "rebuilt", IDENTITY, IndexConfig())
    try:
        _agent_pattern(agent, root, corpus)
        _write(agent, root, FRESH, FRESH_TEXTS)
        agent.flush()
        for rel, texts in [*corpus.items(), (FRESH, FRESH_TEXTS)]:
            _write(rebuilt, root, rel, texts)
        rebuilt.flush()
        for text in (RARE, f"{RARE} battery"):
            rank, score = _rank_and_score(agent, root, text)
            _, reference = _rank_and_score(rebuilt, root, text)
            assert rank == 1, (text, rank, score, reference)
            assert reference / 2 <= score <= reference * 2, (text, score, reference)
        hybrid = agent.query(vector=embed(f"{RARE} battery"), text=f"{RARE} battery", k=3)
        assert hybrid[0].source_path == str(root / FRESH)  # keyword evidence survives the fusion's floor
        assert isinstance(agent, ZvecIndex) and agent.segments == 1  # listing sealed nothing
    finally:
        agent.close()
        rebuilt.close()


@pytest.mark.parametrize("limit", [7, 13, 20])
def test_listing_a_writable_collection_in_ranges_finds_every_row(tmp_path: Path, limit: int) -> None:
    """More rows than one query returns: ranges of chunk_index, split while a query comes back full."""
    root = tmp_path / "kb"
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    try:
        for s in range(12):
            _write(ix, root, f"f{s}.md", [f"text {s} {i}" for i in range(s % 5 + 1)])
        ix.flush()
        assert isinstance(ix, ZvecIndex)
        coll = ix._live()
        got = index_scan.rows(coll, None, [SOURCE_PATH, CHUNK_INDEX], seal_ok=False, limit=limit)
        keys = sorted((d.fields[SOURCE_PATH], d.fields[CHUNK_INDEX]) for d in got)
        want = sorted((str(root / f"f{s}.md"), i) for s in range(12) for i in range(s % 5 + 1))
        assert keys == want
        under = index_scan.rows(coll, f"{SOURCE_PATH} LIKE '%f1%'", [SOURCE_PATH], seal_ok=False, limit=limit)
        assert {d.fields[SOURCE_PATH] for d in under} == {str(root / f"f{s}.md") for s in (1, 10, 11)}
        # 12 sources have a chunk 0: with room for fewer in one query only iter_docs lists them (and seals)
        assert ix.segments == (1 if limit > 12 else 2)
    finally:
        ix.close()


def test_a_document_written_after_a_seal_scores_as_in_one_segment(tmp_path: Path) -> None:
    """The keyword index keeps its statistics over the whole collection (schema 5): a collection that zvec split
    into segments is kept as it is, and a rare word written after the seal scores as in a collection written at
    once (with zvec's own full-text field it scored far too low, and such a collection was rebuilt)."""
    root, corpus = tmp_path / "kb", _corpus(40)
    ix = open_index(tmp_path / "split", IDENTITY, IndexConfig())
    whole = open_index(tmp_path / "whole", IDENTITY, IndexConfig())
    try:
        for rel, texts in corpus.items():
            _write(ix, root, rel, texts)
            _write(whole, root, rel, texts)
        ix.flush()
        ix.optimize()  # seals the segment
        _write(ix, root, FRESH, FRESH_TEXTS)
        _write(whole, root, FRESH, FRESH_TEXTS)
        assert isinstance(ix, ZvecIndex) and ix.segments > 1
        for text in (RARE, f"{RARE} battery"):
            assert _rank_and_score(ix, root, text) == pytest.approx(_rank_and_score(whole, root, text))
    finally:
        ix.close()
        whole.close()
    ix, rebuilt = open_or_rebuild(tmp_path / "split", IDENTITY, IndexConfig())
    try:
        assert not rebuilt and ix.count() == 40 * 5 + 3
    finally:
        ix.close()


def test_an_hnsw_collection_keeps_its_segments(tmp_path: Path) -> None:
    cfg = IndexConfig(type="hnsw", hnsw_m=8, hnsw_ef_construction=32)
    ix = open_index(tmp_path, IDENTITY, cfg)
    _write(ix, tmp_path / "kb", "a.md", ["alpha words"])
    ix.optimize()
    _write(ix, tmp_path / "kb", "b.md", ["beta words"])
    ix.close()
    ix, rebuilt = open_or_rebuild(tmp_path, IDENTITY, cfg)
    try:
        assert not rebuilt and ix.count() == 2 and ix.stats()["segments"] > 1
    finally:
        ix.close()
