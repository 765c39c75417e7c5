"""The tracker: per-file states from directory results, kept counts, forgetting subtrees, rescan progress."""

from __future__ import annotations

from pathlib import Path

from ragd.pipeline.dirjob import DirResult
from ragd.pipeline.outcome import FileOutcome
from ragd.pipeline.scan import Expected
from ragd.resident.tracker import Tracker


def _result(d: str, *files: FileOutcome) -> DirResult:
    return DirResult(Path(d), tuple(files))


def test_states_counts_and_failures_follow_the_latest_result_of_each_directory() -> None:
    t = Tracker()
    t.record(
        _result("/r", FileOutcome("a.md", "EMBEDDED"), FileOutcome("b.pdf", "FAILED", reason="encrypted"))
    )
    t.record(_result("/r/s", FileOutcome("c.md", "UNCHANGED", recorded="SKIPPED", reason="too large"),
                     FileOutcome("d.md", "ABANDONED")))  # fmt: skip
    assert t.totals() == (4, 1)
    summary = t.root_summary(Path("/r"))
    assert summary["files"] == {"EMBEDDED": 1, "SKIPPED": 1, "FAILED": 1, "PENDING": 1}
    assert summary["failures"] == [{"path": "/r/b.pdf", "reason": "encrypted", "retry_at": None}]
    t.record(_result("/r", FileOutcome("a.md", "UNCHANGED"), FileOutcome("b.pdf", "EMBEDDED")))
    assert t.totals() == (4, 0)
    t.forget(Path("/r/s"))
    assert t.totals() == (2, 0) and t.root_summary(Path("/r/s"))["files"]["EMBEDDED"] == 0
    assert t.root_summary(Path("/other"))["files"] == {"EMBEDDED": 0, "SKIPPED": 0, "FAILED": 0}


def test_rescan_progress_counts_directories_and_errors() -> None:
    t = Tracker()
    t.start_phase("initial")
    t.add_to_phase([Path("/r"), Path("/r/x"), Path("/r/y")])
    t.record(_result("/r", FileOutcome("a.md", "EMBEDDED")))
    t.record_error(Path("/r/x"), "permission denied")
    p = t.progress_json()
    assert (p["phase"], p["dirs_total"], p["dirs_done"], p["files_done"]) == ("initial", 3, 2, 1)
    assert p["failed_dirs"] == [{"path": "/r/x", "reason": "permission denied"}]
    assert t.root_summary(Path("/r"))["dir_errors"] == [{"path": "/r/x", "reason": "permission denied"}]
    t.end_phase()
    assert t.progress_json()["phase"] is None


def test_progress_counts_each_directory_of_the_phase_once() -> None:
    """Jobs that run again during a phase (an edit, a rerun, a retry) and jobs of directories outside it do not
    push the counts past the phase's totals (seen: 60 of 51 directories done, 445 files for 385)."""
    t = Tracker()
    t.start_phase("rescan")
    t.add_to_phase([Path("/r"), Path("/r/a")])
    for _ in range(3):
        t.record(_result("/r", FileOutcome("x.md", "EMBEDDED"), FileOutcome("y.md", "EMBEDDED")))
    t.record(_result("/elsewhere", FileOutcome("z.md", "EMBEDDED")))
    p = t.progress_json()
    assert (p["dirs_total"], p["dirs_done"], p["files_done"]) == (2, 1, 2)
    t.add_to_phase([Path("/r/a/new")])  # a subdirectory found during the phase joins it
    t.record(_result("/r/a", FileOutcome("w.md", "EMBEDDED")))
    t.forget(Path("/r/a/new"))  # deleted before its job ran: it no longer counts as to do
    p = t.progress_json()
    assert (p["dirs_total"], p["dirs_done"], p["files_done"]) == (2, 2, 3)


def test_forgetting_a_root_keeps_the_roots_nested_in_it() -> None:
    t = Tracker()
    t.record(_result("/r", FileOutcome("a.md", "EMBEDDED")))
    t.record(_result("/r/in", FileOutcome("b.md", "EMBEDDED")))
    t.record(_result("/r/in/deep", FileOutcome("c.md", "EMBEDDED")))
    t.forget(Path("/r"), keep=[Path("/r/in")])
    assert t.totals() == (2, 0)
    assert t.root_summary(Path("/r/in"))["files"]["EMBEDDED"] == 2


def test_a_phase_tallies_what_its_jobs_did_and_keeps_what_the_index_should_hold_when_asked() -> None:
    """The tally `run --once` prints: each file as its job found it, only the phase's directories."""
    t = Tracker()
    t.start_phase("once", expected=True)
    t.add_to_phase([Path("/r"), Path("/r/s")])
    t.record(DirResult(Path("/r"), (FileOutcome("a.md", "EMBEDDED", chunks=4, embedded=1, reused=3),
                                    FileOutcome("b.md", "TOUCHED"), FileOutcome("c.bin", "SKIPPED")),
                       mushroom=Path("/r/.rag/n.mushroom"), indexable={"/r/a.md": Expected("m", 4)}))  # fmt: skip
    t.record(_result("/r/s", FileOutcome("d.pdf", "FAILED", reason="encrypted"),
                     FileOutcome("e.md", "UNCHANGED", recorded="FAILED")))  # fmt: skip
    t.record(_result("/elsewhere", FileOutcome("z.md", "EMBEDDED")))  # not the phase's
    snap = t.phase_tally()
    t.record_error(Path("/r/s"), "later")  # a snapshot is a copy
    tally = snap.tally
    assert (snap.phase, snap.dirs_total, snap.dirs_done, snap.failed_dirs) == ("once", 2, 2, ())
    assert (tally.embedded, tally.unchanged, tally.skipped, tally.failed) == (
        1,
        2,
        1,
        [(Path("/r/s/d.pdf"), "encrypted")],
    )
    assert (tally.chunks, tally.texts_embedded, tally.vectors_reused, tally.mushrooms) == (4, 1, 3, 1)
    assert snap.expected == {"/r/a.md": Expected("m", 4)}
    assert t.phase_tally().failed_dirs == (("/r/s", "later"),)
    t.start_phase("rescan")  # the agent's phases keep no expectations
    t.add_to_phase([Path("/r")])
    t.record(DirResult(Path("/r"), indexable={"/r/a.md": Expected("m", 4)}))
    assert t.phase_tally().expected is None and t.phase_tally().tally.mushrooms == 0


def test_a_folder_that_cannot_be_read_stands_for_its_subtree_until_its_next_result() -> None:
    """Held out: the files of the folder and of the folders below it leave the counts, the folder is listed with
    its reason and since when, once (a folder below it reported later changes nothing); its next result ends it."""
    t = Tracker()
    t.start_phase("rescan")
    t.add_to_phase([Path("/r"), Path("/r/s"), Path("/r/s/in")])
    t.record(_result("/r", FileOutcome("a.md", "EMBEDDED")))
    t.record(_result("/r/s", FileOutcome("b.md", "EMBEDDED"), FileOutcome("c.pdf", "FAILED", reason="x")))
    t.record(_result("/r/s/in", FileOutcome("d.md", "EMBEDDED")))
    t.record_error(Path("/r/s/in"), "cannot lock")
    assert t.record_denied(Path("/r/s"), "permission denied", "2026-12-04T08:00:00Z")
    assert not t.record_denied(Path("/r/s"), "permission denied", "2026-12-04T09:00:00Z")
    assert t.totals() == (1, 0) and t.held_out() == {Path("/r/s")} and t.is_held_out(Path("/r/s"))
    assert t.root_summary(Path("/r"))["dir_errors"] == [
        {"path": "/r/s", "reason": "permission denied", "since": "2026-12-04T08:00:00Z"}
    ]
    p = t.phase_tally()
    assert (p.dirs_total, p.dirs_done) == (3, 3) and p.failed_dirs[-1] == ("/r/s", "permission denied")
    t.record(_result("/r/s", FileOutcome("b.md", "UNCHANGED")))
    assert t.held_out() == set() and t.root_summary(Path("/r"))["dir_errors"] == [] and t.totals() == (2, 0)
    t.record_denied(Path("/r/s"), "permission denied", "2026-12-04T10:00:00Z")
    t.start_phase("rescan")  # while it is held out: its jobs there count as done
    t.add_to_phase([Path("/r"), Path("/r/s"), Path("/r/s/in")])
    assert not t.record_denied(Path("/r/s"), "permission denied", "2026-12-04T11:00:00Z")
    assert t.progress_json()["dirs_done"] == 2
    t.forget(Path("/r/s"))  # deleted while closed
    assert t.held_out() == set() and t.root_summary(Path("/r"))["dir_errors"] == []


def test_a_big_folders_steps_show_as_they_come_and_its_result_completes_them() -> None:
    """A job reporting in steps (dirjob.py): its files take their states at once, a phase starts to show them, the
    total is the files it plans, and its result leaves exactly the files of all its steps (an old one is gone)."""
    t = Tracker()
    t.record(_result("/r/big", FileOutcome("old.md", "EMBEDDED")))
    t.record_step(DirResult(Path("/r/big"), (FileOutcome("u.md", "UNCHANGED"),), step=1, planned=4))
    p = t.progress_json()
    assert (p["phase"], p["files_done"], p["files_total"], p["dirs_done"]) == ("folder", 1, 4, 0)
    t.record_step(DirResult(Path("/r/big"), (FileOutcome("a.md", "EMBEDDED"), FileOutcome("b.md", "FAILED")),
                            step=2, planned=4))  # fmt: skip
    assert t.root_summary(Path("/r"))["files"] == {"EMBEDDED": 3, "SKIPPED": 0, "FAILED": 1}
    assert t.progress_json()["files_done"] == 3
    t.record(DirResult(Path("/r/big"), (FileOutcome("c.md", "EMBEDDED"),), step=3))
    p = t.progress_json()
    assert (p["files_done"], p["files_total"], p["dirs_done"], p["dirs_total"]) == (4, 4, 1, 1)
    assert t.totals() == (4, 1) and t.file_state(Path("/r/big/old.md")) is None
    assert t.phase_tally().tally.embedded == 2


def test_a_failed_job_leaves_no_steps_behind() -> None:
    t = Tracker()
    t.start_phase("rescan")
    t.record_step(DirResult(Path("/r"), (FileOutcome("a.md", "EMBEDDED"),), step=1, planned=100))
    t.record_error(Path("/r"), "gone wrong")
    t.record(DirResult(Path("/r"), (FileOutcome("b.md", "EMBEDDED"),), step=2))
    assert t.totals() == (1, 0) and t.progress_json()["files_done"] == 1


def test_skipped_files_are_counted_by_reason_without_what_is_particular_to_each() -> None:
    """Status counts skipped files by reason: a size or a path in the reason does not make a reason of its own."""
    t = Tracker()
    t.record(_result("/r", FileOutcome("a", "SKIPPED", reason="empty file (0 bytes)"),
                     FileOutcome("b", "SKIPPED", reason="empty file (0 bytes)"),
                     FileOutcome("c.iso", "SKIPPED", reason="file too large: 900 bytes > limits.max_file_size 10"),
                     FileOutcome("d.iso", "SKIPPED", reason="file too large: 12 bytes > limits.max_file_size 10"),
                     FileOutcome("l", "SKIPPED", reason="symbolic link to /etc/x.md, outside the roots"),
                     FileOutcome("\udce9 2", "SKIPPED", reason="directory name is not valid UTF-8 (b'\\xe9 2'); "
                                 "rename it to index its files"),
                     FileOutcome("\udcff's", "SKIPPED", reason="directory name is not valid UTF-8 (b\"\\xff's\"); "
                                 "rename it to index its files"),
                     FileOutcome("e.md", "EMBEDDED")))  # fmt: skip
    # a name shown as its bytes is particular too; a number in a word is not a count ("UTF-N" was shown)
    assert t.root_summary(Path("/r"))["skipped_reasons"] == [
        {"reason": "empty file (N bytes)", "files": 2},
        {"reason": "file too large: N bytes > limits.max_file_size N", "files": 2},
        {"reason": "directory name is not valid UTF-8 (…); rename it to index its files", "files": 2},
        {"reason": "symbolic link to …, outside the roots", "files": 1},
    ]
    assert t.skipped_reasons()["empty file (N bytes)"] == 2
    t.record(_result("/r", FileOutcome("e.md", "EMBEDDED")))  # the others deleted
    assert t.skipped_reasons() == {} and t.root_summary(Path("/r"))["skipped_reasons"] == []


def test_a_roots_summary_read_while_a_big_folders_steps_come_in_is_whole() -> None:
    """`ragctl status` during a folder of 100,000 notes failed with "dictionary changed size during iteration": the
    summary read the folder's files outside the lock while a step added to them in place."""
    import threading

    t = Tracker()
    d = Path("/r/big")
    t.record_step(DirResult(d, tuple(FileOutcome(f"n{i}.md", "EMBEDDED") for i in range(10_000)), step=1,
                            planned=400_000))  # fmt: skip
    stop = threading.Event()

    def steps() -> None:
        n, step = 10_000, 2
        while not stop.is_set():
            t.record_step(DirResult(d, tuple(FileOutcome(f"n{n + i}.md", "EMBEDDED") for i in range(50)), step=step,
                                    planned=400_000))  # fmt: skip
            n, step = n + 50, step + 1

    writer = threading.Thread(target=steps)
    writer.start()
    try:
        seen = [t.root_summary(Path("/r"))["files"]["EMBEDDED"] for _ in range(30)]
    finally:
        stop.set()
        writer.join()
    assert seen == sorted(seen) and seen[0] >= 10_000
