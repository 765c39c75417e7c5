"""What the agent knows about every file under its roots: the state each directory job left it in.

Fed by directory job results (and by the removal of directories and roots); read by `status` without touching the
disk, so that `ragctl status` stays fast with tens of thousands of files.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dirjob import DirResult
from .sidecar import EMBEDDED, FAILED, SKIPPED

MAX_FAILURES_LISTED = 50


@dataclass(frozen=True)
class FileStatus:
    state: str  # EMBEDDED, SKIPPED, FAILED
    reason: str = ""
    retry_at: str | None = None


@dataclass
class Progress:
    phase: str | None = None  # "initial" | "rescan" | None
    dirs_total: int = 0
    dirs_done: int = 0
    files_done: int = 0
    failed_dirs: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self, failed_files: int) -> dict[str, Any]:
        return {"phase": self.phase, "dirs_total": self.dirs_total, "dirs_done": self.dirs_done,
                "files_done": self.files_done, "failed": failed_files,
                "failed_dirs": [{"path": p, "reason": r} for p, r in self.failed_dirs[:MAX_FAILURES_LISTED]]}  # fmt: skip


class Tracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirs: dict[Path, dict[str, FileStatus]] = {}
        # files in _dirs, and how many of them FAILED: kept up to date as results arrive (status polls often)
        self._known = 0
        self._failed = 0
        self.progress = Progress()
        self.dir_errors: dict[Path, str] = {}

    # -- updates ----------------------------------------------------------------------------------------------
    def record(self, result: DirResult) -> None:
        files = {}
        for f in result.files:
            files[f.name] = FileStatus(f.final_state, f.reason, f.retry_at)
        with self._lock:
            self._count(self._dirs.get(result.directory), -1)
            self._dirs[result.directory] = files
            self._count(files, +1)
            self.dir_errors.pop(result.directory, None)
            if self.progress.phase:
                self.progress.dirs_done += 1
                self.progress.files_done += len(files)

    def record_error(self, directory: Path, reason: str) -> None:
        with self._lock:
            self.dir_errors[directory] = reason
            if self.progress.phase:
                self.progress.dirs_done += 1
                self.progress.failed_dirs.append((str(directory), reason))

    def forget(self, top: Path) -> None:
        """Drop `top` and every directory under it (deleted, moved out, or its root removed)."""
        with self._lock:
            for d in [d for d in self._dirs if d == top or top in d.parents]:
                self._count(self._dirs.pop(d), -1)
            for d in [d for d in self.dir_errors if d == top or top in d.parents]:
                del self.dir_errors[d]

    def _count(self, files: dict[str, FileStatus] | None, sign: int) -> None:
        if files:
            self._known += sign * len(files)
            self._failed += sign * sum(1 for st in files.values() if st.state == FAILED)

    def start_phase(self, phase: str, dirs_total: int) -> None:
        with self._lock:
            self.progress = Progress(phase, dirs_total)

    def end_phase(self) -> None:
        with self._lock:
            self.progress.phase = None

    def add_to_phase(self, dirs: int) -> None:
        with self._lock:
            if self.progress.phase:
                self.progress.dirs_total += dirs

    # -- reads ----------------------------------------------------------------------------------------------
    def root_summary(self, root: Path) -> dict[str, Any]:
        counts = {EMBEDDED: 0, SKIPPED: 0, FAILED: 0}
        failures: list[dict[str, Any]] = []
        with self._lock:
            dirs = [(d, files) for d, files in self._dirs.items() if d == root or root in d.parents]
            dir_errors = [(d, r) for d, r in self.dir_errors.items() if d == root or root in d.parents]
        for d, files in dirs:
            for name, st in files.items():
                counts[st.state] = counts.get(st.state, 0) + 1
                if st.state == FAILED and len(failures) < MAX_FAILURES_LISTED:
                    failures.append({"path": str(d / name), "reason": st.reason, "retry_at": st.retry_at})
        failures.sort(key=lambda f: f["path"])
        return {
            "files": counts,
            "failures": failures,
            "dir_errors": [{"path": str(d), "reason": r} for d, r in sorted(dir_errors)][
                :MAX_FAILURES_LISTED
            ],
        }

    def totals(self) -> tuple[int, int]:
        """(files known, files FAILED) under every root."""
        with self._lock:
            return self._known, self._failed

    def progress_json(self) -> dict[str, Any]:
        with self._lock:
            return self.progress.to_json(self._failed)

    def file_state(self, path: Path) -> FileStatus | None:
        with self._lock:
            return self._dirs.get(path.parent, {}).get(path.name)
