"""The resident agent's parts wired together: watcher -> debouncer -> scheduler -> directory jobs -> indexer.

`Agent` owns the components and the reactions between them (what a watch event, a finished job, a rescan or a
reload does), and is the `Resident` runtime the verbs (verbs/) work on. The process around it (signals, main loop,
sd_notify, shutdown order) is its `Host`, edges/lifecycle.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ragctl import protocol as p

from .. import __version__
from ..config import Config, data_dir
from ..errors import IndexUnavailable, RagdError
from ..index import IndexBackend, destroy_index, open_index, open_or_rebuild
from ..index.keyword import keywords, lexicon
from ..index.query.search import SearchService
from ..index.write.sync import IndexSync
from ..index.write.verification import VerifyHooks
from ..index.write.verify import Verifier
from ..index.write.writer import EDITING_S, Indexer
from ..paths import Within, is_under, outermost, root_of, under_any
from ..pipeline.dirjob import DirResult, JobContext, run_directory
from ..pipeline.embed import MODELS, LazyEmbedQueue
from ..pipeline.mushroom import writer_pid
from ..pipeline.scan import Ignore, walk_dirs
from ..pipeline.sidecar import RAG_DIR, utc_stamp
from ..pipeline.statcache import StatCache
from ..pipeline.workers import Parsers
from . import datadir, rootstate
from .capabilities import Health
from .changes import ChangeLog
from .debounce import Debouncer
from .history import open_history
from .host import Host
from .jobs import FollowUps, Outcomes, job_context, real_roots
from .links import LinkMap
from .scheduler import Scheduler, job_slots
from .tracker import Tracker
from .watcher import Watcher, WatchEvent

log = logging.getLogger(__name__)
T = TypeVar("T")

DIR_RETRY_S = 60.0  # a directory whose job failed as a whole is tried again after this
SETTLE_S = 0.6  # `wait` needs this long without new events (watchdog holds a lone move-out for 0.5 s)
GONE_KEPT_S = 600.0  # how long a folder that went is remembered, for one of its name made at once
NOT_A_ROOT = "its root was removed"  # the detail of the "deleted" event of each of a removed root's documents


class Agent:
    def __init__(self, config: Config, cli_roots: Iterable[Path], host: Host) -> None:
        self.config = config
        self.host = host
        self.cli_roots = [Path(r).expanduser().resolve() for r in cli_roots]
        self.data_dir = data_dir(config)
        self.started = time.time()
        self.state = "starting"
        self.roots: list[Path] = []
        self.missing_roots: dict[Path, str] = {}
        self.tracker = Tracker()
        self.health = Health()
        self.history = open_history(config, self.data_dir, open_file=False)  # its file: in start()
        self.changes = ChangeLog(history=self.history)
        self.ignore = Ignore(config.ignore)
        self.debouncer = Debouncer(config.watch.quiet, config.watch.ceiling)
        self.embed = LazyEmbedQueue(config.embedding, run=config.run, models=self.data_dir / MODELS)
        self.scheduler = Scheduler(
            self._job, self._job_done, *job_slots(config.run.jobs, config.embedding.provider)
        )
        self.embed.when_used(self.scheduler.widen)
        self.watcher = Watcher(self.ignore, self.on_watch_event)
        self.links = LinkMap()  # paths that share a file with others: an edit through one reaches them all
        self.last_event = 0.0
        self.rebuilding = False
        self._rescans = 0  # rescan threads still walking
        self._walking: list[Path] = []  # the roots they walk (`wait PATH`)
        self._event_in: dict[Path, float] = {}  # root -> when a watch event was last seen in it (`wait PATH`)
        self._lock = threading.RLock()
        # held while the roots change and while a job's outcome is taken in (taken before _lock, never after): the
        # outcome of a job whose root was removed meanwhile is dropped, never recorded after the root was forgotten
        self._roots_lock = threading.Lock()
        self._forced: set[Path] = set()
        self._gone: dict[Path, float] = {}  # folders that went, and when (`_made_anew`)
        self._job_dir = threading.local()  # the directory whose job runs on this thread
        self._waiting: dict[Path, int] = {}  # directory -> its files waiting for vectors now
        self.stat_cache = StatCache.load(self.data_dir)  # saved after each rescan and at the stop
        self.parsers = Parsers(
            config.run, config.limits, config.parse
        )  # worker processes, started with the first file
        self._ctx = job_context(config, self._submit, self.ignore, stat_cache=self.stat_cache,
                                parsers=self.parsers, identify=self.history.identify)  # fmt: skip
        self._outcomes = Outcomes(self.tracker, self.ignore, FollowUps(
            self.scheduler, roots=lambda: self.roots, hand_note=lambda note: self.indexer.put_mushroom(note),
            offer_note=lambda note: self.indexer.offer(note),
            look_again=lambda d: self.debouncer.touch(d), subdirs_found=lambda: self.watcher.check_coverage(),
            retry_dir_s=DIR_RETRY_S, changes=self.changes,
            out_of_search=lambda d: self.indexer.call(partial(_drop_subtree, root=d, keep=[])),
            back_in_search=lambda d: self.indexer.call(partial(_fill_root, root=d))))  # fmt: skip
        self._writer: Indexer | None = None  # once the index is open
        self._searcher: SearchService | None = None
        self.verifier = Verifier(config.identity, self.ignore, VerifyHooks(
            roots=lambda: list(self.roots), write=lambda fn: self.indexer.call(fn),
            busy=self.dir_busy, hand_note=lambda note: self.indexer.offer(note),
            held_out=self.tracker.held_out, look_at=self.debouncer.touch,
            check=lambda: self.check_data_dir(at_once=True), redo=self._redo))  # fmt: skip
        # the data directory watched while the agent runs (datadir.py): what vanished is made again
        # roots.json as last read or written: written back if it vanishes
        self.kept_roots = rootstate.KeptRoots(self.data_dir)
        self.guard = datadir.DataDirGuard(
            self.data_dir, unsteady=lambda: bool(self._writer and self._writer.optimizing)
        )
        self.data_dir_rebuilt: dict[str, Any] | None = None  # the last time it was: when, what, done
        self._filled = True  # False while a fill of the index from the sidecars is owed (rootstate.Served)
        self._recovery_lock = threading.Lock()

    def _job_context(self, force: bool) -> JobContext:
        return replace(self._ctx, force=force, roots=real_roots(self.roots))

    # -- start-up -------------------------------------------------------------------------------------------
    def open_index(self) -> bool:
        """Open the index (True: it had to be recreated, and must be refilled from the sidecars)."""
        index, rebuilt = open_or_rebuild(self.data_dir, self.config.identity, self.config.index)
        if rebuilt:
            log.warning("the index was unreadable and has been recreated; it is refilled from the sidecars")
        self._use_index(index)
        return rebuilt

    def _use_index(self, index: IndexBackend) -> None:
        sync = IndexSync(index, self.config.identity, self.roots, self.ignore)
        self._writer = Indexer(sync, more_coming=self._more_coming, edit_coming=self._edit_coming,
                               failing=self._index_vanished)  # fmt: skip
        self._searcher = self._search_over(index)

    def _more_coming(self) -> bool:
        """Changes on their way to the index writer: directories debouncing, queued or in a job (unless paused),
        texts waiting for vectors."""
        stats = self.embed.stats
        if stats.queued or stats.in_flight:
            return True
        return not self.scheduler.paused and bool(self.debouncer.pending() or self.scheduler.busy())

    def _edit_coming(self) -> bool:
        """A change seen in a folder is on its way to the index writer (debouncing, or its express job)."""
        return bool(self.debouncer.pending()) or self.scheduler.express_busy()

    def _search_over(self, index: IndexBackend) -> SearchService:
        return SearchService(index, self._embed_query, self.roots)

    def _embed_query(self, text: str) -> np.ndarray:
        return self.embed.query(text)

    def resolve_roots(self) -> list[Path]:
        return self.root_overlay().apply([*self.config.roots, *self.cli_roots])

    def root_overlay(self) -> rootstate.RootOverlay:
        """The roots added and removed with ragctl: roots.json, or, while it has vanished (with the data directory),
        what the agent last read or wrote of it (`check_data_dir` writes it back)."""
        return self.kept_roots.current()

    def change_root_overlay(self, edit: Callable[[rootstate.RootOverlay], None]) -> None:
        """`ragctl roots add|remove`: roots.json changed by `edit`, as one step (resident/rootstate.KeptRoots)."""
        self.kept_roots.change(edit)

    def start(self) -> None:
        """Index open, threads running, every root watched and its initial reconcile under way."""
        self.roots = []
        self.history.reopen()  # its file, now that the data dir is ours (the instance lock)
        rebuilt = self.open_index()
        # the first Chinese question reads the parsed dictionary kept there, made now in the background
        cache = lexicon.use_cache(self.data_dir)
        threading.Thread(target=lexicon.prepare, args=(cache,), name="lexicon", daemon=True).start()
        try:  # new (another data dir made the sidecars), rebuilt, or truly new
            empty = self.indexer.index.count() == 0
        except IndexUnavailable as err:  # a Milvus server down: verified, and repaired, once it is back
            log.warning("%s; the agent indexes into the sidecars meanwhile", err.message)
            empty = False
        # the roots the index was last made to hold, and whether a fill of it from the sidecars was done
        served = rootstate.load_served(self.data_dir, str(self.indexer.index.path))
        wanted = self.resolve_roots()
        # a new or rebuilt index, one whose fill was cut short or that no record describes: filled from the sidecars
        # before the first verification, which would otherwise "repair" every source its sidecars already describe
        fill = rebuilt or empty or served is None or not served.filled
        if fill:  # recorded before anything is written to it: killed meanwhile, the next start fills it again
            held = [] if served is None else served.roots
            self._filled = False
            self._save_served([*held, *(r for r in wanted if r not in held)])
        self.indexer.start()
        threading.Thread(target=self._schedule_loop, name="debounce", daemon=True).start()
        self.set_roots(wanted, phase="initial")
        if served is not None:
            self._drop_gone(served.roots)
        if fill:
            self.indexer.call(self._fill).add_done_callback(_fill_failed)
        elif served is not None:
            self._fill_new(served.roots)
            self._record_served()
        self.state = "indexing"

    def _drop_gone(self, served: list[Path]) -> None:
        """At start-up, a root gone since the index last held it (the config file edited while the agent was
        stopped) leaves the index before the first verification, which would otherwise remove its sources one by
        one, each a warning."""
        for gone in outermost(served):
            if not under_any(gone, self.roots):
                log.info("%s is no longer a root; its entries leave the index", gone)
                nested = [r for r in self.roots if is_under(r, gone)]
                self.indexer.call(partial(_drop_subtree, root=gone, keep=nested))
                self.changes.removed(gone, keep=nested, detail=NOT_A_ROOT)

    def _fill_new(self, served: list[Path]) -> None:
        """At start-up, a root new since the index last held it is filled from the sidecars already there (a tree
        indexed before, or by the ragjson tool), before the first verification, which would otherwise repair its
        sources one by one and skip a folder busy at that moment until the next periodic pass."""
        for r in outermost(self.roots):
            if not under_any(r, served):
                self.indexer.call(partial(_fill_root, root=r))

    def _fill(self, sync: IndexSync) -> int:
        """(On the writer thread.) Fill the index from the sidecars of every root; only then are the roots recorded
        as served with the index filled (an agent killed before does the fill again at its next start)."""
        roots = list(sync.roots)
        report = sync.reconcile(None)
        if report.repaired:
            log.info("the index was filled from the sidecars already there: %d sources", report.repaired)
        self._filled = True
        self._save_served(roots)
        return report.repaired

    # -- roots ----------------------------------------------------------------------------------------------
    def set_roots(self, wanted: list[Path], phase: str = "rescan") -> tuple[list[Path], list[Path]]:
        """Watch and index `wanted`; stop watching and drop from the index the roots no longer wanted."""
        with self._roots_lock, self._lock:  # in this order: a job's outcome may start a rescan (_lock)
            current = list(self.roots)
            added = [r for r in wanted if r not in current]
            removed = [r for r in current if r not in wanted]
            staying = [r for r in current if r in wanted]
            # the removed ones leave first: a job of theirs that ends from now on is dropped (_job_done)
            self.roots[:] = staying
            for r in removed:
                self._drop_root(r, staying)
            ok = [r for r in added if self._add_root(r)]
            self.roots[:] = [r for r in wanted if r in current or r in ok]
            self.indexer.sync.roots = list(self.roots)
            self._searcher = self._search_over(self.indexer.index)
            if phase != "initial":  # (at start-up: start())
                for r in ok:
                    if not under_any(r, staying):
                        self.indexer.call(partial(_fill_root, root=r))
                if added or removed:
                    self._record_served()
            if added or removed:
                # a symbolic link whose target entered or left the roots is indexed, or SKIPPED, from now on
                self.scheduler.enqueue(self.links.symlink_dirs(), urgent=True)
            self._remember_data_dir()
        if ok:
            self.rescan(ok, phase)
        return ok, removed

    def _record_served(self) -> None:
        """Record the roots served now once the index has taken the writes queued before (their fills, their
        removals): on the writer thread, in order, so that a root is never recorded before its fill is done."""
        roots = list(self.roots)
        self.indexer.call(lambda _sync: self._save_served(roots))

    def _save_served(self, roots: list[Path]) -> None:
        try:
            rootstate.save_served(self.data_dir, str(self.indexer.index.path), roots, filled=self._filled)
        except OSError as err:  # the next start then fills the index from the sidecars
            log.warning("cannot record the roots served in %s: %s", self.data_dir, err)

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

    def _drop_root(self, root: Path, staying: list[Path]) -> None:
        """Stop watching `root`; what no staying root holds leaves the tracker, the queues and the index."""
        self.watcher.remove_root(root)
        outer = [r for r in staying if is_under(root, r)]
        if outer:
            log.info(
                "no longer watching %s on its own; its files stay indexed under the root %s", root, outer[0]
            )
            return
        log.info("no longer watching %s; its entries leave the index", root)
        nested = [r for r in staying if is_under(r, root)]
        self.debouncer.discard_under(root, keep=nested)
        self.scheduler.discard_under(root, keep=nested)
        self.tracker.forget(root, keep=nested)
        self.links.forget(root, keep=nested)
        self.indexer.call(lambda s: _drop_subtree(s, root, nested))
        self.changes.removed(root, keep=nested, detail=NOT_A_ROOT)

    # -- events ---------------------------------------------------------------------------------------------
    def on_watch_event(self, ev: WatchEvent) -> None:
        self.last_event = time.monotonic()
        if ev.kind == "mushroom":
            if ev.path is not None and writer_pid(ev.path.name) != os.getpid():
                self.indexer.put_mushroom(ev.path)
        elif ev.kind == "rescan":
            self.rescan([ev.directory], "rescan")
        elif ev.kind == "gone":
            self._note_gone(ev.directory)
            self.tracker.forget(ev.directory)
            self.links.forget(ev.directory)
            self.scheduler.discard_under(ev.directory)
            self.debouncer.discard_under(ev.directory)
            if ev.directory.parent.is_dir() and root_of(ev.directory.parent, self.roots):
                self.debouncer.touch(ev.directory.parent)
        elif ev.kind == "subtree":  # folder defaults changed: the files they label, here and below
            if root_of(ev.directory, self.roots):
                for d in walk_dirs(ev.directory, self.ignore):
                    self.debouncer.touch(d)
        elif root := root_of(ev.directory, self.roots):
            self._event_in[root] = self.last_event
            self.debouncer.touch(ev.directory)
            if ev.path is not None:
                self._touch_links(ev.path)
            self.parsers.keep_one_free(EDITING_S)  # for the edited files, during an initial index
            self.embed.warm()

    def _redo(self, directory: Path, names: list[str]) -> None:
        """The verification found these files changed though no event said so: their folder's job runs again."""
        for name in names:
            log.info("%s changed since its entry was written, unseen by the watcher; indexing it again",
                     directory / name)  # fmt: skip
        self.scheduler.enqueue([directory], urgent=True)

    def _touch_links(self, path: Path) -> None:
        """The folders of the other paths to the file that changed (hard links, symbolic links to it): inotify
        reported the write on one path only."""
        for other in self.links.others(path):
            if root_of(other.parent, self.roots):
                self.debouncer.touch(other.parent)

    def _schedule_loop(self) -> None:
        while True:
            due = self.debouncer.wait_due(timeout=0.5)
            if self.state in ("stopping", "stopped"):
                return
            if due:
                self.scheduler.enqueue(due, express=True)

    def rescan(self, roots: list[Path], phase: str = "rescan", *, urgent: bool = False) -> None:
        """Walk the roots (stat only) in a thread and queue a job for every directory."""
        with self._lock:
            self._rescans += 1
            self._walking.extend(roots)
            if self.tracker.progress.phase is None:
                self.tracker.start_phase(phase)
        threading.Thread(target=self._walk, args=(roots, urgent), name="rescan", daemon=True).start()

    def _walk(self, roots: list[Path], urgent: bool) -> None:
        try:
            dirs = [d for root in roots if root.is_dir() for d in walk_dirs(root, self.ignore)]
            self.indexer.call(
                lambda s: s.apply_pending(dirs)
            )  # notes left by a stopped agent or another tool
            self.tracker.add_to_phase(dirs)
            self.scheduler.enqueue(dirs, urgent=urgent)
        except OSError as err:
            log.error("rescan of %s failed: %s", ", ".join(map(str, roots)), err)
        finally:
            with self._lock:
                self._rescans -= 1
                for root in roots:
                    self._walking.remove(root)

    def run_dirs(self, dirs: list[Path], phase: str, *, force: bool = False) -> None:
        """Run these directories' jobs now, as a phase: when they are done, the index is verified. `force`: their
        files are re-processed even when unchanged."""
        if force:
            self.force_next(dirs)
        with self._lock:
            if self.tracker.progress.phase is None:
                self.tracker.start_phase(phase)
            self.tracker.add_to_phase(dirs)
        self.scheduler.enqueue(dirs, urgent=True)

    def check_phase(self) -> None:
        """End a rescan phase once its jobs are done; then have the index verified against every root."""
        with self._lock:
            if self.tracker.progress.phase is None or self._rescans or self.scheduler.busy():
                return
            self.tracker.end_phase()
            # requested before the phase's end can be seen: between the two, `wait` would find the agent idle
            # and return before its first verification (the cache's save takes a while on a big tree)
            self.verifier.request("rescan")
        self.stat_cache.save()

    def dir_busy(self, directory: Path) -> bool:
        """Work on `directory` is under way or due: its index entries may lag its sidecars for now."""
        return self.scheduler.has(directory) or self.debouncer.is_pending(directory)

    # -- directory jobs -------------------------------------------------------------------------------------
    def _job(self, directory: Path) -> DirResult:
        with self._lock:
            forced = directory in self._forced
            self._forced.discard(directory)
        self._job_dir.path = directory
        self._job_dir.express = express = self.scheduler.express(directory)
        ctx = replace(self._job_context(forced), express=express, dropped=partial(self._unwatched, directory))
        try:
            self._made_anew(directory)
            return run_directory(ctx, directory, partial(self._job_step, directory))
        finally:
            self._job_dir.path = None
            self._job_dir.express = False

    def _note_gone(self, directory: Path) -> None:
        """A watched folder went (deleted, or moved away): remembered a while, in case a folder of its name is made
        at once (`_made_anew`)."""
        now = time.monotonic()
        with self._lock:
            self._gone = {d: t for d, t in self._gone.items() if now - t < GONE_KEPT_S}
            self._gone[directory] = now

    def _made_anew(self, directory: Path) -> None:
        """A folder that went, and a new one made under its name with no pause between (`rm -r d; mkdir d`; a folder
        replaced by a file and the file by a folder again): the parent's listing shows a folder of that name before
        and after, so no job of the parent says the old one went. The new folder has no `.rag/` yet: the index keeps,
        under it, only what its sidecars hold now (the old folder's files leave search) before its first job."""
        with self._lock:
            gone = self._gone.pop(directory, None) is not None
        if gone and not (directory / RAG_DIR).exists():
            log.info("%s was made anew: the files of the folder it replaced leave the index", directory)
            self.indexer.call(lambda sync: sync.sync_subtree(directory)).result()

    def _submit(self, texts: Sequence[str]) -> Future[np.ndarray]:
        """The embed queue's submit, counting the files of each directory that wait for their vectors. The texts of
        a job started for a change seen in its directory go to the head of the queue."""
        fut = self.embed.submit(texts, priority=getattr(self._job_dir, "express", False))
        directory = getattr(self._job_dir, "path", None)
        if directory is not None:
            with self._lock:
                self._waiting[directory] = self._waiting.get(directory, 0) + 1
            fut.add_done_callback(lambda _f, d=directory: self._unwait(d))  # type: ignore[misc]
        return fut

    def _unwait(self, directory: Path) -> None:
        with self._lock:
            n = self._waiting.get(directory, 0) - 1
            if n > 0:
                self._waiting[directory] = n
            else:
                self._waiting.pop(directory, None)

    def waiting_files(self, top: Path | None = None) -> int:
        """Files (under `top`) whose texts wait for the embedder now."""
        with self._lock:
            return sum(n for d, n in self._waiting.items() if top is None or is_under(d, top))

    def force_next(self, dirs: Iterable[Path]) -> None:
        """The next job of each of these directories re-processes its files even when unchanged."""
        with self._lock:
            self._forced.update(dirs)

    # -- index rebuild --------------------------------------------------------------------------------------
    def rebuild_index(self, progress: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
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
                    progress({"phase": "rebuilding", "elapsed_s": round(time.monotonic() - started, 1)})
        finally:
            self.rebuilding = False
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
        sync.index.flush()
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

    def _unwatched(self, directory: Path) -> bool:
        """`directory` is under no root (any more: `roots remove` took its root away while its job ran)."""
        return not under_any(directory, list(self.roots))

    def _job_step(self, directory: Path, result: DirResult) -> None:
        """What a big folder's job has finished so far (dirjob.py): recorded and handed to the index writer now.
        Such a job is no edit, even when a change seen in its folder started it: from its first step its texts join
        the embed queue in turn, behind an edit's, and never go to the agent's own copy of the model (an edit's
        express lane), which embedded much of a folder of 30,000 notes one file at a time beside the workers
        (docs/benchmarks.md, the big folder's memory and throughput)."""
        self._job_dir.express = False
        with self._roots_lock:
            if not self._unwatched(directory):
                self._outcomes.step(result)

    def _job_done(self, directory: Path, result: DirResult | None, err: BaseException | None) -> None:
        with self._roots_lock:
            if self._unwatched(directory):  # its root was removed while it ran: its files were left alone
                log.debug("job for %s ended after its root was removed; its outcome is dropped", directory)
                return
            self._outcomes.done(directory, result, err)  # the boundary `run --once` shares (resident/jobs.py)
            if result is not None and result.directory.is_dir():
                self.links.record(directory, result.shared)

    # -- state ----------------------------------------------------------------------------------------------
    def is_idle(self) -> bool:
        if self.state == "starting":
            return False
        stats = self.embed.stats
        with self._lock:
            walking = self._rescans > 0 or self.tracker.progress.phase is not None
        return not (
            walking
            or self.guard.suspect
            or self.rebuilding
            or self.verifier.running
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

    def to_do_within(self, within: Within) -> dict[str, int]:
        """What is left to do in part of the roots: directories walked for, debouncing or queued (`pending_dirs`),
        in a job (`running_dirs`), files waiting for vectors (`queued_texts`), change notes not yet applied
        (`pending_mushrooms`)."""
        with self._lock:
            walking = sum(1 for r in self._walking if within.touches(r))
            texts = sum(n for d, n in self._waiting.items() if within.covers(d))
        pending = walking + sum(self.debouncer.pending_under(t) for t in within.trees)
        pending += sum(1 for d in within.folders if self.debouncer.is_pending(d))
        running = 0
        for tree in within.trees:
            queued, busy = self.scheduler.counts_under(tree)
            pending, running = pending + queued, running + busy
        pending += sum(1 for d in within.folders if self.scheduler.has(d))
        writer = self._writer
        notes = writer.pending_in(within.covers) if writer is not None else 0
        return {
            "pending_dirs": pending,
            "running_dirs": running,
            "queued_texts": texts,
            "pending_mushrooms": notes,
        }

    def settled_within(self, within: Within, since: float) -> bool:
        """`settled` for part of the roots: nothing left to do there (to_do_within), no watch event in its roots for
        SETTLE_S, and at least SETTLE_S after `since`; work elsewhere does not count."""
        now = time.monotonic()
        if now - since < SETTLE_S or self.state == "starting" or self.rebuilding:
            return False
        last = max((t for r, t in list(self._event_in.items()) if within.touches(r)), default=0.0)
        return now - last >= SETTLE_S and not any(self.to_do_within(within).values())

    def current_state(self) -> str:
        if self.state in ("starting", "stopping"):
            return self.state
        if self.scheduler.paused:
            return "paused"
        return "idle" if self.is_idle() else "indexing"

    def version(self) -> str:
        return __version__

    # -- what the verbs use (verbs/runtime.py) ---------------------------------------------------------------
    @property
    def writer(self) -> Indexer | None:
        return self._writer

    @property
    def indexer(self) -> Indexer:
        if self._writer is None:
            raise _starting()
        return self._writer

    def ready(self) -> None:
        """The one readiness rule of every verb that reads or writes the index."""
        if self.state == "starting" or self._writer is None or self._searcher is None:
            raise _starting()
        if self.state in ("stopping", "stopped"):
            raise RagdError("the agent is stopping", "start it again: systemctl --user start ragd",
                            code=p.UNAVAILABLE)  # fmt: skip
        if self.rebuilding:
            raise RagdError("the index is being rebuilt", "try again when `ragctl wait` returns",
                            code=p.UNAVAILABLE)  # fmt: skip

    def searcher(self) -> SearchService:
        self.ready()
        assert self._searcher is not None
        return self._searcher

    def reader(self) -> IndexBackend:
        return self.indexer.index

    def write(self, fn: Callable[[IndexSync], T]) -> Future[T]:
        return self.indexer.call(fn)

    def configured_roots(self) -> set[Path]:
        """Roots from the config file and the command line (the others were added by `ragctl roots add`)."""
        return {*self.config.roots, *self.cli_roots}

    def watch_mode(self, root: Path) -> str:
        return self.watcher.mode(root)


def _close_lost(index: IndexBackend) -> None:
    """Close an index whose files were deleted under it: what fails to be written on the way is gone anyway."""
    try:
        index.close()
    except (RagdError, OSError, ValueError) as err:
        log.debug("closing the vanished index at %s: %s", index.path, err)


def _starting() -> RagdError:
    return RagdError("the agent is starting (opening the index)", "try again in a moment", code=p.UNAVAILABLE)


def _fill_failed(fut: Future[Any]) -> None:
    err = fut.exception()
    if err is not None:  # the verification repairs what it left out; the next start fills the index again
        log.error("filling the index from the sidecars failed: %s", err)


def _fill_root(sync: IndexSync, root: Path) -> int:
    """A root added while the agent runs: what its sidecars already hold (a root removed and added again, a folder
    the ragjson tool indexed) is served at once, not left to the verification after its rescan, which found it
    missing and repaired it, or skipped a folder busy at that moment and left its files out of search until the
    next periodic check. Its directory jobs then change only what changed; the sources of a root nested in it are
    already right and stay as they are."""
    n = sync.sync_subtree(root)
    if n:
        log.info("%s: %d sources served from the sidecars already there", root, n)
    return n


def _drop_subtree(sync: IndexSync, root: Path, keep: list[Path]) -> int:
    """Remove a root's sources from the index, except those under a nested root that stays."""
    if not keep:
        n = sync.index.delete_subtree(str(root))
    else:
        n = 0
        for path in sync.index.sources(str(root)):
            if not under_any(Path(path), keep):
                n += sync.index.delete_source(path)
    sync.index.flush()
    return n
