"""The running agent's parts as the verbs see them, and its read side: `AgentRuntime`.

Its attributes are the components `Agent` (agent.py) wires together, declared here so that each part of the agent
(serving.py, recovery.py, jobrunner.py, reactions.py) can use them; its methods are what the `Resident` runtime
(verbs/runtime.py) reads: the agent's state, what is left to do (in part of the roots too), whether it has settled,
and the one readiness rule of every verb that reads or writes the index.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from ragctl import protocol as p

from .. import __version__
from ..config import Config
from ..errors import RagdError
from ..index import IndexBackend
from ..index.keyword import lexicon
from ..index.query.search import SearchService
from ..index.write.sync import IndexSync
from ..index.write.verify import Verifier
from ..index.write.writer import Indexer
from ..paths import Within
from ..pipeline.dirjob import JobContext
from ..pipeline.embed import LazyEmbedQueue
from ..pipeline.scan import Ignore
from ..pipeline.statcache import StatCache
from ..pipeline.workers import Parsers
from . import datadir, rootstate
from .capabilities import Health
from .changes import ChangeLog
from .debounce import Debouncer
from .history import History
from .host import Host
from .jobs import Outcomes
from .links import LinkMap
from .scheduler import Scheduler
from .tracker import Tracker
from .watcher import Watcher

T = TypeVar("T")

SETTLE_S = 0.6  # `wait` needs this long without new events (watchdog holds a lone move-out for 0.5 s)


class AgentRuntime:
    """The parts of a running agent (declared here, wired in agent.py) and what the verbs read of them: its state,
    how much is left to do, the one readiness rule, the index's reader, writer and searcher."""

    config: Config
    host: Host
    cli_roots: list[Path]
    data_dir: Path
    started: float
    state: str
    roots: list[Path]
    missing_roots: dict[Path, str]
    tracker: Tracker
    health: Health
    history: History
    changes: ChangeLog
    ignore: Ignore
    debouncer: Debouncer
    embed: LazyEmbedQueue
    scheduler: Scheduler
    watcher: Watcher
    links: LinkMap
    last_event: float
    rebuilding: bool
    _rescans: int
    _walking: list[Path]
    _event_in: dict[Path, float]
    _lock: threading.RLock
    _roots_lock: threading.Lock
    _forced: set[Path]
    _gone: dict[Path, float]
    _job_dir: threading.local
    _waiting: dict[Path, int]
    stat_cache: StatCache
    parsers: Parsers
    _ctx: JobContext
    _outcomes: Outcomes
    _writer: Indexer | None
    _searcher: SearchService | None
    verifier: Verifier
    kept_roots: rootstate.KeptRoots
    guard: datadir.DataDirGuard
    data_dir_rebuilt: dict[str, Any] | None
    _filled: bool
    _served_lock: threading.Lock
    _served_roots: list[Path]  # as last recorded in served-roots.json
    _entering: set[Path]  # roots whose sources the index may hold in part (rootstate.Served.entering)
    _recovery_lock: threading.Lock
    _rebuild_lock: threading.Lock  # one rebuild asked for (`ragctl index --rebuild`) at a time

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
            or self.watcher.pending()
            or lexicon.PREPARING.is_set()  # (a first start's dictionary: English questions meanwhile go without it)
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
        """Idle, with no watch event for SETTLE_S, and at least SETTLE_S after `since` (a request's start); the MCP
        endpoint up if it is being started (it starts beside the main loop after READY): what `wait` returns on is
        there to use."""
        now = time.monotonic()
        return (now - since >= SETTLE_S and now - self.last_event >= SETTLE_S and self.is_idle()
                and self.host.mcp_status().get("state") != "starting")  # fmt: skip

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


def _starting() -> RagdError:
    return RagdError("the agent is starting (opening the index)", "try again in a moment", code=p.UNAVAILABLE)
