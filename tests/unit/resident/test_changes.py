"""The agent's journal of document changes (resident/changes.py): what a directory job's result records in the
history and tells the listeners (MCP's change announcements), in the history's one vocabulary of changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.config import HistoryConfig
from ragd.pipeline.dirjob import DirResult
from ragd.pipeline.mushroom import Event
from ragd.pipeline.outcome import FileOutcome
from ragd.resident.changes import Change, ChangeLog
from ragd.resident.history import History
from ragd.vocabulary import KINDS, FileState, NoteStatus

D = Path("/kb/notes")


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "data", HistoryConfig(), embedding="fake:8")


def _result(*files: FileOutcome, events: tuple[Event, ...] = (), directory: Path = D) -> DirResult:
    return DirResult(directory, files, events=events)


def _told(log: ChangeLog) -> list[list[Change]]:
    heard: list[list[Change]] = []
    log.listen(heard.append)
    return heard


def test_a_jobs_changes_are_told_and_unchanged_files_are_not() -> None:
    log = ChangeLog()
    heard = _told(log)
    log.record(_result(FileOutcome("new.md", FileState.EMBEDDED, chunks=2), FileOutcome("same.md", FileState.UNCHANGED),
                       FileOutcome("touched.md", FileState.TOUCHED),
                       FileOutcome("bad.pdf", FileState.FAILED, reason="encrypted"),
                       FileOutcome("big.bin", FileState.SKIPPED, reason="binary"),
                       events=(Event("old.md", NoteStatus.DELETE), Event("sub", NoteStatus.DIR_DELETE),
                               Event("new.md", NoteStatus.UPSERT))))  # fmt: skip
    assert len(heard) == 1
    got = {(c.path.name, c.kind, c.is_dir, c.reason) for c in heard[0]}
    assert got == {("new.md", "changed", False, ""), ("bad.pdf", "failed", False, "encrypted"),
                   ("big.bin", "skipped", False, "binary"), ("old.md", "deleted", False, ""),
                   ("sub", "deleted", True, "")}  # fmt: skip
    assert {c.kind for c in heard[0]} <= set(KINDS)  # one vocabulary: the history's


def test_the_changes_told_are_those_the_history_recorded(history: History, tmp_path: Path) -> None:
    """One journal: a file indexed now is told as the history recorded it (created, changed, moved, recovered),
    not in a vocabulary of the announcements' own."""
    log = ChangeLog(history=history)
    heard = _told(log)
    kb = tmp_path / "kb"

    def indexed(name: str, doc: str, md5: str, directory: Path = kb) -> None:
        log.record(_result(FileOutcome(name, FileState.EMBEDDED, chunks=1, md5=md5, document_id=doc, size=1),
                           directory=directory))  # fmt: skip

    indexed("a.md", "A", "m1")
    indexed("a.md", "A", "m2")
    log.record(_result(FileOutcome("a.md", FileState.FAILED, reason="parse error", document_id="A", md5="m3"),
                       directory=kb))  # fmt: skip
    indexed("a.md", "A", "m3")
    indexed("b.md", "A", "m3", directory=kb / "sub")  # its entry came along: a move
    told = [(c.path.relative_to(kb), c.kind) for batch in heard for c in batch]
    assert told == [(Path("a.md"), "created"), (Path("a.md"), "changed"), (Path("a.md"), "failed"),
                    (Path("a.md"), "recovered"), (Path("sub/b.md"), "moved")]  # fmt: skip
    recorded, _ = history.changes(limit=100)
    assert [(e.kind, Path(e.path).name) for e in recorded][:2] == [("moved", "b.md"), ("recovered", "a.md")]


def test_a_failing_listener_changes_nothing_and_a_stopped_one_hears_nothing() -> None:
    log = ChangeLog()

    def broken(changes: list[Change]) -> None:
        raise RuntimeError("a listener's bug")

    stop = log.listen(broken)
    heard = _told(log)
    log.record(_result(FileOutcome("0.md", FileState.EMBEDDED)))
    stop()
    log.record(_result(FileOutcome("1.md", FileState.EMBEDDED)))
    assert [c.path.name for batch in heard for c in batch] == ["0.md", "1.md"]


def test_a_directory_removed_but_for_a_nested_root_is_told_document_by_document(
    history: History, tmp_path: Path
) -> None:
    """Announcing the whole directory removed would tell a client that the nested root's documents went too."""
    log = ChangeLog(history=history)
    outer = tmp_path / "kb"
    for d, name in ((outer, "a.md"), (outer / "inner", "b.md")):
        log.record(
            DirResult(d, (FileOutcome(name, FileState.EMBEDDED, md5="m" + name, document_id=name, size=1),))
        )
    heard = _told(log)
    log.removed(outer, keep=[outer / "inner"], detail="its root was removed")
    assert [(c.path, c.kind, c.is_dir) for c in heard[-1]] == [(outer / "a.md", "deleted", False)]
    log.removed(outer / "inner")
    assert [(c.path, c.kind, c.is_dir) for c in heard[-1]] == [(outer / "inner", "deleted", True)]
