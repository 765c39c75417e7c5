"""What changed in the knowledge base while the agent ran: a journal of document changes, and its listeners.

Fed by the directory jobs' results (jobs.Outcomes): a file indexed anew (its content changed, or it is new),
failed or skipped, a file or a directory removed. The journal keeps the latest MAX_CHANGES in memory (it starts
empty with the agent: the index itself records no history) for the MCP tool `recent_changes`; listeners (the MCP
server's change announcements) get every batch as it is recorded, on the recording thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..paths import is_under
from ..pipeline import mushroom
from ..pipeline.dirjob import DirResult
from ..pipeline.sidecar import EMBEDDED, FAILED, SKIPPED
from .history import History

log = logging.getLogger(__name__)

MAX_CHANGES = 10_000
INDEXED, FAILED_NOW, SKIPPED_NOW, REMOVED = "indexed", "failed", "skipped", "removed"
KINDS = (INDEXED, FAILED_NOW, SKIPPED_NOW, REMOVED)
_BY_STATE = {EMBEDDED: INDEXED, FAILED: FAILED_NOW, SKIPPED: SKIPPED_NOW}


@dataclass(frozen=True)
class Change:
    at: float  # time.time()
    path: Path
    kind: str  # one of KINDS
    is_dir: bool = False  # a directory removed with everything in it
    reason: str = ""  # why it failed or was skipped


Listener = Callable[[list[Change]], None]


class ChangeLog:
    def __init__(self, size: int = MAX_CHANGES, history: History | None = None) -> None:
        self.history = history  # the persistent history (history.py) each batch is recorded in too
        self._lock = threading.Lock()
        self._changes: deque[Change] = deque(maxlen=size)
        self._listeners: list[Listener] = []

    def record(self, result: DirResult) -> None:
        """A directory job's changes: each file it (re)indexed, failed or skipped, and each entry it removed."""
        if self.history is not None:
            self.history.record(result)
        now = time.time()
        found = [Change(now, result.directory / f.name, _BY_STATE[f.state], reason=f.reason)
                 for f in result.files if f.state in _BY_STATE]  # fmt: skip
        for ev in result.events:
            if ev.status == mushroom.DELETE:
                found.append(Change(now, result.directory / ev.file, REMOVED))
            elif ev.status == mushroom.DIR_DELETE:
                found.append(Change(now, result.directory / ev.file, REMOVED, is_dir=True))
        self._add(found)

    def removed(self, directory: Path, keep: Sequence[Path] = (), detail: str = "") -> None:
        """A directory (or a root) is gone from the knowledge base with everything under it, but for what is under
        one of `keep` (roots nested in it that stay): then each document that left is a change of its own."""
        gone = self.history.removed(directory, detail, keep) if self.history is not None else []
        now = time.time()
        if keep:
            self._add([Change(now, Path(p), REMOVED) for p in gone])
        else:
            self._add([Change(now, directory, REMOVED, is_dir=True)])

    def _add(self, changes: list[Change]) -> None:
        if not changes:
            return
        with self._lock:
            self._changes.extend(changes)
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(changes)
            except Exception:  # a listener's bug never fails the job that recorded the change
                log.exception("a change listener failed")

    def since(self, start: float, under: Iterable[Path] = (), limit: int = 100,
              kinds: Iterable[str] = KINDS) -> tuple[list[Change], bool]:  # fmt: skip
        """The latest change of each path since `start` (under one of `under`, if given), newest first, at most
        `limit`, only those of `kinds`; and whether more were left out."""
        prefixes, wanted = list(under), frozenset(kinds)
        with self._lock:
            changes = list(self._changes)
        latest: dict[Path, Change] = {}
        for ch in reversed(changes):
            if ch.at < start:
                break
            if ch.path not in latest and (not prefixes or any(is_under(ch.path, p) for p in prefixes)):
                latest[ch.path] = ch
        found = [ch for ch in latest.values() if ch.kind in wanted]
        return found[:limit], len(found) > limit

    def oldest(self) -> float | None:
        """When the oldest change kept was recorded (None: none yet)."""
        with self._lock:
            return self._changes[0].at if self._changes else None

    def listen(self, fn: Listener) -> Callable[[], None]:
        """Call `fn` with every batch of changes from now on; returns the function that stops it."""
        with self._lock:
            self._listeners.append(fn)

        def stop() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return stop
