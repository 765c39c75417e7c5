"""The resident agent's parts wired together: watcher -> debouncer -> scheduler -> directory jobs -> indexer.

`Agent` owns the components and the reactions between them (what a watch event, a finished job, a rescan or a
reload does). The process lifecycle (signals, main loop, sd_notify, shutdown order) is in `lifecycle.py`; the
control verbs are in `handlers.py`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from pathlib import Path

import numpy as np

from . import __version__, rootstate
from .config import Config, data_dir
from .control import Stream
from .debounce import Debouncer
from .dirjob import DirResult, JobContext, run_directory
from .embed import LazyEmbedQueue
from .errors import RagdError
from .index import IndexBackend, destroy_index, open_index, open_or_rebuild
from .indexer import Indexer
from .indexsync import IndexSync, root_of
from .mushroom import writer_pid
from .runonce import skip_policy
from .scan import Expected, Ignore, walk_dirs
from .scheduler import Scheduler, under
from .search import SearchService
from .tracker import Tracker
from .watcher import Watcher, WatchEvent

log = logging.getLogger(__name__)

DIR_RETRY_S = 60.0  # a directory whose job failed as a whole is tried again after this
SETTLE_S = 0.6  # `wait` needs this long without new events (watchdog holds a lone move-out for 0.5 s)


class Agent:
    def __init__(self, config: Config, cli_roots: Iterable[Path] = ()) -> None:
        self.config = config
        self.cli_roots = [Path(r).expanduser().resolve() for r in cli_roots]
        self.data_dir = data_dir(config)
        self.started = time.time()
        self.state = "starting"
        self.roots: list[Path] = []
        self.missing_roots: dict[Path, str] = {}
        self.tracker = Tracker()
        self.ignore = Ignore(config.ignore)
        self.debouncer = Debouncer(config.watch.quiet, config.watch.ceiling)
        self.embed = LazyEmbedQueue(config.embedding)
        self.scheduler = Scheduler(self._job, self._job_done, config.run.jobs)
        self.watcher = Watcher(self.ignore, self.on_watch_event)
        self.last_event = 0.0
        self.rebuilding = False
        self._phase_expected: dict[str, Expected] | None = None
        self._rescans = 0  # rescan threads still walking
        self._lock = threading.RLock()
        self._forced: set[Path] = set()
        self._ctx = JobContext(config, self.embed.submit, self.ignore, skip_policy(config))

    def _job_context(self, force: bool) -> JobContext:
        roots = tuple(Path(os.path.realpath(r)) for r in self.roots)
        return replace(self._ctx, force=force, roots=roots)
        self.indexer: Indexer
        self.search_service: SearchService

    # -- start-up -------------------------------------------------------------------------------------------
    def open_index(self) -> None:
        index, rebuilt = open_or_rebuild(self.data_dir, self.config.identity, self.config.index)
        if rebuilt:
            log.warning("the index was unreadable and has been recreated; it is refilled from the sidecars")
        self._use_index(index)

    def _use_index(self, index: IndexBackend) -> None:
        sync = IndexSync(index, self.config.identity, self.roots, self.ignore)
        self.indexer = Indexer(sync)
        self.search_service = self._search_over(index)

    def _search_over(self, index: IndexBackend) -> SearchService:
        return SearchService(index, self._embed_query, self.roots)

    def _embed_query(self, text: str) -> np.ndarray:
        vectors: np.ndarray = self.embed.submit([text], priority=True).result()
        return vectors[0]

    def resolve_roots(self) -> list[Path]:
        overlay = rootstate.load(self.data_dir)
        return overlay.apply([*self.config.roots, *self.cli_roots])

    def start(self) -> None:
        """Index open, threads running, every root watched and its initial reconcile under way."""
        self.roots = []
        self.open_index()
        self.indexer.start()
        threading.Thread(target=self._schedule_loop, name="debounce", daemon=True).start()
        self.set_roots(self.resolve_roots(), phase="initial")
        self.state = "indexing"

    # -- roots ----------------------------------------------------------------------------------------------
    def set_roots(self, wanted: list[Path], phase: str = "rescan") -> tuple[list[Path], list[Path]]:
        """Watch and index `wanted`; stop watching and drop from the index the roots no longer wanted."""
        with self._lock:
            current = list(self.roots)
            added = [r for r in wanted if r not in current]
            removed = [r for r in current if r not in wanted]
            for r in removed:
                self._drop_root(r)
            ok = [r for r in added if self._add_root(r)]
            self.roots[:] = [r for r in wanted if r in current or r in ok]
            self.indexer.sync.roots = list(self.roots)
            self.search_service = self._search_over(self.indexer.index)
        if ok:
            self.rescan(ok, phase)
        return ok, removed

    def _add_root(self, root: Path) -> bool:
        if not root.is_dir():
            reason = "does not exist" if not root.exists() else "is not a directory"
            log.error("root %s %s; it is not watched (add it again once it exists)", root, reason)
            self.missing_roots[root] = reason
            return False
        self.missing_roots.pop(root, None)
        mode = self.watcher.add_root(root, poll=root in self.config.watch.poll,
                                     poll_interval=self.config.watch.poll_interval)  # fmt: skip
        log.info("watching %s (%s)", root, mode)
        return True

    def _drop_root(self, root: Path) -> None:
        log.info("no longer watching %s; its entries leave the index", root)
        self.watcher.remove_root(root)
        self.debouncer.discard_under(root)
        self.scheduler.discard_under(root)
        self.tracker.forget(root)
        nested = [r for r in self.roots if r != root and under(r, root)]
        self.indexer.call(lambda s: _drop_subtree(s, root, nested))

    # -- events ---------------------------------------------------------------------------------------------
    def on_watch_event(self, ev: WatchEvent) -> None:
        self.last_event = time.monotonic()
        if ev.kind == "mushroom":
            if ev.path is not None and writer_pid(ev.path.name) != os.getpid():
                self.indexer.put_mushroom(ev.path)
        elif ev.kind == "rescan":
            self.rescan([ev.directory], "rescan")
        elif ev.kind == "gone":
            self.tracker.forget(ev.directory)
            self.scheduler.discard_under(ev.directory)
            self.debouncer.discard_under(ev.directory)
            if ev.directory.parent.is_dir() and root_of(ev.directory.parent, self.roots):
                self.debouncer.touch(ev.directory.parent)
        elif root_of(ev.directory, self.roots):
            self.debouncer.touch(ev.directory)

    def _schedule_loop(self) -> None:
        while True:
            due = self.debouncer.wait_due(timeout=0.5)
            if self.state in ("stopping", "stopped"):
                return
            if due:
                self.scheduler.enqueue(due, urgent=True)

    def rescan(self, roots: list[Path], phase: str = "rescan", *, urgent: bool = False) -> None:
        """Walk the roots (stat only) in a thread and queue a job for every directory."""
        with self._lock:
            self._rescans += 1
            if self.tracker.progress.phase is None:
                self.tracker.start_phase(phase, 0)
                self._phase_expected = {}
        threading.Thread(target=self._walk, args=(roots, urgent), name="rescan", daemon=True).start()

    def _walk(self, roots: list[Path], urgent: bool) -> None:
        try:
            dirs = [d for root in roots if root.is_dir() for d in walk_dirs(root, self.ignore)]
            self.indexer.call(
                lambda s: s.apply_pending(dirs)
            )  # notes left by a stopped agent or another tool
            self.tracker.add_to_phase(len(dirs))
            self.scheduler.enqueue(dirs, urgent=urgent)
        except OSError as err:
            log.error("rescan of %s failed: %s", ", ".join(map(str, roots)), err)
        finally:
            with self._lock:
                self._rescans -= 1

    def check_phase(self) -> None:
        """End a rescan phase once its jobs are done; then have the index checked against the sidecars."""
        with self._lock:
            if self.tracker.progress.phase is None or self._rescans or self.scheduler.busy():
                return
            expected, self._phase_expected = self._phase_expected, None
            failed_dirs = bool(self.tracker.progress.failed_dirs)
            self.tracker.end_phase()
        self.indexer.call(lambda s: s.reconcile(None if failed_dirs else expected))

    # -- directory jobs -------------------------------------------------------------------------------------
    def _job(self, directory: Path) -> DirResult:
        with self._lock:
            forced = directory in self._forced
            self._forced.discard(directory)
        return run_directory(self._job_context(forced), directory)

    def force_next(self, dirs: Iterable[Path]) -> None:
        """The next job of each of these directories re-processes its files even when unchanged."""
        with self._lock:
            self._forced.update(dirs)

    # -- index rebuild --------------------------------------------------------------------------------------
    def rebuild_index(self, stream: Stream) -> dict[str, object]:
        """Drop the collection and refill it from the sidecars (on the writer thread); searches wait it out."""
        self.rebuilding = True
        started = time.monotonic()
        try:
            fut = self.indexer.call(self._rebuild)
            while True:
                try:
                    result = fut.result(timeout=0.5)
                    break
                except FutureTimeout:
                    stream.send({"phase": "rebuilding", "elapsed_s": round(time.monotonic() - started, 1)})
        finally:
            self.rebuilding = False
        return {**result, "elapsed_s": round(time.monotonic() - started, 3)}

    def _rebuild(self, sync: IndexSync) -> dict[str, object]:
        sync.index.close()
        destroy_index(self.data_dir, self.config.identity)
        sync.index = open_index(self.data_dir, self.config.identity, self.config.index)
        self.search_service = self._search_over(sync.index)
        report = sync.reconcile(None)
        sync.index.flush()
        return {"chunks": sync.index.count(), "sources": report.repaired}

    def _job_done(self, directory: Path, result: DirResult | None, err: BaseException | None) -> None:
        if result is not None:
            self._record(result)
        elif isinstance(err, FileNotFoundError | NotADirectoryError):
            self.tracker.forget(directory)  # gone meanwhile: its parent's job records the deletion
            if root_of(directory.parent, self.roots) and directory.parent.is_dir():
                self.debouncer.touch(directory.parent)
        else:
            reason = str(err) if isinstance(err, RagdError | OSError) else f"internal error: {err!r}"
            log.error("job for %s failed: %s (retry in %.0f s)", directory, reason, DIR_RETRY_S)
            self.tracker.record_error(directory, reason)
            self.scheduler.retry_later(directory, time.monotonic() + DIR_RETRY_S)

    def _record(self, result: DirResult) -> None:
        self.tracker.record(result)
        with self._lock:
            if self._phase_expected is not None:
                self._phase_expected.update(result.indexable)
        if result.mushroom is not None:
            self.indexer.put_mushroom(result.mushroom)
        for sub in result.new_subdirs:
            self.scheduler.enqueue(list(walk_dirs(sub, self.ignore)), urgent=True)
        if result.new_subdirs:
            self.watcher.check_coverage()
        retry = _soonest_retry(result)
        if retry is not None:
            self.scheduler.retry_later(
                result.directory, time.monotonic() + max(0.0, retry - time.time()) + 0.5
            )

    # -- state ----------------------------------------------------------------------------------------------
    def is_idle(self) -> bool:
        if self.state == "starting":
            return False
        stats = self.embed.stats
        with self._lock:
            walking = self._rescans > 0 or self.tracker.progress.phase is not None
        return not (
            walking
            or self.debouncer.pending()
            or self.scheduler.busy()
            or stats.queued
            or stats.in_flight
            or self.indexer.busy()
        )

    def dirs_to_do(self) -> tuple[int, int]:
        """(directories waiting: debouncing or queued, directories whose job is running)."""
        pending, running = self.scheduler.counts()
        return pending + self.debouncer.pending(), running

    def settled(self, since: float) -> bool:
        """Idle, with no watch event for SETTLE_S, and at least SETTLE_S after `since` (a request's start)."""
        now = time.monotonic()
        return now - since >= SETTLE_S and now - self.last_event >= SETTLE_S and self.is_idle()

    def current_state(self) -> str:
        if self.state in ("starting", "stopping"):
            return self.state
        if self.scheduler.paused:
            return "paused"
        return "idle" if self.is_idle() else "indexing"

    def version(self) -> str:
        return __version__


def _soonest_retry(result: DirResult) -> float | None:
    from .sidecar import parse_stamp

    stamps = [parse_stamp(f.retry_at) for f in result.files if f.final_state == "FAILED" and f.retry_at]
    times = [t for t in stamps if t is not None]
    return min(times) if times else None


def _drop_subtree(sync: IndexSync, root: Path, keep: list[Path]) -> int:
    """Remove a root's sources from the index, except those under a nested root that stays."""
    if not keep:
        n = sync.index.delete_subtree(str(root))
    else:
        n = 0
        for path in sync.index.sources(str(root)):
            if not any(under(Path(path), k) for k in keep):
                n += sync.index.delete_source(path)
    sync.index.flush()
    return n
