"""A phase of directory jobs (a rescan, the initial index, `ragd run --once`): `Progress`, how far it has come and the
time left, told from the pace of the last ETA_WINDOW_S; `Tally`, what its jobs did (the summary `run --once` prints);
`PhaseTally`, a snapshot of both. The tracker (tracker.py) keeps the current one.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..pipeline.dirjob import DirResult
from ..pipeline.scan import Expected
from ..vocabulary import FileState

MAX_FAILURES_LISTED = 50
ETA_WINDOW_S = 60.0  # the time left is told from the pace of the files done in the last minute
ETA_MIN_S = 3.0  # ... once that pace has been seen for this long


@dataclass
class Tally:
    """What the jobs of a phase did, each file counted as its job found it: a file left FAILED by an earlier run
    and not retried this time counts as unchanged."""

    embedded: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)  # file, reason
    chunks: int = 0  # of the files embedded
    texts_embedded: int = 0  # sent to the embedder
    vectors_reused: int = 0  # taken from stored entries
    mushrooms: int = 0  # change notes written
    leads: int = 0  # entries of an earlier ragd given their lead (pipeline/lead.py), each one text embedded

    def add(self, result: DirResult) -> None:
        self.mushrooms += result.mushroom is not None
        for f in result.files:
            if f.state == FileState.EMBEDDED:
                self.embedded += 1
                self.chunks += f.chunks
                self.texts_embedded += f.embedded
                self.vectors_reused += f.reused
            elif f.state == FileState.SKIPPED:
                self.skipped += 1
            elif f.state == FileState.FAILED:
                self.failed.append((result.directory / f.name, f.reason))
            else:
                self.unchanged += 1
                self.leads += f.embedded > 0  # its content unchanged: only its lead was made

    def copy(self) -> Tally:
        return replace(self, failed=list(self.failed))


@dataclass(frozen=True)
class PhaseTally:
    """A snapshot of the current phase: how many directories it covers and has done, and what their jobs did."""

    phase: str | None
    dirs_total: int
    dirs_done: int
    tally: Tally
    failed_dirs: tuple[tuple[str, str], ...]  # directory, reason
    expected: dict[str, Expected] | None  # what the index should hold (when the phase keeps it)


@dataclass
class Progress:
    """A rescan phase: the directories it covers, and those of them whose job has finished (each counted once,
    however often it ran: an edit during the phase runs a directory again)."""

    phase: str | None = None  # "initial" | "rescan" | None
    dirs: set[Path] = field(default_factory=set)
    done: dict[Path, int] = field(default_factory=dict)  # finished directory -> files it holds
    failed_dirs: list[tuple[str, str]] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    expected: dict[str, Expected] | None = None  # source path -> what the index should hold (None: not kept)
    # a job reporting in steps (a big folder), until its result: its files reported so far, and in all
    partial: dict[Path, int] = field(default_factory=dict)
    planned: dict[Path, int] = field(default_factory=dict)
    reported: int = 0  # files reported by the phase's jobs and steps (a directory run twice counts twice)
    pace: deque[tuple[float, int]] = field(default_factory=deque)  # (monotonic time, `reported` then)

    @property
    def dirs_total(self) -> int:
        return len(self.dirs)

    @property
    def dirs_done(self) -> int:
        return len(self.done)

    @property
    def files_done(self) -> int:
        return sum(self.done.values()) + sum(n for d, n in self.partial.items() if d not in self.done)

    @property
    def files_total(self) -> int:
        """The files of the directories done and of the big folders under way (the others are not counted yet)."""
        return sum(self.done.values()) + sum(n for d, n in self.planned.items() if d not in self.done)

    def moved(self, files: int) -> None:
        """`files` were reported just now: a point of the pace."""
        now, pace = time.monotonic(), self.pace
        self.reported += files
        pace.append((now, self.reported))
        while len(pace) > 2 and pace[1][0] < now - ETA_WINDOW_S:
            pace.popleft()

    def time_left(self) -> float | None:
        """Seconds left at the pace of the last ETA_WINDOW_S (None: no pace yet); the directories not begun are
        taken to hold as many files as those begun, on average."""
        if not self.phase or len(self.pace) < 2:
            return None
        now = time.monotonic()
        (t0, n0), n = self.pace[0], self.reported
        if now - t0 < ETA_MIN_S or n <= n0:
            return None
        begun = len(self.done) + sum(1 for d in self.planned if d not in self.done)
        total = self.files_total
        unknown = max(0, self.dirs_total - begun) * total / max(1, begun)
        left = max(0.0, total - self.files_done + unknown)
        return round(left * (now - t0) / (n - n0), 1)

    def to_json(self, failed_files: int) -> dict[str, Any]:
        return {"phase": self.phase, "dirs_total": self.dirs_total, "dirs_done": self.dirs_done,
                "files_done": self.files_done, "files_total": self.files_total, "eta_s": self.time_left(),
                "failed": failed_files,
                "failed_dirs": [{"path": p, "reason": r} for p, r in self.failed_dirs[:MAX_FAILURES_LISTED]]}  # fmt: skip
