"""A pool of worker processes for the pipeline's heavy stages (parse and split; the bundled model's embedding).

pebble's `ProcessPool` underneath: a task past its deadline has its worker killed and replaced, a worker that dies
fails only its task (`ProcessExpired`), and each worker is replaced after `MAX_TASKS` tasks. Around it:

- the pool starts with the first task and closes after `idle_s` seconds without one;
- its workers are forked from multiprocessing's fork server, a clean process of one thread (started as "spawn"
  starts a worker: a fork of the agent would copy its threads and locks) that has imported every pool's `preload`
  once: a worker costs a fork, not an interpreter's start and its imports (about 0.5 CPU-seconds each for the parse
  workers: under load, most of their CPU in a run of a few hundred text files). The server starts with the first
  pool and stops once the last pool's workers are gone (it holds the imported modules' memory);
- each worker's address space is capped at `memory_mib` MiB (RLIMIT_AS): a task that needs more raises
  MemoryError (or, when a C library aborts instead, dies);
- workers ignore SIGINT (Ctrl-C in a terminal reaches the whole process group): the agent stops them itself;
- each worker has a temp directory of its own, removed by the agent once the worker is gone, killed or not
  (tmpdirs.py);
- a task's future is ours, completed from the pool's: `close()` (which leaves some of the pool's futures
  unresolved) ends every task under way with CancelledError all the same;
- at most `workers` tasks are handed to the pool at a time; the others wait here, `first=True` ones (a file an edit
  changed) ahead of the rest, so a task that jumps the queue waits for one task per worker at most, not for every
  file the directory jobs handed out before it; and while someone edits (`keep_one_free`), the others get all
  workers but one, so that a `first` task waits for none.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import tmpdirs

log = logging.getLogger(__name__)

T = TypeVar("T")
START_METHOD = "forkserver"
# The fork server listens on an AF_UNIX socket in the agent's multiprocessing temp directory
# (`<TMPDIR>/ragd-mp-<pid>-XXXXXXXX/listener-XXXXXXXX`, tmpdirs.py), whose path the kernel takes up to 107 bytes:
# under a temp directory deeper than that allows, the server cannot start, and the workers are spawned instead
# (each a fresh interpreter, as before the server).
SOCKET_PATH_MAX = 107
FEW_WINDOW_S = 10.0  # the window of `Few`: a few files or texts while the workers are not running
MAX_TASKS = 500  # tasks per worker before it is replaced (bounds what a leaking library can hold)
# the workers' temp directories are swept after a task that failed (its worker may have been killed at the deadline
# or crashed, its clean-up not run) and after every SWEEP_EVERY tasks (a worker that died between tasks); a worker
# replaced after its MAX_TASKS removes its own as it exits. (Run after every task, the sweep listed the pool's
# directory and signalled each worker's pid for each of a big folder's files and embed requests.)
SWEEP_EVERY = MAX_TASKS


# a function and its arguments, run as a worker starts
Warm = tuple[Callable[..., object], tuple[object, ...]]

# The fork server's life (the module docstring): the modules it imports, and the pools whose workers it serves.
_SERVER_LOCK = threading.Lock()
_SERVER_PRELOAD: set[str] = set()  # every pool's `preload`, registered as the pool is made, before any starts
_SERVER_USERS = 0  # pools started whose workers are not all gone
_SERVED_POOLS: set[int] = set()  # (the ids of) the pebble pools whose workers the server forks


def _server_used() -> Any:
    """A pool is starting: the multiprocessing context its workers come from (the fork server, started by the
    first worker with every pool's preload)."""
    global _SERVER_USERS
    if not _server_socket_fits():
        return multiprocessing.get_context("spawn")
    with _SERVER_LOCK:
        _SERVER_USERS += 1
        return _server_context()


def _server_context() -> Any:
    """(Under _SERVER_LOCK.) The fork server's context, with every preload registered so far, its socket's
    directory claimed (a later agent removes it if this one is killed)."""
    tmpdirs.claim_mp_dir()
    context = multiprocessing.get_context(START_METHOD)
    context.set_forkserver_preload(sorted(_SERVER_PRELOAD))
    return context


def start_server(preload: Sequence[str]) -> None:
    """Start the fork server now, with `preload` (and what pools made so far registered), ahead of the first pool:
    a run that will parse starts it before its own imports, which its ~0.8 s of imports then overlap. Served and
    stopped as one the first worker started (`_server_released`); never used, it ends with this process. Nothing
    where the server cannot run (the workers are spawned there) or has started already."""
    if not _server_socket_fits():
        return
    from multiprocessing import forkserver

    with _SERVER_LOCK:
        _SERVER_PRELOAD.update(preload)
        _server_context()
        forkserver.ensure_running()


def _server_socket_fits() -> bool:
    """Whether the fork server's socket path fits AF_UNIX under this process's temp directory."""
    import tempfile

    name = tmpdirs.mp_dir_name(os.getpid()) + "x" * 8
    path = os.path.join(tempfile.gettempdir(), name, "listener-" + "x" * 8)
    return len(os.fsencode(path)) <= SOCKET_PATH_MAX


def _server_released(pool: Any) -> None:
    """`pool`'s workers are all gone; after the last served pool's, the fork server is stopped (the next pool starts
    another). It must outlive every worker it forked: each worker's exit status reaches the pool through it."""
    global _SERVER_USERS
    with _SERVER_LOCK:
        if id(pool) not in _SERVED_POOLS:
            return  # spawned workers
        _SERVED_POOLS.discard(id(pool))
        _SERVER_USERS -= 1
        if _SERVER_USERS == 0:
            from multiprocessing import forkserver

            # the standard library's own way to stop it (its tests'), private: where it is missing the server
            # stays until the agent exits (it exits with its parent)
            stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
            if stop is not None:
                stop()


def _worker_start(
    tmp: Path | None, memory_mib: int, preload: tuple[str, ...], warm: Warm | None = None
) -> None:
    """Each worker's set-up: its temp directory is its own, in the pool's `tmp`; Ctrl-C is the agent's to handle;
    the address space is capped; `preload`'s modules are imported and `warm` is run (before any task's deadline
    runs). A `warm` that fails is logged: the worker goes on, and its first task meets the same failure where the
    caller sees it."""
    import importlib
    import resource

    if tmp is not None:
        tmpdirs.enter(tmp)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if memory_mib:
        cap = memory_mib * 1024 * 1024
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    for name in preload:
        importlib.import_module(name)
    if warm is not None:
        fn, args = warm
        try:
            fn(*args)
        # the worker's start boundary: the task that needs it meets the same failure, and tells its caller
        except Exception:
            log.exception("warming up a worker failed")


class Few:
    """At most `most` units (texts, files) in any `window` seconds: what is not worth starting a pool's workers for
    (each a process, its imports and maybe its model: seconds) while they are not running."""

    def __init__(self, most: int, window: float) -> None:
        self.most, self.window = most, window
        self._taken: deque[tuple[float, int]] = deque()  # (when, units)
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """True (and `n` counted) if `n` more units keep the window at `most` or fewer."""
        now = time.monotonic()
        with self._lock:
            while self._taken and now - self._taken[0][0] > self.window:
                self._taken.popleft()
            if sum(k for _, k in self._taken) + n > self.most:
                return False
            self._taken.append((now, n))
            return True

    def fill(self) -> None:
        """Count the window as full from now: nothing more is taken for `window` seconds."""
        with self._lock:
            self._taken.append((time.monotonic(), self.most))


class WorkerPool:
    """`workers` processes, started on demand and closed when idle (see the module docstring)."""

    def __init__(
        self,
        name: str,
        workers: int,
        memory_mib: int,
        idle_s: float,
        preload: tuple[str, ...] = (),
        warm: Warm | None = None,
    ) -> None:
        self.name, self.workers, self.memory_mib, self.idle_s = name, workers, memory_mib, idle_s
        self.preload = preload  # modules every worker imports as it starts (imported by the fork server)
        with _SERVER_LOCK:
            _SERVER_PRELOAD.update(preload)
        self.warm = warm  # then runs (e.g. loads a model), so that no task waits for it but the first ones
        self._pool: Any = None  # pebble.ProcessPool (imported with the first task)
        self._tmp: Path | None = None  # its directory, where each worker has its temp directory
        self._lock = threading.Lock()
        self._under_way: set[Future[Any]] = set()  # ours, for the tasks submitted and not done
        self._waiting: tuple[deque[_Task], deque[_Task]] = (deque(), deque())  # first, then the others
        # one timer at a time for the idle exit, armed as the pool falls idle and re-armed from when it fell idle
        # last: starting a timer (a thread) each time the tasks under way ran out, as the pool did, started one for
        # about every embed request of a big folder and cancelled it with the next
        self._idle_timer: threading.Timer | None = None
        self._idle_since = 0.0  # when the tasks under way last ran out
        self._tasks_done = 0  # counted for the sweep of the workers' temp directories (SWEEP_EVERY)
        # held while an idle pool's workers exit and its temp directories go: `close` waits for that to finish (an
        # agent stopping just then left the directories behind when its process ended first)
        self._retiring = threading.Lock()
        self._closed = False
        self._free_until = 0.0  # until then, one worker is kept for `first` tasks (`keep_one_free`)
        self.started = 0  # pools started (one per busy period)

    def keep_one_free(self, seconds: float) -> None:
        """For the next `seconds`, hand the other tasks to all workers but one, which waits for `first` ones (an
        edit's file then never waits behind a long parse: it waited up to 0.9 s during an initial index). With one
        worker, nothing changes."""
        with self._lock:
            self._free_until = max(self._free_until, time.monotonic() + seconds)

    def submit(
        self,
        fn: Callable[..., T],
        args: Sequence[object],
        timeout: float | None = None,
        *,
        first: bool = False,
    ) -> Future[T]:
        """`fn(*args)` in a worker, killed after `timeout` s (concurrent.futures.TimeoutError); `first`: ahead of
        the tasks waiting for a worker."""
        ours: Future[T] = Future()
        with self._lock:
            if self._closed:
                ours.set_exception(CancelledError())
                return ours
            self._under_way.add(ours)
            self._waiting[0 if first else 1].append(_Task(fn, tuple(args), timeout, ours))
            handed = self._hand_out()
        self._watch(handed)
        return ours

    def _hand_out(self) -> list[tuple[Future[Any] | BaseException, Future[Any]]]:
        """Waiting tasks to the pool while it has a free worker (under the lock): (theirs, ours) for each, or
        (the error, ours) for a task the pool would not take."""
        handed: list[tuple[Future[Any] | BaseException, Future[Any]]] = []
        waiting = len(self._waiting[0]) + len(self._waiting[1])
        spare = 1 if self.workers > 1 and time.monotonic() < self._free_until else 0
        # the tasks under way and not waiting here are in the pool's hands
        while waiting and len(self._under_way) - waiting < self.workers - (0 if self._waiting[0] else spare):
            task = (self._waiting[0] or self._waiting[1]).popleft()
            waiting -= 1
            # the pool may refuse it (it broke): that task fails, the next may not
            try:
                theirs = self._open().schedule(task.fn, task.args, timeout=task.timeout)
            except Exception as err:
                self._under_way.discard(task.ours)
                handed.append((err, task.ours))
                continue
            handed.append((theirs, task.ours))
        return handed

    def _watch(self, handed: list[tuple[Future[Any] | BaseException, Future[Any]]]) -> None:
        """Complete ours from theirs, outside the lock (a future runs its callbacks at once when done)."""
        for theirs, ours in handed:
            if isinstance(theirs, BaseException):
                ours.set_exception(theirs)
            else:
                theirs.add_done_callback(lambda f, o=ours: self._one_done(f, o))  # type: ignore[misc]

    def _open(self) -> Any:
        if self._pool is not None and not self._pool.active:  # broken (its channel to a worker failed)
            # stopped in a thread of its own: joining here, under the lock, would wait for the pool's threads,
            # which may be waiting for the lock to complete the tasks it failed
            retire = threading.Thread(
                target=_retire, args=(self._pool, self._tmp), name=f"{self.name}-retire"
            )
            retire.daemon = True
            retire.start()
            self._pool = self._tmp = None
        if self._pool is None:
            from pebble import ProcessPool

            tmpdirs.remove_debris()
            self._tmp = tmpdirs.make_root()
            context = _server_used()
            self._pool = ProcessPool(max_workers=self.workers, max_tasks=MAX_TASKS, initializer=_worker_start,
                                     initargs=(self._tmp, self.memory_mib, self.preload, self.warm), context=context)  # fmt: skip
            if context.get_start_method() == START_METHOD:
                with _SERVER_LOCK:
                    _SERVED_POOLS.add(id(self._pool))
            self.started += 1
            log.debug("started %d %s workers", self.workers, self.name)
        return self._pool

    def _one_done(self, theirs: Future[Any], ours: Future[Any]) -> None:
        with self._lock:
            if ours not in self._under_way:
                return  # the pool was closed under it: ours ended already
            self._under_way.discard(ours)
            handed = self._hand_out()
            if not self._under_way and self._pool is not None and not self._closed:
                self._idle_since = time.monotonic()
                if self._idle_timer is None:
                    self._arm_idle(self.idle_s)
            self._tasks_done += 1
            tmp, sweep = self._tmp, self._tasks_done % SWEEP_EVERY == 0
        self._watch(handed)
        if theirs.cancelled():
            ours.set_exception(CancelledError())
        elif (err := theirs.exception()) is not None:
            ours.set_exception(err)
            sweep = True  # maybe its worker was killed at the deadline, or crashed: gone by now, its clean-up not run
        else:
            ours.set_result(theirs.result())
        if tmp is not None and sweep:
            tmpdirs.sweep(tmp)

    def _arm_idle(self, seconds: float) -> None:
        """(Under the lock.) `_close_if_idle` in `seconds`."""
        self._idle_timer = threading.Timer(seconds, self._close_if_idle)
        self._idle_timer.daemon = True
        self._idle_timer.start()

    def _close_if_idle(self) -> None:
        with self._retiring:
            with self._lock:
                self._idle_timer = None
                if self._under_way or self._pool is None or self._closed:
                    return  # busy again: re-armed when its tasks next run out
                left = self._idle_since + self.idle_s - time.monotonic()
                if left > 0:  # it was busy meanwhile, and fell idle again later
                    self._arm_idle(left)
                    return
                pool, tmp, self._pool, self._tmp = self._pool, self._tmp, None, None
            pool.close()
            pool.join()
            _server_released(pool)
            if tmp is not None:
                tmpdirs.remove(tmp)
        log.debug("%s workers exited after %.0f s idle", self.name, self.idle_s)

    @property
    def running(self) -> bool:
        """Whether worker processes exist now."""
        return self._pool is not None

    def close(self) -> None:
        """Stop the workers: tasks under way end with CancelledError."""
        with self._lock:
            self._closed = True
            pool, tmp, self._pool, self._tmp = self._pool, self._tmp, None, None
            under_way, self._under_way = self._under_way, set()
            self._waiting[0].clear()
            self._waiting[1].clear()
            if self._idle_timer is not None:
                self._idle_timer.cancel()
        for ours in under_way:
            ours.set_exception(CancelledError())
        if pool is not None:
            _retire(pool, tmp)
        with self._retiring:  # an idle pool retiring meanwhile: its workers and temp directories are gone too
            pass


def _retire(pool: Any, tmp: Path | None) -> None:
    """Stop `pool`'s workers and wait for them, then remove their temp directories."""
    pool.stop()
    pool.join()
    _server_released(pool)
    if tmp is not None:
        tmpdirs.remove(tmp)


@dataclass
class _Task:
    fn: Callable[..., Any]
    args: tuple[object, ...]
    timeout: float | None
    ours: Future[Any]


def worker_death(err: BaseException) -> str | None:
    """How a worker died under its task, when `err` says it did (None: the task itself raised `err`)."""
    from concurrent.futures.process import BrokenProcessPool

    from pebble import ProcessExpired

    if isinstance(err, ProcessExpired):
        code = err.exitcode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"
    if isinstance(err, BrokenProcessPool):  # the pool lost its channel to a worker
        return "the worker pool broke"
    return None


def worker_count(workers: int | None) -> int:
    """`run.workers` resolved: as given, or (None) one worker per core this process may run on."""
    if workers is not None:
        return workers
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
