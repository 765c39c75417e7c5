"""Per-directory coalescing of watch events (DESIGN §5).

A directory touched by events becomes *due* after `quiet` seconds without a further event, or `ceiling` seconds
after its first pending event under a steady stream of events, whichever comes first. An urgent touch makes it due
at once. Watcher threads touch; the scheduler thread waits for due directories.

Due times sit in a heap with lazy updates: a later event only postpones a directory, so its heap entry is corrected
when it comes up, and a burst over many directories costs O(log n) per event, not a scan of everything pending.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..paths import dropped, is_under


@dataclass
class _Pending:
    seq: int  # tells this round's heap entries from those of a discarded or already handed-out round
    first: float  # time of the first event since the directory was last handed out
    last: float  # time of the latest event
    urgent: bool = False

    def due_at(self, quiet: float, ceiling: float) -> float:
        if self.urgent:
            return self.first
        return min(self.last + quiet, self.first + ceiling)


class Debouncer:
    """Per-directory coalescing: a directory is due after `quiet` s without events, or `ceiling` s after its
    first pending event."""

    def __init__(
        self, quiet: float = 0.3, ceiling: float = 3.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if quiet <= 0 or ceiling <= 0:
            raise ValueError(f"quiet and ceiling must be positive (got {quiet}, {ceiling})")
        self.quiet = quiet
        self.ceiling = max(ceiling, quiet)
        self._clock = clock
        self._pending: dict[Path, _Pending] = {}
        self._heap: list[tuple[float, int, Path]] = []  # (due no earlier than, seq, directory)
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False

    def touch(self, directory: Path, *, now: float | None = None, urgent: bool = False) -> None:
        """Record an event in `directory`; `urgent` makes it due immediately."""
        t = self._clock() if now is None else now
        with self._cond:
            p = self._pending.get(directory)
            if p is None:
                p = self._pending[directory] = _Pending(next(self._seq), t, t, urgent)
                self._push(p, directory)
            else:
                p.last = max(p.last, t)
                if urgent and not p.urgent:
                    p.urgent = True
                    self._push(p, directory)

    def pop_due(self, now: float | None = None) -> list[Path]:
        """The directories that are due, oldest first; they leave the pending set."""
        t = self._clock() if now is None else now
        with self._cond:
            return [d for d, _last in self._pop_due(t)]

    def wait_due(self, timeout: float | None) -> list[tuple[Path, float]]:
        """Block until a directory is due (returning the due ones, each with the time of its latest event: a job
        that began after it lists what the events said), the timeout passes or close() is called (returning an
        empty list)."""
        start = self._clock()
        with self._cond:
            while not self._closed:
                now = self._clock()
                due = self._pop_due(now)
                if due:
                    return due
                wait = self._next_due(now)
                if timeout is not None:
                    left = start + timeout - now
                    if left <= 0:
                        return []
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)
            return []

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def pending_under(self, prefix: Path) -> int:
        """How many pending directories are `prefix` or below it."""
        with self._cond:
            return sum(1 for d in self._pending if is_under(d, prefix))

    def discard_under(self, prefix: Path, keep: Iterable[Path] = ()) -> None:
        """Forget the pending directories at or below `prefix` (a removed root, a directory that left the tree),
        except those under a directory of `keep` (a nested root that stays)."""
        keep = list(keep)
        with self._cond:
            for d in [d for d in self._pending if dropped(d, prefix, keep)]:
                del self._pending[d]  # its heap entries are skipped when they come up

    def is_pending(self, directory: Path) -> bool:
        with self._cond:
            return directory in self._pending

    def close(self) -> None:
        """Wake every waiter; later waits return at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- under the lock -------------------------------------------------------------------------------------
    def _push(self, p: _Pending, directory: Path) -> None:
        at = p.due_at(self.quiet, self.ceiling)
        if not self._heap or at < self._heap[0][0]:
            self._cond.notify_all()  # sooner than anything a waiter is waiting for
        heapq.heappush(self._heap, (at, p.seq, directory))

    def _current(self, seq: int, directory: Path) -> _Pending | None:
        p = self._pending.get(directory)
        return p if p is not None and p.seq == seq else None

    def _pop_due(self, now: float) -> list[tuple[Path, float]]:
        """The directories due, oldest first, each with the time of its latest event."""
        due: list[tuple[float, Path, float]] = []
        while self._heap and self._heap[0][0] <= now:
            _, seq, d = heapq.heappop(self._heap)
            p = self._current(seq, d)
            if p is None:
                continue  # discarded, handed out already, or a duplicate entry
            at = p.due_at(self.quiet, self.ceiling)
            if at <= now:
                del self._pending[d]
                due.append((p.first, d, p.last))
            else:  # postponed by later events
                heapq.heappush(self._heap, (at, seq, d))
        return [(d, last) for _, d, last in sorted(due)]

    def _next_due(self, now: float) -> float | None:
        """Seconds until the next pending directory may be due, None when nothing is pending."""
        while self._heap and self._current(self._heap[0][1], self._heap[0][2]) is None:
            heapq.heappop(self._heap)
        return max(0.0, self._heap[0][0] - now) if self._heap else None
