"""The per-directory boundary the agent and `run --once` share (resident/jobs.py): a real tracker and scheduler."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ragd.config import IgnoreConfig
from ragd.errors import StorageError
from ragd.pipeline.dirjob import DirResult
from ragd.pipeline.outcome import FileOutcome
from ragd.pipeline.scan import Expected, Ignore
from ragd.pipeline.sidecar import utc_stamp
from ragd.resident.changes import Change, ChangeLog
from ragd.resident.jobs import FollowUps, Outcomes, failure_reason
from ragd.resident.scheduler import Scheduler
from ragd.resident.tracker import Tracker
from ragd.vocabulary import FileState
from tests.support.poll import poll

IGNORE = Ignore(IgnoreConfig())
LOCK_ERROR = StorageError(
    "cannot lock /r/bad/.rag/tmp: Not a directory", "check write permission on the directory"
)


def _finished(directory: Path, *files: FileOutcome, **kw: object) -> DirResult:
    return DirResult(directory, tuple(files), **kw)  # type: ignore[arg-type]


class FollowUpCalls:
    def __init__(self) -> None:
        self.notes: list[Path] = []
        self.offered: list[Path] = []
        self.looked: list[Path] = []
        self.dropped: list[Path] = []  # folders out of search (cannot be read)
        self.back: list[Path] = []  # and back in search
        self.pruned: list[Path] = []  # folders found with no store: what is gone below them leaves the index
        self.found = 0
        self.watched: list[Path] = []  # folders to watch again, readable again
        self.changes = ChangeLog()
        self.told: list[Change] = []  # what the journal told its listeners
        self.changes.listen(self.told.extend)

    def follow_ups(self, scheduler: Scheduler, roots: list[Path]) -> FollowUps:
        def found() -> None:
            self.found += 1

        return FollowUps(scheduler, roots=lambda: roots, hand_note=self.notes.append,
                         offer_note=self.offered.append, look_again=self.looked.append, subdirs_found=found, retry_dir_s=60.0,
                         changes=self.changes, out_of_search=self.dropped.append, back_in_search=self.back.append,
                         watch_below=self.watched.append, prune_gone=self.pruned.append)  # fmt: skip


def test_without_follow_ups_every_outcome_is_recorded_and_counted_once(tmp_path: Path) -> None:
    """`run --once`: a finished job is tallied, a vanished directory forgotten, a failed one recorded with its
    reason (an internal error too) and never queued again: no scheduler is even involved."""
    root, ok, bad, gone = tmp_path, tmp_path / "ok", tmp_path / "bad", tmp_path / "gone"
    ok.mkdir()
    bad.mkdir()
    t = Tracker()
    t.start_phase("once", expected=True)
    t.add_to_phase([root, ok, bad, gone])
    out = Outcomes(t, IGNORE)
    files = (FileOutcome("a.md", FileState.EMBEDDED, chunks=3, embedded=2, reused=1, md5="m"),
             FileOutcome("b.pdf", FileState.FAILED, reason="encrypted"), FileOutcome("c.md", FileState.UNCHANGED, recorded=FileState.FAILED))  # fmt: skip
    note = ok / ".rag" / "x.mushroom"
    out.done(ok, _finished(ok, *files, mushroom=note, indexable={str(ok / "a.md"): Expected("m", 3)}), None)
    out.done(bad, None, LOCK_ERROR)
    out.done(gone, None, FileNotFoundError(2, "No such file or directory"))
    out.done(root, None, ValueError("boom"))
    p = t.phase_tally()
    assert (p.dirs_total, p.dirs_done) == (3, 3)  # the vanished one no longer counts
    assert p.failed_dirs == (
        (str(bad), "cannot lock /r/bad/.rag/tmp: Not a directory (check write permission on the directory)"),
        (str(root), "internal error: ValueError: boom"),
    )
    tally = p.tally
    assert (tally.embedded, tally.unchanged, tally.skipped, tally.chunks) == (1, 1, 0, 3)
    assert (tally.texts_embedded, tally.vectors_reused, tally.mushrooms) == (2, 1, 1)
    assert tally.failed == [(ok / "b.pdf", "encrypted")]
    assert p.expected == {str(ok / "a.md"): Expected("m", 3)}
    assert t.root_summary(root)["dir_errors"][0]["path"] == str(root)
    assert t.totals() == (3, 2)  # the file states: a.md EMBEDDED, b.pdf and c.md FAILED


def test_a_directory_replaced_or_removed_meanwhile_has_vanished_whatever_the_error(tmp_path: Path) -> None:
    t = Tracker()
    t.start_phase("once")
    was_dir = tmp_path / "was-dir"
    was_dir.write_text("a file now")
    t.add_to_phase([was_dir, tmp_path / "removed"])
    out = Outcomes(t, IGNORE)
    out.done(was_dir, None, NotADirectoryError(20, "Not a directory"))
    out.done(tmp_path / "removed", None, PermissionError(13, "Permission denied"))
    p = t.phase_tally()
    assert p.failed_dirs == () and p.dirs_total == 0


def test_the_agent_follows_up_on_notes_new_subdirectories_and_retries(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "new" / "deep").mkdir(parents=True)
    (root / "bad").mkdir()
    (tmp_path / "outside").mkdir()
    scheduler = Scheduler(lambda d: DirResult(d), lambda *_: None, jobs=1)
    scheduler.pause()  # what the follow-ups queue stays in view
    calls = FollowUpCalls()
    t = Tracker()
    out = Outcomes(t, IGNORE, calls.follow_ups(scheduler, [root]))
    now = time.monotonic()
    note = root / ".rag" / "x.mushroom"
    due = FileOutcome(
        "x.md", FileState.FAILED, reason="embedder down", retry_at=utc_stamp(time.time() + 3600)
    )
    out.done(root, _finished(root, due, mushroom=note, new_subdirs=(root / "new",)), None)
    assert calls.notes == [note] and calls.found == 1
    assert scheduler.has(root / "new") and scheduler.has(root / "new" / "deep")  # walked and queued
    out.done(root / "bad", None, LOCK_ERROR)
    assert t.root_summary(root)["dir_errors"] == [{"path": str(root / "bad"), "reason": str(LOCK_ERROR)}]
    scheduler.tick(now + 30)
    assert not scheduler.has(root / "bad")
    scheduler.tick(now + 90)  # the failed directory, after retry_dir_s
    assert scheduler.has(root / "bad") and not scheduler.has(root)
    scheduler.tick(now + 3700)  # the directory of the failed file, once it is due
    assert scheduler.has(root)
    out.done(root / "gone", None, FileNotFoundError())
    out.done(tmp_path / "outside" / "gone", None, FileNotFoundError())
    assert calls.looked == [root]  # the parent of a vanished directory, when under a root and still there
    assert [(c.path, c.kind) for c in calls.told] == [(root / "x.md", "failed"), (root / "gone", "deleted"),
                                                      (tmp_path / "outside" / "gone", "deleted")]  # fmt: skip
    assert scheduler.close(1.0)


def test_a_new_folder_whose_job_already_runs_is_not_listed_again_after_it(tmp_path: Path) -> None:
    """A folder moved into a root: the watcher's event starts its job, and its parent's job, ending meanwhile,
    finds it new; it is not run a second time (a big folder's second job read every entry again)."""
    root, new = tmp_path / "r", tmp_path / "r" / "notes"
    (new / "sub").mkdir(parents=True)
    started: list[Path] = []
    gate = threading.Event()

    def run(d: Path) -> DirResult:
        started.append(d)
        if d == new:
            gate.wait(5)
        return DirResult(d)

    scheduler = Scheduler(run, lambda *_: None, jobs=2)
    out = Outcomes(Tracker(), IGNORE, FollowUpCalls().follow_ups(scheduler, [root]))
    scheduler.enqueue([new])
    poll(lambda: started == [new], timeout=5, every=0.01)
    out.done(root, _finished(root, new_subdirs=(new,)), None)  # the parent's job ends while the folder's runs
    gate.set()
    poll(lambda: not scheduler.busy(), timeout=5, every=0.01)
    assert sorted(started) == [new, new / "sub"]  # its subfolder queued, the folder itself run once
    assert scheduler.close(1.0)


def test_failure_reasons() -> None:
    assert (
        failure_reason(PermissionError(13, "Permission denied", "/r/x"))
        == "[Errno 13] Permission denied: '/r/x'"
    )
    assert failure_reason(KeyError("k")) == "internal error: KeyError: 'k'"


def test_a_missing_path_inside_a_directory_that_is_still_there_is_a_failure_not_a_vanished_directory(
    tmp_path: Path,
) -> None:
    """Seen: a subdirectory's `.rag` that is a regular file made its parent's job raise NotADirectoryError, and
    the parent (a root: its whole subtree) was forgotten as if deleted, nothing reported."""
    t = Tracker()
    t.start_phase("once")
    sub, replaced = tmp_path / "sub", tmp_path / "replaced"
    replaced.mkdir()
    t.add_to_phase([tmp_path, sub, replaced])
    out = Outcomes(t, IGNORE)
    out.done(tmp_path, None, NotADirectoryError(20, "Not a directory", str(sub / ".rag")))
    out.done(
        replaced, None, FileNotFoundError(2, "No such file or directory", str(replaced))
    )  # gone, then back
    p = t.phase_tally()
    assert p.failed_dirs == ((str(tmp_path), f"[Errno 20] Not a directory: '{sub / '.rag'}'"),)
    assert p.dirs_total == 2  # tmp_path (failed) and sub; `replaced` vanished while its job ran


def test_the_result_of_a_directory_deleted_while_its_job_ran_is_not_kept(tmp_path: Path) -> None:
    """The deletion was handled (the directory forgotten) before the job's result came in: what the job saw must
    not stay tracked (a FAILED file of it would be counted in `ragctl status` for ever), and the parent is looked
    at again (its job records the deletion in the index)."""
    root = tmp_path / "r"
    (root / "d").mkdir(parents=True)
    scheduler = Scheduler(lambda d: DirResult(d), lambda *_: None, jobs=1)
    scheduler.pause()
    calls = FollowUpCalls()
    t = Tracker()
    out = Outcomes(t, IGNORE, calls.follow_ups(scheduler, [root]))
    (root / "d").rmdir()
    t.forget(root / "d")  # the watcher's deletion, handled first
    note = root / "d" / ".rag" / "x.mushroom"
    late = _finished(
        root / "d", FileOutcome("c.md", FileState.FAILED, reason="No such file or directory"), mushroom=note
    )
    out.done(root / "d", late, None)
    assert t.file_state(root / "d" / "c.md") is None and t.totals() == (0, 0)
    assert calls.looked == [root] and calls.notes == []
    assert scheduler.close(1.0)


def test_notes_that_came_with_a_moved_folder_are_offered_to_the_writer(tmp_path: Path) -> None:
    """A change note applied in a folder that was then moved (before the writer's flush deleted it) is in the
    moved folder now, where nothing else would apply it (the watcher passes over the agent's own notes): the
    folder's job offers it, after the job's own note (the writer skips those it knows of)."""
    root = tmp_path / "r"
    moved = root / "moved"
    (moved / ".rag").mkdir(parents=True)
    came_along = moved / ".rag" / "20261202T041505.643467Z-26071-0.mushroom"
    came_along.write_text('{"file": "a.md", "status": "upsert"}\n')
    own = moved / ".rag" / "20261202T041509.000001Z-26071-7.mushroom"
    own.write_text('{"file": "b.md", "status": "upsert"}\n')
    scheduler = Scheduler(lambda d: DirResult(d), lambda *_: None, jobs=1)
    scheduler.pause()
    calls = FollowUpCalls()
    out = Outcomes(Tracker(), IGNORE, calls.follow_ups(scheduler, [root]))
    out.done(moved, _finished(moved, mushroom=own), None)
    assert calls.notes == [own] and calls.offered == [came_along, own]
    out.done(root, _finished(root), None)  # a folder with no notes: nothing offered
    assert calls.offered == [came_along, own]
    assert scheduler.close(1.0)


def test_a_job_that_ends_below_a_folder_closed_meanwhile_is_neither_gone_nor_an_error() -> None:
    """A folder above the job's closed (chmod 000) while the job ran: asking pathlib whether the job's folder, or a
    vanished one's parent, was still a folder raised PermissionError in the outcome's boundary. The folder is not
    gone (the closed folder's own job holds it out of search): its outcome is recorded as usual. Run where the
    process really cannot look: as root, in a forked child that drops to `nobody`."""
    import os
    import shutil
    import tempfile

    from tests.integration.test_dirjob_odd import NOBODY, _in_child

    as_nobody = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="ragd-jobs-perm-"))  # not under pytest's 0700 tmp dir
    base.chmod(0o755)
    try:
        root, closed = base / "r", base / "r" / "closed"
        (closed / "sub").mkdir(parents=True)
        if as_nobody:
            for path in (root, closed, closed / "sub"):
                os.chown(path, NOBODY, NOBODY)
        closed.chmod(0)

        def outcomes() -> list[object]:
            scheduler = Scheduler(lambda d: DirResult(d), lambda *_: None, jobs=1)
            scheduler.pause()
            t = Tracker()
            out = Outcomes(t, IGNORE, FollowUpCalls().follow_ups(scheduler, [root]))
            done = FileOutcome("a.md", FileState.EMBEDDED, chunks=1, md5="m")
            out.done(closed / "sub", _finished(closed / "sub", done), None)
            recorded = t.root_summary(root)["files"]["EMBEDDED"]
            # a job below it that failed as its folder could not be reached: the closed folder is held out
            out.done(
                closed / "sub" / "deep", None, FileNotFoundError(2, "gone", str(closed / "sub" / "deep"))
            )
            summary = t.root_summary(root)
            return [recorded, summary["files"]["EMBEDDED"], [e["path"] for e in summary["dir_errors"]]]

        recorded, after, held = _in_child(outcomes, as_nobody=as_nobody)
        assert (recorded, after, held) == (1, 0, [str(closed)])
    finally:
        closed.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
