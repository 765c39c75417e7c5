"""`verify`: the index checked against the sidecars of every root, and repaired."""

from __future__ import annotations

from tests.integration.verbs.conftest import DOCS, Running
from tests.support.poll import poll


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


def test_a_folder_moved_while_its_parent_waits_for_its_job_is_not_repaired(running: Running) -> None:
    """The parent's job records a move (and updates the index); a pass that runs before it must leave the moved
    folder's old sources alone rather than "repair" them away with a warning (found using the agent: a folder
    renamed right after `roots add`/`remove` logged 491 removals, each a false alarm of a bug)."""
    agent = running.life.agent
    running.ctl("pause")  # the parent's job waits in the queue
    (running.root / "sub").rename(running.root / "moved")
    poll(lambda: agent.dir_busy(running.root), timeout=10, what="the root's job queued")
    report = running.ctl("verify")
    assert report["removed"] == 0 and report["repaired"] == 0, report
    running.ctl("resume")
    running.wait()
    sources = running.ctl("index", {"sources": True})["sources"]
    assert sorted(sources) == sorted(str(running.root / rel.replace("sub/", "moved/", 1)) for rel in DOCS)
    again = running.ctl("verify")
    assert again["removed"] == 0 and again["repaired"] == 0, again
