"""`ragd run`: the agent's process lifecycle — capture signals, start up, main loop, graceful shutdown.

Each step is callable on its own (`install_signals`, `startup`, `main_loop`, `shutdown`; `run` is the four in
order), so a test can start the whole agent in-process: `startup()`, `main_loop()` on a thread, `stop_requested.set()`,
`shutdown()`. The Lifecycle is the agent's `Host` (resident/host.py).

Start-up order (systemd `Type=notify`): take the instance lock, bind the control socket and start serving it
(so `ragctl status` answers from the first moment), open the index, start the threads and the initial reconcile,
then READY=1. The first full indexing runs after READY, with its progress in STATUS= and `ragctl status`.

Shutdown (SIGTERM, SIGINT): STOPPING=1, stop watching, let running directory jobs finish for a short grace
period, then close the embedder (files still waiting for vectors stay CHUNKED and are redone at the next start),
let the index writer apply what it holds, close the index, remove the socket and the discovery record. A second
SIGINT exits at once.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import signal
import threading
import time
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from ragctl.protocol import socket_path

from .. import heap
from ..config import Config, load_config
from ..errors import ConfigError, RagdError
from ..mcp.server import McpService
from ..resident import memory
from ..resident.admission import Admission
from ..resident.agent import Agent
from ..resident.instance import (
    InstanceLock,
    bind_control_socket,
    remove_discovery_record,
    write_discovery_record,
)
from ..resident.notify import Notifier, progress_text
from .control import ControlServer
from .control_verbs import control_handlers
from .http import HttpEdge
from .mcp_verbs import mcp_verbs

log = logging.getLogger(__name__)

TICK_S = 0.25
# the health of every capability, systemd's status line, the watcher's threads, the progress line, the rest: each
# tick, they were ~7 % of the agent's interpreter time while a big folder was indexed (docs/benchmarks.md)
LOOK_S = 1.0
STOP_GRACE_S = (
    3.0  # running jobs may finish within this; after it, unfinished files are left for the next start
)
COVERAGE_CHECK_S = 30.0
MODEL_FIRST_S = 3.0  # at most this long, the MCP stack's import waits for a new agent's model to load
RECHECK_S = 10.0  # the folders a verification left busy are checked again this long after, while idle;
RECHECK_MAX_S = 600.0  # the wait doubles up to this while some stay busy (a note the index cannot take yet)
PROGRESS_EVERY_S = (
    10.0  # a progress line in the log this often while indexing (the log may be all a user sees)
)
# The index unused this long while the agent is idle: the pages of its mapped files and of the question model's
# weights that searches read are given back (mapped.py; they stay in the page cache). A keyword search of 50 hits in
# a 30,000-chunk index left ~43 MiB of them in the agent's RSS (the kernel maps 64 KiB around each page read), a
# dense one every vector of the flat index, until `run.rest_after` (120 s); the next search reads them through the
# page cache again (a hybrid search there: 13 -> 17 ms). docs/benchmarks/history.md
PAGES_UNUSED_S = 10.0


class Lifecycle:
    def __init__(self, config: Config, config_path: Path | None, cli_roots: list[Path]) -> None:
        self.config = config
        self.config_path = config_path
        self.agent = Agent(config, cli_roots, host=self)
        self.mcp = McpService(self.agent)
        self.http = HttpEdge(self.agent, self.mcp)  # MCP and the web page on one loopback port
        self.notifier = Notifier()
        self.stop_requested = threading.Event()
        self.reload_requested = threading.Event()
        self._interrupts = 0
        self._stop_signalled = False  # set by SIGTERM / SIGINT's handler (see _on_stop)
        self._reload_signalled = False  # set by SIGHUP's handler
        self.socket_path = socket_path()
        self.server: ControlServer | None = None
        self.reload_error: str | None = None
        self.main_loop_error: str | None = None
        self._lock: InstanceLock | None = None
        self._busy_since: float | None = time.monotonic()  # indexing since (the start-up's indexing first)
        self._said_at = time.monotonic()
        self._idle_at = 0.0  # when the last idle line was said
        self._pages_back_at = 0.0  # when the pages searches read were last given back (_pages_unused)
        self._record: Path | None = None  # the discovery record naming our socket

    # -- signals --------------------------------------------------------------------------------------------
    def install_signals(self) -> None:
        # systemd's watchdog kills a hung agent with SIGABRT (WatchdogSignal=): every thread's stack goes to the
        # log first, so that the journal says where it hung (as it does for a crash in a native library)
        faulthandler.enable(all_threads=True)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    # The handlers set plain attributes, which the main loop reads at its next tick: a handler that set an Event
    # took the Event's lock, and the next signal, run nested inside it (Python runs a handler between any two
    # bytecodes of the main thread), waited for that lock for ever, or nested again until a RecursionError (two
    # quick SIGTERMs left an agent that never stopped; a burst of SIGHUP ended one).
    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT:
            self._interrupts += 1
            if self._interrupts > 1:
                os.write(2, b"ragd: second interrupt, exiting now\n")
                os._exit(130)
        self._stop_signalled = True

    def _on_hup(self, _signum: int, _frame: FrameType | None) -> None:
        self._reload_signalled = True

    # -- the agent as a Host (resident/host.py) ------------------------------------------------------------
    def stopping(self) -> bool:
        return self._stop_signalled or self.stop_requested.is_set()

    def mcp_status(self) -> dict[str, Any]:
        return self.http.status()

    def relock(self) -> bool:
        return self._lock.renew() if self._lock is not None else True

    # -- run ------------------------------------------------------------------------------------------------
    def run(self) -> int:
        memory.limit_arenas()  # before the first thread
        self.install_signals()
        try:
            self.startup()
            self.main_loop()
        finally:
            self.shutdown()
        return 0

    def startup(self) -> None:
        """Instance lock, control socket served, index open, threads and the initial reconcile running, READY=1."""
        admission = Admission.from_config(
            self.config.access
        )  # ConfigError (an unknown group): nothing started
        lock = InstanceLock(self.agent.data_dir)
        lock.acquire()  # IndexBusy (another agent holds this data dir): nothing started, nothing to stop
        self._lock = lock
        sock = bind_control_socket(self.socket_path, admission, lock.path)
        handlers = control_handlers(self.agent, mcp_verbs(self.mcp))
        self.server = ControlServer(sock, handlers, admission.caller)
        self.server.start()
        self._record = write_discovery_record(self.socket_path)
        heap.settle()  # the imports done, before the first job
        self.agent.start()
        self.notifier.ready(self.status_text())
        log.info("ragd %s ready: control socket %s, %d root(s)", self.agent.version(),
                 self.socket_path, len(self.agent.roots))  # fmt: skip
        # after READY, beside the main loop (importing the MCP stack takes ~0.7 s), once a new agent's copy of the
        # model is loaded (or MODEL_FIRST_S has passed): both in this process, the import slowed the load that the
        # first note's vectors wait for; then the port, on its loop
        first = partial(self.agent.embed.wait_warm, MODEL_FIRST_S)
        self.mcp.start_in_background(then=self.http.start, first=first)

    def main_loop(self) -> None:
        interval = self.config.watch.reconcile_interval
        next_rescan = time.monotonic() + interval if interval else None
        next_coverage = time.monotonic() + COVERAGE_CHECK_S
        verify_every = self.config.watch.verify_interval
        next_verify = time.monotonic() + verify_every if verify_every else None
        next_recheck, recheck_wait = time.monotonic(), RECHECK_S
        next_look = time.monotonic()
        while not (self._stop_signalled or self.stop_requested.wait(TICK_S)):
            now = time.monotonic()
            try:
                if self._reload_signalled or self.reload_requested.is_set():
                    self._reload_signalled = False  # (before the reload: a SIGHUP during it asks for another)
                    self.reload_requested.clear()
                    self._reload_logged()
                self.agent.check_data_dir()  # deleted or replaced: made again, rebuilt (resident/datadir.py)
                self.agent.scheduler.tick(now)
                self.agent.check_phase()
                if next_rescan is not None and now >= next_rescan:
                    self.agent.rescan(list(self.agent.roots))
                    next_rescan = now + interval
                if next_verify is not None and now >= next_verify and self.agent.current_state() == "idle":
                    self.agent.verifier.request("periodic")
                    next_verify = now + verify_every
                elif now >= next_recheck and self._recheck_due():
                    self.agent.verifier.request("recheck")
                    next_recheck, recheck_wait = now + recheck_wait, min(2 * recheck_wait, RECHECK_MAX_S)
                if not self.agent.verifier.skipped:
                    recheck_wait = RECHECK_S
                if now >= next_look:  # what is looked at, not waited on: once a second, not at every tick
                    next_look = now + LOOK_S
                    self._rest()
                    self._pages_unused()
                    self._compact_if_due()
                    self.agent.watcher.check_alive()  # watchdog's threads: one that died is replaced (watcher.py)
                    self.agent.health.check(self.agent)  # a change is logged once (resident/capabilities.py)
                    self.notifier.status(self.status_text())
                    self._say_progress(now)
                if now >= next_coverage:
                    self.agent.watcher.check_coverage()
                    next_coverage = now + COVERAGE_CHECK_S
                self.main_loop_error = None
            except Exception as err:  # the main loop's boundary: log, report unhealthy, keep going
                log.exception("internal error in the main loop")
                self.main_loop_error = f"{type(err).__name__}: {err}"
            self.notifier.tick(healthy=self.healthy)  # asked only when a watchdog ping is due

    def _recheck_due(self) -> bool:
        """The last verification left folders where work was under way, and the agent is now idle: they are
        checked again on their own (not left to the next periodic pass, `watch.verify_interval`)."""
        verifier = self.agent.verifier
        return bool(verifier.skipped) and not verifier.running and self.agent.current_state() == "idle"

    def _say_progress(self, now: float) -> None:
        """What the agent is doing, in its log: a line every PROGRESS_EVERY_S while it indexes, and one when it
        becomes idle ("idle: 385 files, 2423 chunks in 61 s"), for a user whose only window is the log. A change
        indexed between two ticks of the loop counts too (a watch event since the last idle line)."""
        state = self.agent.current_state()
        changed = self.agent.last_event > self._idle_at
        if self._busy_since is None and (state == "indexing" or changed):
            self._busy_since = self._said_at = min(now, self.agent.last_event) if changed else now
        if state == "indexing" and now - self._said_at >= PROGRESS_EVERY_S:
            log.info("%s", self.status_text())
            self._said_at = now
        elif state == "idle" and self._busy_since is not None:
            known, failed = self.agent.tracker.totals()
            writer = self.agent.writer
            chunks = writer.chunks if writer is not None else 0
            log.info("idle: %d file%s, %d chunk%s in %.0f s%s", known, "" if known == 1 else "s", chunks,
                     "" if chunks == 1 else "s", now - self._busy_since,
                     f", {failed} failed (see `ragctl status`)" if failed else "")  # fmt: skip
            self._busy_since = None
            self._idle_at = now
            self._give_back_pages()
            memory.release()  # what indexing freed goes back to the system

    def _pages_unused(self) -> None:
        """Once the index has gone unused for PAGES_UNUSED_S while the agent is idle: the pages that searches read
        since the last give-back (of the index's mapped files and of the question model's weights) are given back.
        Once per use: an index not used since is left alone."""
        writer = self.agent.writer
        if writer is None or writer.index.resting or self.agent.current_state() != "idle":
            return
        now = time.monotonic()
        unused = writer.index.idle_s()
        if unused < PAGES_UNUSED_S or now - unused <= self._pages_back_at:
            return
        self._give_back_pages()

    def _give_back_pages(self) -> None:
        """The pages read in the question model's weights and the index's mapped files taken out of the agent's
        RSS (they stay in the page cache; mapped.py): when the agent becomes idle, and after searches
        (_pages_unused)."""
        self._pages_back_at = time.monotonic()
        self.agent.embed.unmap_pages()
        writer = self.agent.writer
        if writer is not None:
            with contextlib.suppress(RagdError):  # closed meanwhile (a stop): nothing mapped
                writer.index.give_back_pages()

    def _compact_if_due(self) -> None:
        """While idle: the per-file records copied once a compaction skipped at the last idle moment is due
        (memory.compact_due), and the memory they leave given back."""
        if memory.compact_due() and self.agent.current_state() == "idle":
            memory.release()

    def _rest(self) -> None:
        """Once nothing has used the index for `run.rest_after` seconds: close it and drop the question model (the
        next search opens and loads them again), and give their memory back."""
        after = self.config.run.rest_after
        writer = self.agent.writer
        if not after or writer is None or writer.index.resting or writer.index.idle_s() < after:
            return
        if self.agent.current_state() == "idle" and writer.index.rest():
            model = self.agent.embed.rest()
            memory.release()
            log.info("resting after %.0f s unused: index closed%s, memory given back (the next search opens it)",
                     after, ", question model dropped" if model else "")  # fmt: skip

    def _reload_logged(self) -> None:
        with contextlib.suppress(ConfigError):  # logged by reload(); the running configuration stays
            self.reload()

    def healthy(self) -> bool:
        names = {t.name for t in threading.enumerate() if t.is_alive()}
        return self.main_loop_error is None and {"indexer", "control", "debounce", "watch-events"} <= names

    def status_text(self) -> str:
        """systemd's STATUS= line: "indexing: 120/3400 directories, 1180 files, 2 failed", "idle: 3400 files"."""
        agent = self.agent
        known, failed = agent.tracker.totals()
        prog = agent.tracker.progress
        state = agent.current_state()
        if prog.phase:
            verb = {"initial": "indexing", "sync": "syncing"}.get(prog.phase, "rescanning")
            text = f"{verb}: {prog.dirs_done}/{prog.dirs_total} directories, {prog.files_done} files"
            text += f", {failed} failed" if failed else ""
        elif state == "indexing":
            pending, running = agent.dirs_to_do()
            text = f"indexing: {pending + running} directories to do, {known} files"
            text += f", {failed} failed" if failed else ""
        elif state == "idle":
            text = progress_text(known, known, failed, state)
        else:  # starting, paused, stopping
            text = f"{state}: {known} files" + (f", {failed} failed" if failed else "")
        problems = self.agent.health.summary()
        text = f"{text}; {problems}" if problems else text
        return f"{text}; {self.reload_error}" if self.reload_error else text

    # -- reload ---------------------------------------------------------------------------------------------
    def reload(self) -> dict[str, list[str]]:
        """Re-read the config (SIGHUP, `ragctl reload`): roots are added and removed at once."""
        self.notifier.reloading()
        try:
            new = load_config(self.config_path)
        except ConfigError as err:
            first, *keys = err.message.splitlines()
            self.reload_error = "reload failed: " + "; ".join([first.rstrip(":"), *(k.strip() for k in keys)])
            log.error("reload failed, keeping the running configuration: %s", err.message)
            self.notifier.reloaded()
            raise
        self.reload_error = None
        for section in (
            "embedding",
            "splitter",
            "index",
            "ignore",
            "limits",
            "run",
            "data_dir",
            "mcp",
            "access",
        ):
            if getattr(new, section) != getattr(self.config, section):
                log.warning("the [%s] settings changed; they take effect when the agent restarts", section)
        self.config = self.config.model_copy(update={"roots": new.roots, "watch": new.watch})
        self.agent.config = self.agent.config.model_copy(update={"roots": new.roots, "watch": new.watch})
        added, removed = self.agent.set_roots(self.agent.resolve_roots())
        log.info("configuration reloaded: %d root(s) added, %d removed", len(added), len(removed))
        self.notifier.reloaded()
        return {"added": [str(r) for r in added], "removed": [str(r) for r in removed]}

    # -- shutdown -------------------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Drain and stop whatever `startup` started (also after a start-up that failed half-way)."""
        if self._lock is None:
            return  # nothing was started
        try:
            if self.server is not None:
                self._stop_agent()
        finally:
            if self._record is not None:
                remove_discovery_record(self._record, self.socket_path)
                self._record = None
            self._lock.release()
            self._lock = None

    def _stop_agent(self) -> None:
        agent = self.agent
        self.stop_requested.set()
        log.info("stopping")
        agent.state = "stopping"
        self.notifier.stopping("stopping")
        self.http.stop()
        self.mcp.stop()
        agent.watcher.stop()
        agent.debouncer.close()
        finished = agent.scheduler.wait_running(STOP_GRACE_S)
        agent.parsers.close()  # files still being parsed are left as they were, redone at the next start
        agent.embed.close()  # whatever still waits for vectors is left CHUNKED, redone at the next start
        if not finished:
            log.info("left unfinished files for the next start")
        agent.scheduler.close(timeout=30.0)
        agent.keep_added_roots()  # the data directory deleted just before the stop: the one copy is in memory
        agent.stat_cache.save()
        writer = agent.writer
        if writer is not None:
            writer.stop()
            _close_index(writer.index)
        agent.state = "stopped"
        if self.server is not None:
            self.server.close()
        agent.history.close()
        try:
            if self.socket_path.is_socket():
                self.socket_path.unlink()
        except OSError:
            pass
        log.info("stopped")


def _close_index(index: Any) -> None:
    """Close the index at a stop. One whose files were deleted under it (the data directory lost just before the
    stop, too late for the agent to notice) cannot write its last state: nothing is lost, the sidecars hold it all,
    and the next start finds no index and fills one from them; the stop goes on (it exited 1)."""
    try:
        index.close()
    except RagdError as err:
        if Path(index.path).exists():
            raise
        log.warning("the index at %s was deleted while the agent ran: the next start fills it again from the "
                    "sidecars (%s)", index.path, err)  # fmt: skip


def run_agent(config: Config, config_path: Path | None, cli_roots: list[Path]) -> int:
    return Lifecycle(config, config_path, cli_roots).run()
