"""The tracker: per-file states from directory results, kept counts, forgetting subtrees, rescan progress."""

from __future__ import annotations

from pathlib import Path

from ragd.dirjob import DirResult
from ragd.filejob import FileOutcome
from ragd.tracker import Tracker


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
    t.start_phase("initial", 0)
    t.add_to_phase(3)
    t.record(_result("/r", FileOutcome("a.md", "EMBEDDED")))
    t.record_error(Path("/r/x"), "permission denied")
    p = t.progress_json()
    assert (p["phase"], p["dirs_total"], p["dirs_done"], p["files_done"]) == ("initial", 3, 2, 1)
    assert p["failed_dirs"] == [{"path": "/r/x", "reason": "permission denied"}]
    assert t.root_summary(Path("/r"))["dir_errors"] == [{"path": "/r/x", "reason": "permission denied"}]
    t.end_phase()
    assert t.progress_json()["phase"] is None
