"""`verify`: the index checked against the sidecars of every root, and repaired."""

from __future__ import annotations

from tests.integration.verbs.conftest import DOCS, Running


def test_a_clean_index_needs_no_repair(running: Running) -> None:
    report = running.ctl("verify")
    assert report["trigger"] == "request" and report["repaired"] == 0 and report["removed"] == 0
    assert report["sources"] == len(DOCS) == report["indexed"]


def test_a_source_missing_from_the_index_is_put_back(running: Running) -> None:
    source = str(running.root / "sub" / "gamma.md")

    def drop(sync):  # type: ignore[no-untyped-def]
        n = sync.index.delete_source(source)
        sync.index.flush()
        return n

    assert running.life.agent.write(drop).result() > 0  # damage, through the writer as any write goes
    report = running.ctl("verify")
    assert report["repaired"] == 1 and report["repaired_paths"] == [source]
    assert source in running.ctl("index", {"sources": True})["sources"]
    assert running.ctl("status")["index"]["verify"]["repaired_total"] >= 1
