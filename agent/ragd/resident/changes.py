"""What changed in the knowledge base, told as it happens: the agent's one journal of changes, and its listeners.

Fed by the directory jobs' results (jobs.Outcomes) and by folders and roots removed. Each batch is recorded in the
documents' history (history.py, `history.sqlite3`: what `ragctl changes`, MCP's `recent_changes` and the web page
read), which says what happened to each document in the one vocabulary of changes (vocabulary.ChangeKind: a file
indexed anew is `created`, `changed`, `moved`, `restored` or `recovered`); the batch as the history recorded it then
goes to the listeners (the MCP server's change announcements, mcp/events.py), on the recording thread. Without a
history (a test), the batch is told as the job's result says it (historydb.changes_of).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..pipeline.dirjob import DirResult
from ..vocabulary import ChangeKind
from .history import History
from .historydb import Change, changes_of

log = logging.getLogger(__name__)

Listener = Callable[[list[Change]], None]

__all__ = ["Change", "ChangeLog", "Listener"]


class ChangeLog:
    def __init__(self, history: History | None = None) -> None:
        self.history = history  # the documents' history: where every change is recorded
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    def record(self, result: DirResult) -> None:
        """A directory job's changes: each file it (re)indexed, failed or skipped, and each entry it removed."""
        if self.history is not None:
            self._tell(self.history.record(result))
        else:
            self._tell(changes_of(result, time.time()))

    def removed(self, directory: Path, keep: Sequence[Path] = (), detail: str = "") -> None:
        """A directory (or a root) is gone from the knowledge base with everything under it, but for what is under
        one of `keep` (roots nested in it that stay): then each document that left is a change of its own."""
        gone = self.history.removed(directory, detail, keep) if self.history is not None else []
        now = time.time()
        if keep:
            self._tell([Change(now, Path(p), ChangeKind.DELETED) for p in gone])
        else:
            self._tell([Change(now, directory, ChangeKind.DELETED, is_dir=True)])

    def _tell(self, changes: list[Change]) -> None:
        if not changes:
            return
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(changes)
            except Exception:  # a listener's bug never fails the job that recorded the change
                log.exception("a change listener failed")

    def listen(self, fn: Listener) -> Callable[[], None]:
        """Call `fn` with every batch of changes from now on; returns the function that stops it."""
        with self._lock:
            self._listeners.append(fn)

        def stop() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return stop
