"""`ragd run --once`'s index, opened and fed while the run's jobs go on, not after them.

A run used to embed every folder, then open the index (importing zvec, opening the collection) and apply every
change note at the end, where nothing else was left to do: on 400 man pages through an API that was half of the
run. Once the run embeds its first texts (so there is something to write), a thread opens the index and applies
the change notes of each folder whose job has finished, a batch at a time, while the other folders are parsed and
embedded. The end of the run then applies what is left and checks the index against the sidecars as before
(`once.sync_index`): the same end state, reached sooner. Whatever goes wrong here (an agent holding the index, a
server down, a note that cannot be applied) is left to that final sync, which meets it again and reports it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config, data_dir
from ..index import IndexBackend
from ..index.write.sync import SyncReport
from ..pipeline.scan import Ignore
from . import checked

log = logging.getLogger(__name__)

GATHER_S = 0.5  # after a batch, the notes of the folders that finish within this long are applied together


@dataclass
class Opened:
    """The index as the run's jobs left it: open, with what was applied to it meanwhile."""

    index: IndexBackend
    rebuilt: bool  # unreadable, made anew: every source is filled from its sidecar
    new: bool  # empty when opened: the final check fills it rather than repairs it
    applied: SyncReport = field(default_factory=SyncReport)


class IndexAhead:
    def __init__(self, config: Config, roots: list[Path]) -> None:
        self._config, self._roots = config, roots
        self._done: list[Path] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._opened: Opened | None = None

    def start(self) -> None:
        """Open the index and follow the jobs from now on (once; the first texts sent to the embedder call it)."""
        with self._lock:
            if self._thread is None and not self._closing.is_set():
                self._thread = threading.Thread(target=self._follow, name="index-ahead", daemon=True)
                self._thread.start()

    def dir_done(self, directory: Path) -> None:
        """A folder's job has finished: its change note is on disk."""
        with self._lock:
            self._done.append(directory)
        self._wake.set()

    def finish(self) -> Opened | None:
        """Stop following; the open index with what was applied, or None when it was not opened (no texts
        embedded, or opening failed: the final sync opens it and reports why)."""
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        return self._opened

    def abandon(self) -> None:
        """The run stops early: close the index if it is open."""
        opened = self.finish()
        if opened is not None:
            opened.index.close()

    def _follow(self) -> None:
        from ..index import open_or_rebuild
        from ..index.write.sync import IndexSync

        checked.forget(data_dir(self._config), self._config.identity)  # the index changes from now on
        index: IndexBackend | None = None
        try:
            index, rebuilt = open_or_rebuild(
                data_dir(self._config), self._config.identity, self._config.index
            )
            opened = Opened(index, rebuilt, index.count() == 0)
        except Exception as err:  # an agent holding it, a server down: the final sync meets it and says so
            log.debug("index not opened ahead of the run's end: %s", err)
            if index is not None:  # opened, then the server stopped answering
                index.close()
            return
        self._opened = opened
        sync = IndexSync(opened.index, self._config.identity, self._roots, Ignore(self._config.ignore))
        while not self._closing.is_set():
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                dirs, self._done = self._done, []
            if not dirs or self._closing.is_set():
                continue
            try:
                part = sync.apply_pending(dirs)
            except Exception as err:  # the final sync applies the notes again and reports what fails
                log.debug("change notes not applied ahead of the run's end: %s", err)
                return
            opened.applied.mushrooms += part.mushrooms
            opened.applied.events += part.events
            log.debug("applied %d change notes (%d changes) of %d folders while the run goes on",
                      part.mushrooms, part.events, len(set(dirs)))  # fmt: skip
            self._closing.wait(GATHER_S)
