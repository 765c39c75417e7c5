"""`index`: the collection's statistics and sources, and a rebuild from the sidecars."""

from __future__ import annotations

from tests.integration.verbs.conftest import DOCS, Running


def test_index_statistics_and_sources(running: Running) -> None:
    stats = running.ctl("index")
    assert stats["documents"] >= len(DOCS) and "sources" not in stats
    sources = running.ctl("index", {"sources": True})["sources"]
    assert sources == sorted(str(running.root / rel) for rel in DOCS)


def test_a_rebuild_refills_the_index_from_the_sidecars(running: Running) -> None:
    before = running.ctl("index")["documents"]
    streamed: list = []
    res = running.ctl("index", {"rebuild": True}, streamed)
    assert res["sources"] == len(DOCS) and res["chunks"] == before
    hits = running.ctl("search", {"query": "zyxdelta", "mode": "keyword", "top_k": 1})["results"]
    assert hits and hits[0]["path"].endswith("delta.md")
