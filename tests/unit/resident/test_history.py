"""The history store (resident/history.py) on a real SQLite file, fed the directory jobs' own result types: moves
linked in either order, copies, bounds, a damaged file, folder prefixes, and the `since` syntax of `changes`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ragd.config import HistoryConfig
from ragd.errors import RagdError
from ragd.pipeline.dirjob import DirResult
from ragd.pipeline.identity import derived_id
from ragd.pipeline.mushroom import Event
from ragd.pipeline.outcome import FileOutcome
from ragd.resident import historywrite
from ragd.resident.history import History
from ragd.resident.historydb import FILE_NAME
from ragd.verbs.changes import since_seconds
from ragd.vocabulary import FileState, NoteStatus


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "data", HistoryConfig(), embedding="fake:8", splitter="recursive:1000:200")


def indexed(directory: Path, name: str, doc: str, md5: str, **kw: object) -> DirResult:
    return DirResult(directory, (FileOutcome(name, "EMBEDDED", chunks=2, md5=md5, document_id=doc, size=10,
                                             parser="text", **kw),))  # type: ignore[arg-type]  # fmt: skip


def deleted(directory: Path, name: str, *, whole_dir: bool = False) -> DirResult:
    return DirResult(
        directory, events=(Event(name, NoteStatus.DIR_DELETE if whole_dir else NoteStatus.DELETE),)
    )


def kinds(history: History, **kw: object) -> list[tuple[str, str]]:
    events, _ = history.changes(limit=100, **kw)  # type: ignore[arg-type]
    return [(e.kind, e.path) for e in events]


def test_a_move_is_linked_whichever_directory_job_runs_first(history: History, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    history.record(indexed(a, "x.md", "doc-1", "m1"))
    # the new folder's job first: the old path is gone from the disk, its document not yet marked deleted
    assert history.identify(str(b / "x.md"), "m1", None, False) == "doc-1"
    history.record(indexed(b, "x.md", "doc-1", "m1"))
    history.record(deleted(a, "x.md"))  # then the old folder's job: nothing more to say
    assert kinds(history) == [("moved", str(b / "x.md")), ("created", str(a / "x.md"))]
    # the old folder's job first: deleted, then linked within the move window, and the "deleted" event goes
    history.record(deleted(b, "x.md"))
    assert history.identify(str(a / "y.md"), "m1", None, False) == "doc-1"
    history.record(indexed(a, "y.md", "doc-1", "m1"))
    assert kinds(history)[:2] == [("moved", str(a / "y.md")), ("moved", str(b / "x.md"))]
    doc = history.document(document_id="doc-1")
    assert doc is not None and doc.path == str(a / "y.md") and doc.state == "EMBEDDED"


def test_where_a_moved_file_came_from_is_told_in_either_order_and_not_recorded(
    history: History, tmp_path: Path
) -> None:
    """`left_from` (the jobs' `moved_from`: the vectors of the entry a moved file left) links as `identify` does, and
    writes nothing: the file's own job identifies it afterwards."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    history.record(indexed(a, "x.md", "doc-1", "m1"))
    assert history.left_from(str(b / "x.md"), "m1") == str(a / "x.md")  # a/x.md is gone from the disk
    assert history.left_from(str(b / "x.md"), "m2") is None  # another content
    assert history.left_from(str(b / "x.md"), "") is None  # not read
    assert kinds(history) == [("created", str(a / "x.md"))]  # nothing recorded
    (a / "x.md").write_text("still here")
    assert history.left_from(str(b / "x.md"), "m1") is None  # a copy: its vectors are not the move's to take
    history.record(deleted(a, "x.md"))  # the old folder's job first: deleted, within the move window
    assert history.left_from(str(b / "x.md"), "m1") == str(a / "x.md")


def test_outside_the_move_window_or_with_the_old_file_still_there_it_is_a_new_document(
    tmp_path: Path,
) -> None:
    history = History(tmp_path / "data", HistoryConfig(move_window=0), embedding="fake:8")
    a = tmp_path / "a"
    a.mkdir()
    (a / "kept.md").write_text("same")
    history.record(indexed(a, "kept.md", "doc-1", "m1"))
    copy = history.identify(str(a / "copy.md"), "m1", None, False)  # kept.md is still there: a copy
    assert copy != "doc-1"
    (a / "copy.md").write_text("same")
    history.record(indexed(a, "copy.md", copy, "m1"))
    assert history.same_content(["m1"]) == {"m1": [str(a / "copy.md"), str(a / "kept.md")]}
    history.record(deleted(a, "kept.md"))
    time.sleep(0.01)
    assert history.identify(str(a / "later.md"), "m1", None, False) not in ("doc-1", copy)
    # an entry from before ids existed keeps the id derived from its path
    assert history.identify(str(a / "old.md"), "m9", None, True) == derived_id(str(a / "old.md"))


def test_state_changes_become_events_and_versions_are_kept_per_content(
    history: History, tmp_path: Path
) -> None:
    d = tmp_path / "d"
    history.record(indexed(d, "f.md", "doc", "m1"))
    history.record(indexed(d, "f.md", "doc", "m1"))  # the same content again: nothing
    history.record(
        DirResult(d, (FileOutcome("f.md", "FAILED", reason="bad xref", document_id="doc", md5="m2"),))
    )
    history.record(indexed(d, "f.md", "doc", "m3"))
    history.record(deleted(d, "f.md"))
    history.record(indexed(d, "f.md", "doc", "m3"))
    assert [k for k, _ in kinds(history)] == ["restored", "deleted", "recovered", "changed", "failed", "changed",
                                              "created"]  # fmt: skip
    events, _ = history.changes(kinds=["failed"])
    assert events[0].detail == "bad xref"
    assert [v["md5"] for v in history.versions("doc")] == ["m3", "m1"]


def test_history_is_bounded_per_document_and_in_all(tmp_path: Path) -> None:
    history = History(tmp_path / "data", HistoryConfig(max_versions=2, max_events=3), embedding="fake:8")
    d = tmp_path / "d"
    for i in range(6):
        history.record(indexed(d, "f.md", "doc", f"m{i}"))
    assert [v["md5"] for v in history.versions("doc")] == ["m5", "m4"]
    assert len(kinds(history)) == 3


def test_folder_prefixes_are_exact(history: History, tmp_path: Path) -> None:
    for folder in ("a", "ab", "a_b", "a%"):
        history.record(indexed(tmp_path / folder, "f.md", f"doc-{folder}", f"m-{folder}"))
    for folder in ("a", "ab", "a_b", "a%"):
        assert kinds(history, under=[str(tmp_path / folder)]) == [
            ("created", str(tmp_path / folder / "f.md"))
        ]
    history.record(deleted(tmp_path, "a", whole_dir=True))
    assert [k for k, _ in kinds(history, kinds=["deleted"])] == ["deleted"]
    assert history.document(path=str(tmp_path / "ab" / "f.md")).state == "EMBEDDED"  # type: ignore[union-attr]


def test_a_damaged_history_is_set_aside_and_started_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / FILE_NAME).write_bytes(b"this is not a database" * 100)
    history = History(data, HistoryConfig())
    history.record(indexed(tmp_path, "f.md", "doc", "m1"))
    assert kinds(history) == [("created", str(tmp_path / "f.md"))]
    assert len(list(data.glob(f"{FILE_NAME}.damaged-*"))) == 1
    assert (data / FILE_NAME).stat().st_mode & 0o777 == 0o600


def test_since_takes_durations_and_utc_dates() -> None:
    now = 1_000_000.0
    assert since_seconds("2d", now) == now - 2 * 86400 and since_seconds("90s", now) == now - 90
    assert since_seconds("1.5h", now) == now - 5400 and since_seconds(" 1w ", now) == now - 7 * 86400
    assert since_seconds("1970-01-02", now) == 86400 and since_seconds("1970-01-01T01:00:00Z", now) == 3600
    with pytest.raises(RagdError, match="neither a duration nor a date"):
        since_seconds("yesterday", now)


def unchanged(name: str, doc: str, md5: str, recorded: str = "EMBEDDED") -> FileOutcome:
    return FileOutcome(name, FileState.UNCHANGED, chunks=2, md5=md5, document_id=doc, size=10, recorded=recorded,
                       recorded_at="2026-01-02T03:04:05Z")  # fmt: skip


def test_a_directory_is_recorded_as_its_files_would_be_one_by_one(tmp_path: Path) -> None:
    """record() reads a directory's rows in one query and writes only what changed; the history it leaves is the
    one the files recorded one at a time leave: a rescan writes nothing, a folder moved with its entries is a move,
    and a second file of one id (an entry copied by hand) sees what the first wrote."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (a / "x.md").write_text("x")
    files = [
        FileOutcome(f"{i}.md", "EMBEDDED", chunks=1, md5=f"m{i}", document_id=f"doc-{i}", size=1)
        for i in range(1200)
    ]  # fmt: skip  (more than one query's worth of ids)
    rescan = [unchanged(f"{i}.md", f"doc-{i}", f"m{i}") for i in range(1200)]
    steps = [
        DirResult(a, tuple(files)),
        DirResult(a, tuple(rescan)),  # nothing happened
        DirResult(
            b, (unchanged("0.md", "doc-0", "m0"), unchanged("1.md", "doc-1", "m1-new"))
        ),  # moved; changed
        DirResult(b, (unchanged("2.md", "doc-2", "m2", recorded="FAILED"),)),  # failed while away
        DirResult(
            a, (unchanged("x.md", "doc-x", "mx"), unchanged("y.md", "doc-x", "mx"))
        ),  # one id, two files
        DirResult(a, (unchanged("x.md", "doc-x", "mx"), unchanged("y.md", "doc-x", "mx"))),
    ]
    together = History(tmp_path / "together", HistoryConfig(), embedding="fake:8")
    alone = History(tmp_path / "alone", HistoryConfig(), embedding="fake:8")
    for step in steps:
        together.record(step)
        for f in step.files:
            alone.record(DirResult(step.directory, (f,)))
    assert len(kinds(together)) == 100  # the limit: 1,200 created at first

    def everything(h: History) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        docs = h._db.execute("SELECT id, path, md5, state, deleted_at IS NULL FROM documents ORDER BY id")
        events = h._db.execute("SELECT doc, kind, path, old_path, detail FROM events ORDER BY seq")
        return docs.fetchall(), events.fetchall()

    assert everything(together) == everything(alone)
    docs, events = everything(together)
    assert ("doc-x", str(a / "y.md"), "mx", "EMBEDDED", 1) in docs and (
        "doc-0",
        str(b / "0.md"),
        "m0",
        "EMBEDDED",
        1,
    ) in docs
    assert ("doc-0", "moved", str(b / "0.md"), str(a / "0.md"), "") in events
    assert ("doc-1", "changed", str(b / "1.md"), None, "from the sidecar") in events
    assert ("doc-2", "failed", str(b / "2.md"), None, "") in events
    assert [e for e in events if e[0] == "doc-x"] == [
        ("doc-x", "created", str(a / "x.md"), None, "from the sidecar"),
        ("doc-x", "moved", str(a / "y.md"), str(a / "x.md"), ""),
        ("doc-x", "moved", str(a / "x.md"), str(a / "y.md"), ""),
        ("doc-x", "moved", str(a / "y.md"), str(a / "x.md"), ""),
    ]
    assert sum(1 for e in events if e[1] == "created") == 1201  # the rescan of 1,200 files added no event


def test_a_root_removed_leaves_the_documents_of_the_roots_nested_in_it_that_stay(
    history: History, tmp_path: Path
) -> None:
    outer, inner = tmp_path / "kb", tmp_path / "kb" / "inner"
    history.record(indexed(outer, "a.md", "doc-a", "ma"))
    history.record(indexed(inner, "b.md", "doc-b", "mb"))
    history.record(indexed(tmp_path / "kb2", "c.md", "doc-c", "mc"))  # next to it, a prefix of its path
    gone = history.removed(outer, "its root was removed", keep=[inner])
    assert gone == [str(outer / "a.md")]
    events, _ = history.changes(limit=10, kinds=["deleted"])
    assert [(e.path, e.detail) for e in events] == [(str(outer / "a.md"), "its root was removed")]
    assert history.document(path=str(inner / "b.md")).state == "EMBEDDED"  # type: ignore[union-attr]
    assert history.document(path=str(tmp_path / "kb2" / "c.md")).state == "EMBEDDED"  # type: ignore[union-attr]
    assert history.removed(outer) == [str(inner / "b.md")]  # and without: the rest, and nothing twice


def test_a_folder_deleted_leaves_with_every_document_under_it_read_a_page_at_a_time(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its documents are read PAGE rows at a time (a 30,000-note folder renamed held all its rows at once): none is
    missed or told twice across the pages, a page boundary inside documents of one path (an old one gone, then
    another at the same path) included, and the folder's neighbours stay."""
    monkeypatch.setattr(historywrite, "PAGE", 2)
    notes = tmp_path / "notes"
    history.record(indexed(notes, "a.md", "doc-a", "ma"))
    history.record(deleted(notes, "a.md"))
    history.record(indexed(notes, "a.md", "doc-a2", "ma2"))  # a new document at the same path
    for i in range(4):
        history.record(indexed(notes / "sub", f"n{i}.md", f"doc-{i}", f"m{i}"))
    history.record(indexed(tmp_path / "notes2", "c.md", "doc-c", "mc"))  # beside it, its path a prefix
    history.record(deleted(tmp_path, "notes", whole_dir=True))
    events, _ = history.changes(limit=20, kinds=["deleted"])
    assert sorted(e.path for e in events) == sorted(
        [str(notes / "a.md"), str(notes / "a.md"), *(str(notes / "sub" / f"n{i}.md") for i in range(4))]
    )
    assert history.document(path=str(tmp_path / "notes2" / "c.md")).state == "EMBEDDED"  # type: ignore[union-attr]


def test_a_folder_renamed_is_recorded_a_page_of_rows_at_a_time(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's files are looked up _IDS_PER_QUERY rows at a time (a 30,000-note folder renamed read all its rows at
    once): every document moves once, across the page boundaries too, and a second file of one id (an entry copied
    by hand) in another page reads its row afresh, as in the same page."""
    monkeypatch.setattr(historywrite, "_IDS_PER_QUERY", 2)

    def files(*names: str, doc: str | None = None) -> tuple[FileOutcome, ...]:
        return tuple(FileOutcome(n, FileState.EMBEDDED, chunks=1, md5=f"m-{n}", document_id=doc or f"doc-{n}",
                                 size=10, parser="text") for n in names)  # fmt: skip

    names = [f"n{i}.md" for i in range(5)]
    history.record(DirResult(tmp_path / "notes", files(*names)))
    renamed = tmp_path / "notes renamed"
    moved = files(*names) + files("copy.md", doc="doc-n0.md")  # page 3 holds an entry copied from n0.md's
    history.record(DirResult(renamed, moved[:5] + tuple(FileOutcome(
        f.name, FileState.UNCHANGED, recorded=FileState.EMBEDDED, chunks=1, md5=f.md5, document_id=f.document_id,
        size=10, parser="text") for f in moved[5:])))  # fmt: skip
    events, _ = history.changes(limit=50, kinds=["moved"])
    assert sorted(e.path for e in events) == sorted(
        [*(str(renamed / n) for n in names), str(renamed / "copy.md")]
    )
    assert history.document(document_id="doc-n3.md").path == str(renamed / "n3.md")  # type: ignore[union-attr]
    assert history.document(document_id="doc-n0.md").path == str(renamed / "copy.md")  # type: ignore[union-attr]


def test_a_new_file_is_identified_and_duplicates_found_without_reading_every_document(tmp_path: Path) -> None:
    """The queries by content used no index (the index on md5 is partial: `WHERE md5 != ''`, which a query must say
    too), so each new file of a big folder read the whole table: 30,000 notes made 30,000 scans of up to 30,000
    rows. Counted in SQLite's virtual-machine steps (a progress handler called every 100)."""
    h = History(tmp_path / "data", HistoryConfig(), embedding="fake:8", splitter="recursive:1000:200")
    try:
        many = tmp_path / "many"
        outcomes = tuple(
            FileOutcome(f"n{i}.md", FileState.EMBEDDED, chunks=1, md5=f"m{i}", document_id=f"d{i}", size=10)
            for i in range(5000)
        )
        h.record(DirResult(many, outcomes))
        many.mkdir()
        (many / "n7.md").write_text("x")
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        h._db.set_progress_handler(step, 100)
        try:
            new = h.identify(str(tmp_path / "new.md"), "m-new", None, False)  # content seen nowhere
            moved = h.identify(str(tmp_path / "other" / "n7.md"), "m7", None, False)  # n7.md is still there
            same = h.same_content(["m3", "m-new"])
        finally:
            h._db.set_progress_handler(None, 0)
        assert new not in {f"d{i}" for i in range(5000)} and moved != "d7" and same == {}
        assert steps[0] < 50, f"{steps[0] * 100} steps: the table was read whole"
    finally:
        h.close()
