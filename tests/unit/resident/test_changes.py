"""The agent's journal of document changes (resident/changes.py): what a directory job's result records."""

from __future__ import annotations

import time
from pathlib import Path

from ragd.config import HistoryConfig
from ragd.pipeline import mushroom
from ragd.pipeline.dirjob import DirResult
from ragd.pipeline.mushroom import Event
from ragd.pipeline.outcome import FileOutcome
from ragd.pipeline.sidecar import EMBEDDED, FAILED, SKIPPED
from ragd.resident.changes import Change, ChangeLog
from ragd.resident.history import History

D = Path("/kb/notes")


def _result(*files: FileOutcome, events: tuple[Event, ...] = ()) -> DirResult:
    return DirResult(D, files, events=events)


def test_a_jobs_changes_are_recorded_and_unchanged_files_are_not() -> None:
    log = ChangeLog()
    heard: list[list[Change]] = []
    log.listen(heard.append)
    log.record(_result(FileOutcome("new.md", EMBEDDED, chunks=2), FileOutcome("same.md", "UNCHANGED"),
                       FileOutcome("touched.md", "TOUCHED"), FileOutcome("bad.pdf", FAILED, reason="encrypted"),
                       FileOutcome("big.bin", SKIPPED, reason="binary"),
                       events=(Event("old.md", mushroom.DELETE), Event("sub", mushroom.DIR_DELETE),
                               Event("new.md", mushroom.UPSERT))))  # fmt: skip
    found, more = log.since(0)
    got = {(c.path.name, c.kind, c.is_dir, c.reason) for c in found}
    assert got == {("new.md", "indexed", False, ""), ("bad.pdf", "failed", False, "encrypted"),
                   ("big.bin", "skipped", False, "binary"), ("old.md", "removed", False, ""),
                   ("sub", "removed", True, "")}  # fmt: skip
    assert not more and len(heard) == 1 and len(heard[0]) == 5


def test_since_gives_each_paths_latest_change_newest_first_within_the_period_and_prefix() -> None:
    log = ChangeLog()
    log.record(_result(FileOutcome("a.md", EMBEDDED)))
    start = time.time()
    log.record(_result(FileOutcome("b.md", EMBEDDED)))
    log.record(_result(FileOutcome("a.md", FAILED, reason="parse error")))
    log.removed(Path("/kb/other"))
    recent, _ = log.since(start)
    assert [(c.path.name, c.kind) for c in recent] == [
        ("other", "removed"),
        ("a.md", "failed"),
        ("b.md", "indexed"),
    ]
    under, _ = log.since(0, [D])
    assert [c.path.name for c in under] == ["a.md", "b.md"]
    first, more = log.since(0, limit=1)
    assert [c.path.name for c in first] == ["other"] and more


def test_the_journal_keeps_the_latest_changes_and_a_failing_listener_changes_nothing() -> None:
    log = ChangeLog(size=3)

    def broken(changes: list[Change]) -> None:
        raise RuntimeError("a listener's bug")

    stop = log.listen(broken)
    for i in range(5):
        log.record(_result(FileOutcome(f"{i}.md", EMBEDDED)))
    stop()
    found, _ = log.since(0)
    assert [c.path.name for c in found] == ["4.md", "3.md", "2.md"]
    assert log.oldest() == found[-1].at


def test_since_keeps_only_the_kinds_asked_for() -> None:
    log = ChangeLog()
    log.record(_result(FileOutcome("a.md", EMBEDDED), FileOutcome("b.gz", SKIPPED, reason="unsupported")))
    found, _ = log.since(0, kinds=("indexed", "removed"))
    assert [c.path.name for c in found] == ["a.md"]


def test_a_directory_removed_but_for_a_nested_root_is_told_document_by_document(tmp_path: Path) -> None:
    """Announcing the whole directory removed would tell a client that the nested root's documents went too."""
    history = History(tmp_path / "data", HistoryConfig(), embedding="fake:8")
    log = ChangeLog(history=history)
    outer = tmp_path / "kb"
    for d, name in ((outer, "a.md"), (outer / "inner", "b.md")):
        log.record(DirResult(d, (FileOutcome(name, EMBEDDED, md5="m" + name, document_id=name, size=1),)))
    start = time.time()
    log.removed(outer, keep=[outer / "inner"], detail="its root was removed")
    found, _ = log.since(start)
    assert [(c.path, c.kind, c.is_dir) for c in found] == [(outer / "a.md", "removed", False)]
    log.removed(outer / "inner")
    found, _ = log.since(start)
    assert (outer / "inner", "removed", True) in [(c.path, c.kind, c.is_dir) for c in found]
