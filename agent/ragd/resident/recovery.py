"""The index made anew and the data directory made again: `Recovery`.

`rebuild_index` drops the collection and refills it from the sidecars on the writer thread (searches wait it out);
`check_data_dir` (from the main loop, a verification, a failed change note) makes again what vanished of the data
directory (datadir.py), writing back roots.json, reopening the history, and rebuilding the index if it went.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from pathlib import Path
from typing import Any

from ..config import data_dir
from ..errors import RagdError
from ..index import IndexBackend, destroy_index, open_index
from ..index.keyword import keywords
from ..index.write.sync import IndexSync
from ..pipeline.sidecar import utc_stamp
from . import datadir, rootstate
from .serving import IndexServing

# the agent's log: its lines keep the name they have always had (docs/operations.md quotes them)
log = logging.getLogger("ragd.resident.agent")

REBUILD_POLL_S = 0.25  # a rebuild asked for while another runs looks this often whether it is done


class Recovery(IndexServing):
    """The index rebuilt from the sidecars (`ragctl index --rebuild`, or after it vanished), and what vanished of
    the data directory made again."""

    def rebuild_index(self, progress: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Drop the collection and refill it from the sidecars (on the writer thread); searches wait it out. A
        rebuild under way (the agent's own, the index having vanished, or another one asked for) is waited for
        first: this one follows it, it is not refused."""
        started = time.monotonic()
        with self._rebuild_lock:  # one asked-for rebuild at a time
            while True:
                with self._recovery_lock:  # (a recovery sets `rebuilding` under it)
                    if not self.rebuilding or self.state in ("stopping", "stopped"):
                        self.ready()  # starting or stopping: refused
                        self.rebuilding = True
                        break
                progress({"phase": "waiting for the rebuild under way",
                          "elapsed_s": round(time.monotonic() - started, 1)})  # fmt: skip
                time.sleep(REBUILD_POLL_S)
            return self._rebuild_asked(progress, started)

    def _rebuild_asked(self, progress: Callable[[dict[str, Any]], bool], started: float) -> dict[str, Any]:
        try:
            fut = self.indexer.call(self._rebuild)
            while True:
                try:
                    result = fut.result(timeout=0.5)
                    break
                except FutureTimeout:
                    progress({"phase": "rebuilding", "elapsed_s": round(time.monotonic() - started, 1)})
        finally:
            self.rebuilding = False
        self.indexer.retry_failed()  # a note that failed on the index made anew (deleted under it, say): again now
        return {**result, "elapsed_s": round(time.monotonic() - started, 3)}

    def _rebuild(self, sync: IndexSync, *, lost: bool = False) -> dict[str, Any]:
        roots = list(sync.roots)
        self._filled = False  # recorded before the index is made anew: cut short, the next start fills it
        self._save_served(roots)
        if lost:  # its files are gone: what is left of it goes too (a keyword index without its collection)
            _close_lost(sync.index)
            if self.config.index.backend != "milvus":
                keywords.destroy(Path(sync.index.path))
        else:
            try:
                sync.index.close()
            except (
                RagdError
            ) as err:  # its files vanished under it, not noticed yet: it is made anew all the same
                log.info("the index to rebuild could not be closed (%s): made anew", err)
                _close_lost(sync.index)
                if self.config.index.backend != "milvus":
                    keywords.destroy(Path(sync.index.path))
        destroy_index(self.data_dir, self.config.identity, self.config.index)
        sync.index = open_index(self.data_dir, self.config.identity, self.config.index)
        self._searcher = self._search_over(sync.index)
        report = sync.reconcile(None)
        sync.flush()
        self._filled = True
        self._save_served(roots)
        return {"chunks": sync.index.count(), "sources": report.repaired}

    # -- the data directory deleted or replaced (datadir.py) ------------------------------------------------
    def check_data_dir(self, *, at_once: bool = False) -> None:
        """Make again what vanished of the data directory, and rebuild the index from the sidecars if it went:
        from the main loop, at the start of a verification (`at_once`), after a change note failed."""
        with self._recovery_lock:
            if self.state in ("starting", "stopping", "stopped"):
                return
            if self.rebuilding:  # this one, or `ragctl index --rebuild`: its collection is made anew
                return
            lost = self.guard.check(at_once=at_once)
            if lost:
                log.warning("%s", datadir.describe(lost, self.data_dir))
                self._recover(lost)

    def keep_added_roots(self) -> None:
        """(At a stop.) roots.json written back if it vanished since the last check (the data directory deleted just
        before the stop, too late for a recovery): the agent's memory is the only copy of the roots added with
        ragctl; the rest of the data directory the next start makes again."""
        path = self.data_dir / rootstate.FILE_NAME
        if not self.kept_roots.any() or path.exists():
            return
        data_dir(self.config)  # made again, 0700
        try:
            if self.kept_roots.write_back():
                log.warning("%s vanished; the roots added with ragctl were written back to it", path)
        except OSError as err:
            log.error("cannot write the roots added with ragctl back to %s: %s", self.data_dir, err)

    def _index_vanished(self) -> bool:
        """(A change note failed.) Whether the data directory, or the index in it, vanished: a rebuild is due."""
        self.check_data_dir()
        return self.rebuilding or datadir.INDEX in self.guard.lost()

    def _recover(self, lost: frozenset[str]) -> None:
        data_dir(self.config)  # made again, 0700, with its index/
        if datadir.LOCK in lost and not self.host.relock():
            log.error("another agent took %s meanwhile: stop one of the two", self.data_dir)
        if datadir.ROOTS in lost:
            try:
                self.kept_roots.write_back()
            except OSError as err:
                log.error("cannot write the roots added with ragctl back to %s: %s", self.data_dir, err)
        if datadir.HISTORY in lost:
            self.history.reopen()
        if datadir.WHOLE in lost:
            self.stat_cache.clear()
        self.data_dir_rebuilt = {"at": utc_stamp(), "lost": sorted(lost), "done": datadir.INDEX not in lost}
        if datadir.INDEX not in lost:
            self._record_served()
            self._remember_data_dir(made_again=True)
            return
        self.rebuilding = True
        self.indexer.call(partial(self._rebuild, lost=True)).add_done_callback(self._rebuilt)

    def _rebuilt(self, fut: Future[Any]) -> None:
        """(On the writer thread.) The index rebuilt after it vanished: the notes it could not take, again."""
        self.rebuilding = False
        err = fut.exception()
        if err is not None:
            log.error("rebuilding the index in %s failed: %s", self.data_dir, err)
        else:
            log.info("the index was rebuilt from the sidecars: %d chunks, %d sources",
                     fut.result()["chunks"], fut.result()["sources"])  # fmt: skip
        if self.data_dir_rebuilt is not None:
            self.data_dir_rebuilt["done"] = True
        self._remember_data_dir(made_again=True)
        self.indexer.retry_failed()

    def _remember_data_dir(self, *, made_again: bool = False) -> None:
        """What the data directory holds now, for `check_data_dir` to compare with (`made_again`: after a
        recovery; otherwise what is lost now stays a loss: datadir.DataDirGuard.remember)."""
        # (a shared index is elsewhere)
        local = self.config.index.backend != "milvus" and self._writer is not None
        self.guard.remember(datadir.parts(
            self.data_dir, collection=Path(self.indexer.index.path) if local else None,
            history=self.history.path if self.history.error is None else None,
            roots=self.kept_roots.any()), made_again=made_again)  # fmt: skip


def _close_lost(index: IndexBackend) -> None:
    """Close an index whose files were deleted under it: what fails to be written on the way is gone anyway."""
    try:
        index.close()
    except (RagdError, OSError, ValueError) as err:
        log.debug("closing the vanished index at %s: %s", index.path, err)
