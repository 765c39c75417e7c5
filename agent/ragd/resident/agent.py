"""The resident agent's parts wired together: watcher -> debouncer -> scheduler -> directory jobs -> indexer.

`Agent` owns the components: here they are wired together, started, and given the roots to watch and index. The
reactions between them are its bases, one module each: what a watch event or a rescan does (reactions.py), a
directory job and its outcome (jobrunner.py), the index rebuilt and the data directory made again (recovery.py),
the index served and filled (serving.py); and it is the `Resident` runtime the verbs (verbs/) work on (runtime.py).
The process around it (signals, main loop, sd_notify, shutdown order) is its `Host`, edges/lifecycle.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

from ..config import Config, data_dir
from ..errors import IndexUnavailable
from ..index import IndexBackend, open_or_rebuild
from ..index.keyword import lexicon, worker_cut
from ..index.query.search import SearchService
from ..index.write.sync import IndexSync
from ..index.write.verification import VerifyHooks
from ..index.write.verify import Verifier
from ..index.write.writer import Indexer
from ..paths import is_under, root_problem, under_any
from ..pipeline.embed import MODELS, LazyEmbedQueue
from ..pipeline.scan import Ignore
from ..pipeline.statcache import StatCache
from ..pipeline.workers import Parsers
from . import datadir, memory, rootstate
from .capabilities import Health
from .changes import ChangeLog
from .debounce import Debouncer
from .history import open_history
from .host import Host
from .jobs import FollowUps, Outcomes, job_context
from .links import LinkMap
from .reactions import Reactions
from .recovery import Recovery
from .scheduler import Scheduler, job_slots
from .serving import NOT_A_ROOT, drop_subtree, fill_root
from .tracker import Tracker
from .watcher import Watcher

# the agent's log: its lines keep the name they have always had (docs/operations.md quotes them)
log = logging.getLogger("ragd.resident.agent")

DIR_RETRY_S = 60.0  # a directory whose job failed as a whole is tried again after this


class Agent(Reactions, Recovery):
    """The components wired together, started, and given the roots to watch and index (the rest: its bases)."""

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
        # paths that share a file with others: an edit through one reaches them all; the hard-linked ones are
        # watched themselves, for an edit through a path in no root
        self.links = LinkMap(on_hard_links=self._hard_links_changed)
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
        # worker processes, started with the first file; they cut the chunks' keyword words for a local index
        self.parsers = Parsers(config.run, config.limits, config.parse, cut=worker_cut(config.index.backend))
        self.parsers.when_used(self.embed.prepare)  # a file to parse: maybe texts to embed soon
        self._ctx = job_context(config, self._submit, self.ignore, stat_cache=self.stat_cache,
                                parsers=self.parsers, identify=self.history.identify,
                                moved_from=self.history.left_from)  # fmt: skip
        self._outcomes = Outcomes(self.tracker, self.ignore, FollowUps(
            self.scheduler, roots=lambda: self.roots, hand_note=lambda note: self.indexer.put_mushroom(note),
            offer_note=lambda note: self.indexer.offer(note),
            look_again=lambda d: self.debouncer.touch(d), subdirs_found=lambda: self.watcher.check_coverage(),
            retry_dir_s=DIR_RETRY_S, changes=self.changes,
            out_of_search=lambda d: self.indexer.call(partial(drop_subtree, root=d, keep=[])),
            back_in_search=lambda d: self.indexer.call(partial(fill_root, root=d)),
            watch_below=lambda d: self.watcher.watch_below(d),
            prune_gone=lambda d: self.indexer.call(lambda s: s.prune_gone(d))))  # fmt: skip
        self._writer: Indexer | None = None  # once the index is open
        self._searcher: SearchService | None = None
        self.verifier = Verifier(config.identity, self.ignore, VerifyHooks(
            roots=lambda: list(self.roots), write=lambda fn: self.indexer.call(fn),
            busy=self.dir_busy, hand_note=lambda note: self.indexer.offer(note),
            held_out=self.tracker.held_out, look_at=self.debouncer.touch,
            check=lambda: self.check_data_dir(at_once=True), redo=self._redo))  # fmt: skip
        for holder in (self.tracker, self.stat_cache, self.verifier.cache):  # what is kept for every file
            memory.register(holder)
        # the data directory watched while the agent runs (datadir.py): what vanished is made again
        # roots.json as last read or written: written back if it vanishes
        self.kept_roots = rootstate.KeptRoots(self.data_dir)
        self.guard = datadir.DataDirGuard(
            self.data_dir, unsteady=lambda: bool(self._writer and self._writer.optimizing)
        )
        self.data_dir_rebuilt: dict[str, Any] | None = None  # the last time it was: when, what, done
        self._filled = True  # False while a fill of the index from the sidecars is owed (rootstate.Served)
        self._served_lock = threading.Lock()
        self._served_roots = []
        self._entering = set()
        self._recovery_lock = threading.Lock()
        self._rebuild_lock = threading.Lock()

    # -- start-up -------------------------------------------------------------------------------------------
    def open_index(self) -> bool:
        """Open the index (True: it had to be recreated, and must be refilled from the sidecars)."""
        index, rebuilt = open_or_rebuild(self.data_dir, self.config.identity, self.config.index)
        if rebuilt:
            log.warning("the index was unreadable and has been recreated; it is refilled from the sidecars")
        self._use_index(index)
        return rebuilt

    def _use_index(self, index: IndexBackend) -> None:
        sync = IndexSync(
            index, self.config.identity, self.roots, self.ignore, give_back=memory.trim_now_and_then
        )
        self._writer = Indexer(sync, more_coming=self._more_coming, edit_coming=self._edit_coming,
                               failing=self._index_vanished, compacted=memory.release)  # fmt: skip
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
        # the first Chinese question reads the parsed dictionary kept there, made now in the background (by a child
        # process: the parse's memory is not the agent's)
        cache = lexicon.use_cache(self.data_dir)
        threading.Thread(target=lexicon.prepare_apart, args=(cache,), name="lexicon", daemon=True).start()
        try:  # new (another data dir made the sidecars), rebuilt, or truly new
            empty = self.indexer.index.count() == 0
        except IndexUnavailable as err:  # a Milvus server down: verified, and repaired, once it is back
            log.warning("%s; the agent indexes into the sidecars meanwhile", err.message)
            empty = False
        # a new agent: its first file's texts and its first question need the model here (0.2-0.7 s)
        if empty:
            self.embed.warm()
        # the roots the index was last made to hold, and whether a fill of it from the sidecars was done
        served = rootstate.load_served(self.data_dir, str(self.indexer.index.path))
        wanted = self.resolve_roots()
        # a new or rebuilt index, one whose fill was cut short or that no record describes: filled from the sidecars
        # before the first verification, which would otherwise "repair" every source its sidecars already describe
        fill = rebuilt or empty or served is None or not served.filled
        if fill:  # recorded before anything is written to it: killed meanwhile, the next start fills it again
            held = [] if served is None else [*served.roots, *served.entering]
            self._filled = False
            self._save_served([*held, *(r for r in wanted if r not in held)])
        else:  # roots new to the index (or whose entering a kill cut short): recorded before their first write
            assert served is not None
            self._served_roots = list(served.roots)
            self._entering = set(served.entering)
            self._mark_entering([r for r in wanted if not under_any(r, served.roots)])
        self.indexer.start()
        threading.Thread(target=self._schedule_loop, name="debounce", daemon=True).start()
        self.set_roots(wanted, phase="initial")
        if served is not None:
            self._drop_gone([*served.roots, *served.entering])
        if fill:
            self.indexer.call(self._fill).add_done_callback(_fill_failed)
        elif served is not None:
            self._fill_new(served.roots)
            self._record_served()
        self.state = "indexing"

    def _hard_links_changed(self, added: set[Path], removed: set[Path]) -> None:
        self.watcher.files.unwatch(removed)
        self.watcher.files.watch(added)

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
                self._mark_entering(ok)  # before their fills and their jobs write anything
                for r in ok:
                    if not under_any(r, staying):
                        self.indexer.call(partial(fill_root, root=r))
                if added or removed:
                    self._record_served()
            if added or removed:
                # a symbolic link whose target entered or left the roots is indexed, or SKIPPED, from now on
                self.scheduler.enqueue(self.links.symlink_dirs(), urgent=True)
            self._remember_data_dir()
        if ok:
            self.rescan(ok, phase)
        return ok, removed

    def _add_root(self, root: Path) -> bool:
        reason = root_problem(root)
        if reason is not None:
            log.error("root %s %s; it is not watched (add it again once it can be)", root, reason)
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
        self.indexer.call(lambda s: drop_subtree(s, root, nested))
        self.changes.removed(root, keep=nested, detail=NOT_A_ROOT)


def _fill_failed(fut: Future[Any]) -> None:
    err = fut.exception()
    if err is not None:  # the verification repairs what it left out; the next start fills the index again
        log.error("filling the index from the sidecars failed: %s", err)
