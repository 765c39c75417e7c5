"""What the agent knows about every file under its roots: the state each directory job left it in.

Fed by directory job results (and by the removal of directories and roots); read by `status` without touching the
disk, so that `ragctl status` stays fast with tens of thousands of files. A phase (a rescan, or `ragd run --once`)
also tallies what its jobs did: that tally is the summary `run --once` prints (phase.py: the phase's progress and
tally; the tracker keeps the current one).

A big folder's job reports its files in steps as it goes (dirjob.py): each step's files take their states at once,
the phase counts them as done, and the files it will report in all count in the phase's total; the time left is
told from the pace of the last ETA_WINDOW_S (phase.py). Such a job outside any phase (a folder that appeared) starts one, so
that its progress shows (the agent ends it, as any phase, once no job is left).
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import dropped, is_under
from ..pipeline.dirjob import DirResult
from ..vocabulary import SETTLED, FileState
from . import memory
from .phase import MAX_FAILURES_LISTED, PhaseTally, Progress

STEP_PHASE = "folder"  # the phase a big folder's job starts when none is under way
STATUSES = 1024  # distinct file states shared (_status); a state that fell out is made again, equal


@dataclass(frozen=True)
class FileStatus:
    state: FileState  # EMBEDDED, SKIPPED, FAILED (PENDING: its job was abandoned)
    reason: str = ""
    retry_at: str | None = None


class Tracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirs: dict[Path, dict[str, FileStatus]] = {}
        # files in _dirs, and how many of them FAILED: kept up to date as results arrive (status polls often)
        self._known = 0
        self._failed = 0
        self._skipped: Counter[str] = Counter()  # files SKIPPED under every root, by reason_kind
        self.progress = Progress()
        self.dir_errors: dict[Path, str] = {}
        # folders the agent cannot read (among dir_errors): out of search, each with when that was seen first
        self.denied: dict[Path, str] = {}
        self._steps: dict[Path, dict[str, FileStatus]] = {}  # a job reporting in steps: the files it reported

    def compact(self) -> int:
        """Each directory's states by name made anew, each name interned (memory.compact: the states themselves are
        shared already); returns how many."""
        with self._lock:
            self._dirs = {
                d: {sys.intern(n): st for n, st in files.items()} for d, files in self._dirs.items()
            }
            return self._known

    # -- updates ----------------------------------------------------------------------------------------------
    def record(self, result: DirResult) -> None:
        """A job's result: its directory's files are those it names (with those its steps named, if any)."""
        files = _states(result)
        memory.recorded(len(files))
        with self._lock:
            if result.step:
                files = {**self._steps.pop(result.directory, {}), **files}
            self._count(self._dirs.get(result.directory), -1)
            self._dirs[result.directory] = files
            self._count(files, +1)
            self.dir_errors.pop(result.directory, None)
            self.denied.pop(result.directory, None)
            prog = self.progress
            prog.partial.pop(result.directory, None)
            prog.planned.pop(result.directory, None)
            if result.directory in prog.dirs:
                prog.done[result.directory] = len(files)
                prog.tally.add(result)
                if prog.expected is not None:
                    prog.expected.update(result.indexable)
                prog.moved(len(result.files))

    def record_step(self, result: DirResult) -> None:
        """A step of a job that reports as it goes: its files take their states now (the others keep theirs until
        the job's result), and count as done in the phase, which it joins (or starts)."""
        files = _states(result)
        memory.recorded(len(files))
        d = result.directory
        with self._lock:
            if result.step == 1:
                self._steps[d] = {}
            known = self._dirs.setdefault(d, {})
            self._count({n: known[n] for n in files if n in known}, -1)
            known.update(files)
            self._count(files, +1)
            self._steps.setdefault(d, {}).update(files)
            prog = self.progress
            if prog.phase is None:
                prog = self.progress = Progress(STEP_PHASE)
            prog.dirs.add(d)
            if result.step == 1:
                prog.planned[d] = result.planned
                prog.partial[d] = 0
            prog.partial[d] = prog.partial.get(d, 0) + len(files)
            prog.tally.add(result)
            if prog.expected is not None:
                prog.expected.update(result.indexable)
            prog.moved(len(files))

    def record_error(self, directory: Path, reason: str) -> None:
        with self._lock:
            self._steps.pop(directory, None)
            self.progress.partial.pop(directory, None)
            self.progress.planned.pop(directory, None)
            self.dir_errors[directory] = reason
            if directory in self.progress.dirs:
                self.progress.done[directory] = 0
                self.progress.failed_dirs.append((str(directory), reason))

    def record_denied(self, top: Path, reason: str, since: str) -> bool:
        """`top` cannot be read: its files, and those below it, leave the tracker (and search); the folder is shown
        with `reason` instead. False if it was known already."""
        with self._lock:
            prog = self.progress
            for d in prog.dirs:  # the phase's jobs there are done (a rescan while it is held out too)
                if is_under(d, top) and d not in prog.done:
                    prog.done[d] = 0
            if top in self.denied:
                return False
            for d in [d for d in self._dirs if is_under(d, top)]:
                self._count(self._dirs.pop(d), -1)
            for d in [d for d in self.dir_errors if is_under(d, top)]:
                del self.dir_errors[d]
                self.denied.pop(d, None)
            self.denied[top] = since
            self.dir_errors[top] = reason
            if top in prog.dirs:
                prog.failed_dirs.append((str(top), reason))
        return True

    def is_held_out(self, directory: Path) -> bool:
        with self._lock:
            return directory in self.denied

    def held_out(self) -> set[Path]:
        """The folders out of search because they cannot be read."""
        with self._lock:
            return set(self.denied)

    def held_out_since(self) -> dict[Path, str]:
        with self._lock:
            return dict(self.denied)

    def forget(self, top: Path, keep: Sequence[Path] = ()) -> None:
        """Drop `top` and every directory under it (deleted, moved out, or its root removed), except those under
        a directory of `keep` (roots nested in a removed root, which stay)."""

        def gone(d: Path) -> bool:
            return dropped(d, top, keep)

        with self._lock:
            for d in [d for d in self._dirs if gone(d)]:
                self._count(self._dirs.pop(d), -1)
            for d in [d for d in self.dir_errors if gone(d)]:
                del self.dir_errors[d]
                self.denied.pop(d, None)
            for d in [d for d in self._steps if gone(d)]:
                del self._steps[d]
            prog = self.progress
            prog.dirs = {d for d in prog.dirs if not gone(d) or d in prog.done}
            for d in [d for d in prog.planned if gone(d)]:
                prog.planned.pop(d)
                prog.partial.pop(d, None)

    def _count(self, files: dict[str, FileStatus] | None, sign: int) -> None:
        if files:
            self._known += sign * len(files)
            self._failed += sign * sum(1 for st in files.values() if st.state == FileState.FAILED)
            for st in files.values():
                if st.state == FileState.SKIPPED:
                    self._skipped[reason_kind(st.reason)] += sign

    def start_phase(self, phase: str, *, expected: bool = False) -> None:
        """A new phase; with `expected`, it keeps what the index should hold after its jobs (for a sync)."""
        with self._lock:
            self.progress = Progress(phase, expected={} if expected else None)

    def end_phase(self) -> None:
        with self._lock:
            self.progress.phase = None

    def add_to_phase(self, dirs: Iterable[Path]) -> None:
        with self._lock:
            if self.progress.phase:
                self.progress.dirs.update(dirs)

    # -- reads ----------------------------------------------------------------------------------------------
    def root_summary(self, root: Path) -> dict[str, Any]:
        counts = {str(s): 0 for s in SETTLED}
        failures: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        why_skipped: Counter[str] = Counter()
        with self._lock:  # copied: a big folder's job adds to its directory's files in place (record_step)
            dirs = [(d, list(files.items())) for d, files in self._dirs.items() if is_under(d, root)]
            dir_errors = [(d, r) for d, r in self.dir_errors.items() if is_under(d, root)]
            denied = {d: since for d, since in self.denied.items() if is_under(d, root)}
        for d, items in dirs:
            for name, st in items:
                counts[st.state] = counts.get(st.state, 0) + 1
                if st.state == FileState.FAILED and len(failures) < MAX_FAILURES_LISTED:
                    failures.append({"path": str(d / name), "reason": st.reason, "retry_at": st.retry_at})
                elif st.state == FileState.SKIPPED:
                    why_skipped[reason_kind(st.reason)] += 1
                    if len(skipped) < MAX_FAILURES_LISTED:
                        skipped.append({"path": str(d / name), "reason": st.reason})
        failures.sort(key=lambda f: f["path"])
        skipped.sort(key=lambda f: f["path"])
        return {
            "files": counts,
            "failures": failures,
            "skipped": skipped,
            # how many files were skipped for each reason (paths and numbers left out), most first
            "skipped_reasons": [{"reason": r, "files": n} for r, n in why_skipped.most_common()],
            "dir_errors": [
                _dir_error(d, r, denied.get(d)) for d, r in sorted(dir_errors)[:MAX_FAILURES_LISTED]
            ],
        }

    def skipped_reasons(self) -> dict[str, int]:
        """Files SKIPPED under every root, by reason (reason_kind)."""
        with self._lock:
            return {reason: n for reason, n in self._skipped.items() if n > 0}

    def totals(self) -> tuple[int, int]:
        """(files known, files FAILED) under every root."""
        with self._lock:
            return self._known, self._failed

    def phase_tally(self) -> PhaseTally:
        """The current phase's counts and tally, copied (its `expected` is the phase's own: read it at the end)."""
        with self._lock:
            prog = self.progress
            return PhaseTally(prog.phase, prog.dirs_total, prog.dirs_done, prog.tally.copy(),
                              tuple(prog.failed_dirs), prog.expected)  # fmt: skip

    def progress_json(self) -> dict[str, Any]:
        with self._lock:
            return self.progress.to_json(self._failed)

    def file_state(self, path: Path) -> FileStatus | None:
        with self._lock:
            return self._dirs.get(path.parent, {}).get(path.name)

    def problems(self, states: Collection[FileState]) -> list[tuple[Path, FileStatus]]:
        """Every file known in one of `states`, in path order."""
        with self._lock:
            found = [(d / name, st) for d, files in self._dirs.items() for name, st in files.items()
                     if st.state in states]  # fmt: skip
        return sorted(found, key=lambda f: (f[0].parent, f[0].name))

    def files(
        self, after: Path | None = None, limit: int = 500
    ) -> tuple[list[tuple[Path, FileStatus]], bool]:
        """Every file known, directory by directory (each in path order, its files by name): at most `limit` of
        those after `after`, and whether more follow. A page boundary stays right while files come and go."""
        last = (after.parent, after.name) if after is not None else None
        with self._lock:
            dirs = sorted(self._dirs) if last is None else sorted(d for d in self._dirs if d >= last[0])
            found: list[tuple[Path, FileStatus]] = []
            for d in dirs:
                for name in sorted(self._dirs[d]):
                    if last is not None and (d, name) <= last:
                        continue
                    path = d / name
                    if len(found) == limit:
                        return found, True
                    found.append((path, self._dirs[d][name]))
        return found, False


def reason_kind(reason: str) -> str:
    """A SKIPPED reason without what is particular to one file (a path, a size), for counting files by reason:
    "file too large: 12 bytes > limits.max_file_size 10" -> "file too large: N bytes > limits.max_file_size N";
    a name shown as its bytes, "(b'caf\\xe9.txt')", -> "(…)". A number that is part of a word ("UTF-8") stays."""
    return _NUMBER.sub("N", _PATH.sub("…", _BYTES.sub("(…)", reason))) or "no reason given"


_PATH = re.compile(r"(?<![\w.])/[^\s,;]+")
_BYTES = re.compile(r"""\(b(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\)""")
_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?![\w.])")


def _dir_error(directory: Path, reason: str, since: str | None) -> dict[str, Any]:
    """A folder's error as status lists it; one that cannot be read says since when."""
    return {"path": str(directory), "reason": reason, **({"since": since} if since else {})}


def _states(result: DirResult) -> dict[str, FileStatus]:
    return {f.name: _status(f.final_state, f.reason, f.retry_at) for f in result.files}


@functools.lru_cache(maxsize=STATUSES)
def _status(state: FileState, reason: str, retry_at: str | None) -> FileStatus:
    """One FileStatus for every file in the same state (it is frozen): the tracker holds one for each file under the
    roots, and almost all are EMBEDDED with no reason (30,000 notes: 3.4 MiB of copies; docs/benchmarks/history.md)."""
    return FileStatus(state, reason, retry_at)
