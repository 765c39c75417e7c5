"""The scheduler: runs directory jobs in parallel, at most one per directory (DESIGN §5).

Directories arrive from the debouncer (express: a change was seen there), from the directory jobs and the verbs
(urgent: new subdirectories, a forced run) or from a rescan (background: every directory of a root). Express ones
go first, then urgent ones: an edit is picked up promptly even during the initial indexing. An express directory
also has a slot of its own (`EXPRESS_SLOTS`, beside `jobs`): it never waits for a long job of the initial index
to end, and `express(directory)` tells its job to put its texts at the head of the embed queue. A directory that
gets dirty again while its job runs is run once more after it (express again, when it was dirtied by a change). Timed retries (files whose
embedding failed, directories whose job failed) are kept in a heap and released when due.

The resident agent feeds it for as long as it runs; `ragd run --once` queues every directory of its roots once and
waits until it is idle.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..paths import dropped, is_under
from ..pipeline.dirjob import DirResult

log = logging.getLogger(__name__)

EXPRESS_SLOTS = 1  # jobs of express directories that may run beyond `jobs`
JOBS = 2  # `run.jobs = 0` (auto): directory jobs at a time...
API_JOBS = 8  # ... and once texts have gone to an embeddings API
WAKE_S = 0.2  # a wait for the jobs wakes this often: the main thread runs a signal's handler (`_wait`)
JobFn = Callable[[Path], DirResult]
DoneFn = Callable[[Path, DirResult | None, BaseException | None], None]


def job_slots(jobs: int, provider: str) -> tuple[int, int | None]:
    """(directory jobs at a time, and how many once texts have gone to the embedder (`Scheduler.widen`); None: as
    many) for `run.jobs`.

    0 (auto): JOBS, widened to API_JOBS with an embeddings API. A job that embeds through an API mostly waits for its
    requests, and the embed queue batches more texts a request when more jobs feed it (400 documents through a 30 ms
    API, the jobs fixed from the start: 3.4-3.6 s with 8, 3.7-4.1 with 4, 3.9-4.1 with 2), while a no-op rescan is CPU in this process alone and
    loses about 15 % with 4 (docs/benchmarks.md). The bundled model's worker processes bound a run with it, whatever
    the number of jobs."""
    if jobs:
        return jobs, None
    return JOBS, (API_JOBS if provider != "local" else None)


class Scheduler:
    def __init__(self, run_job: JobFn, on_done: DoneFn, jobs: int, widen_to: int | None = None) -> None:
        """`jobs` directory jobs at a time (and EXPRESS_SLOTS more for express directories); `widen_to`: that many
        once `widen` is called."""
        self._run_job = run_job
        self._on_done = on_done
        self._jobs = jobs
        self._widen_to = widen_to if widen_to is not None and widen_to > jobs else None
        self._pool = ThreadPoolExecutor(max_workers=max(jobs, self._widen_to or 0) + EXPRESS_SLOTS,
                                        thread_name_prefix="dirjob")  # fmt: skip
        self._cond = threading.Condition()
        # insertion-ordered sets; an OrderedDict takes its first key in O(1) (a dict rescans what was taken before)
        self._express: OrderedDict[Path, None] = OrderedDict()
        self._urgent: OrderedDict[Path, None] = OrderedDict()
        self._background: OrderedDict[Path, None] = OrderedDict()
        self._running: dict[Path, bool] = {}  # running directory -> taken as express
        self._started: dict[Path, float] = {}  # running directory -> when its job began (time.monotonic)
        self._rerun: dict[Path, bool] = {}  # to run again after its job -> as express
        self._bulk: set[Path] = set()  # running jobs that turned out to be bulk work (`no_longer_express`)
        self._timers: list[tuple[float, Path]] = []
        self._paused = False
        self._closed = False

    # -- input ------------------------------------------------------------------------------------------------
    def enqueue(
        self,
        dirs: Iterable[Path],
        *,
        urgent: bool = True,
        express: bool = False,
        again: bool = True,
        seen: Mapping[Path, float] | None = None,
    ) -> int:
        """Queue `dirs`. One whose job runs is run once more after it, unless
        - `seen` gives when the change that queues it was seen (time.monotonic) and the job started after that:
          its listing, made later, holds the change (a folder moved in: its own event came to the debouncer before
          its job, which its parent's job had queued, began; a second job read all its entries again);
        - or `again` is False: the caller only needs each to have a job (a new folder its parent's job found: any
          change made in it since comes with an event of its own)."""
        n = 0
        with self._cond:
            for d in dirs:
                n += 1
                if d in self._running:
                    started = self._started.get(d)
                    listed_after = seen is not None and d in seen and (started is None or started > seen[d])
                    if again and not listed_after:
                        self._rerun[d] = self._rerun.get(d, False) or express
                elif express:
                    self._background.pop(d, None)
                    self._urgent.pop(d, None)
                    self._express[d] = None
                elif urgent and d not in self._express:
                    self._background.pop(d, None)
                    self._urgent[d] = None
                elif d not in self._urgent and d not in self._express:
                    self._background[d] = None
            self._dispatch()
        return n

    def widen(self) -> None:
        """From now on `widen_to` jobs at a time, if it was given (the drivers call this when texts first go to the
        embedder: `LazyEmbedQueue.when_used`)."""
        with self._cond:
            if self._widen_to is None:
                return
            log.debug("texts to embed: %d directory jobs at a time instead of %d", self._widen_to, self._jobs)
            self._jobs, self._widen_to = self._widen_to, None
            self._dispatch()

    def retry_later(self, directory: Path, when: float) -> None:
        """Run `directory` again at monotonic time `when` (the earliest of several requests wins)."""
        with self._cond:
            heapq.heappush(self._timers, (when, directory))

    def tick(self, now: float | None = None) -> float | None:
        """Release due retries; return seconds until the next one (None: none waiting)."""
        now = time.monotonic() if now is None else now
        due = []
        with self._cond:
            while self._timers and self._timers[0][0] <= now:
                due.append(heapq.heappop(self._timers)[1])
            nxt = self._timers[0][0] - now if self._timers else None
        if due:
            self.enqueue(dict.fromkeys(due))
        return nxt

    def discard_under(self, top: Path, keep: Iterable[Path] = ()) -> None:
        """Drop the queued work of `top` and below, except under a directory of `keep` (a nested root that stays)."""
        keep = list(keep)

        def gone(d: Path) -> bool:
            return dropped(d, top, keep)

        with self._cond:
            for queue in (self._express, self._urgent, self._background):
                for d in [d for d in queue if gone(d)]:
                    del queue[d]
            self._rerun = {d: e for d, e in self._rerun.items() if not gone(d)}
            self._timers = [(t, d) for t, d in self._timers if not gone(d)]
            heapq.heapify(self._timers)

    def pause(self) -> None:
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._dispatch()

    # -- state ------------------------------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused

    def busy(self) -> bool:
        with self._cond:
            return not self._idle()

    def _idle(self) -> bool:
        """Nothing queued, running or due to run again (timed retries do not count; caller holds the condition)."""
        return not (self._express or self._urgent or self._background or self._running or self._rerun)

    def has(self, directory: Path) -> bool:
        """A job of `directory` is queued or running (timed retries do not count)."""
        with self._cond:
            queues = (self._express, self._urgent, self._background, self._running, self._rerun)
            return any(directory in q for q in queues)

    def counts_under(self, top: Path) -> tuple[int, int]:
        """(pending, running) directory jobs under `top`."""
        with self._cond:
            queues = (self._express, self._urgent, self._background)
            pending = sum(1 for q in queues for d in q if is_under(d, top))
            pending += sum(1 for d in self._rerun if is_under(d, top))
            return pending, sum(1 for d in self._running if is_under(d, top))

    def counts(self) -> tuple[int, int]:
        with self._cond:
            queued = len(self._express) + len(self._urgent) + len(self._background) + len(self._rerun)
            return queued, len(self._running)

    def express(self, directory: Path) -> bool:
        """Whether the running job of `directory` was started for a change seen there."""
        with self._cond:
            return self._running.get(directory, False)

    def express_busy(self) -> bool:
        """A job for a change seen in its directory is queued, running or due to run again (except again after a
        bulk job, which is not soon: `no_longer_express`)."""
        with self._cond:
            return (
                bool(self._express)
                or any(self._running.values())
                or any(v for d, v in self._rerun.items() if d not in self._bulk)
            )

    def no_longer_express(self, directory: Path) -> None:
        """The running job of `directory` is clearly bulk work (a big folder's, reporting in steps), even if a change
        seen there started it: it no longer counts as an edit on its way (`express_busy`), nor does a change seen
        there meanwhile, whose run waits for the job's end. While an edit is on its way the index writer works in an
        editor's small steps (16 change notes a batch, a flush every 10 s); a folder of 30,000 notes whose job
        counted as an edit for its whole length was written that way, each flush adding a block of memory to the
        index (docs/benchmarks.md, the big folder)."""
        with self._cond:
            if directory in self._running:
                self._running[directory] = False
                self._bulk.add(directory)

    # -- running ----------------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Start jobs while there is room (caller holds the condition): `jobs` slots for any directory, and
        `EXPRESS_SLOTS` more for express ones."""
        while not self._paused and not self._closed:
            room = len(self._running) < self._jobs
            if self._express and (room or len(self._running) < self._jobs + EXPRESS_SLOTS):
                queue = self._express
            elif room and (self._urgent or self._background):
                queue = self._urgent if self._urgent else self._background
            else:
                return
            directory, _ = queue.popitem(last=False)
            self._running[directory] = queue is self._express
            self._pool.submit(self._job, directory)

    def _job(self, directory: Path) -> None:
        """(On the pool's thread.) The job, then its outcome handed on, on the same thread: a done-callback of its
        future ran on the thread that submitted it when the job had already ended (a folder gone: at once), under
        this scheduler's condition, and `on_done` takes the agent's lock, which a root added holds while it queues
        the root's folders here."""
        with self._cond:
            self._started[directory] = time.monotonic()
        try:
            result, err = self._run_job(directory), None
        except BaseException as exc:  # as a future would hold it: `on_done` hears of every outcome
            result, err = None, exc
        self._finished(directory, result, err)

    def _finished(self, directory: Path, result: DirResult | None, err: BaseException | None) -> None:
        try:
            self._on_done(directory, result, err)
        except Exception:  # the scheduler's loop boundary: a bug in a result handler must not stall the queue
            log.exception("internal error while recording the job of %s", directory)
        with self._cond:
            self._running.pop(directory, None)
            self._started.pop(directory, None)
            self._bulk.discard(directory)
            if directory in self._rerun:
                (self._express if self._rerun.pop(directory) else self._urgent)[directory] = None
            self._dispatch()
            self._cond.notify_all()

    def close(self, timeout: float | None) -> bool:
        """Start nothing more; wait up to `timeout` s (None: as long as it takes) for running jobs. True when all
        finished."""
        with self._cond:
            self._closed = True
        finished = self.wait_running(timeout)
        self._pool.shutdown(wait=finished, cancel_futures=True)
        return finished

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` s (None: as long as it takes) until nothing is queued or running. True when so.

        Paused (or closed) with directories queued, it is not idle before `timeout`."""
        return self._wait(self._idle, timeout)

    def wait_running(self, timeout: float | None) -> bool:
        """Wait up to `timeout` s until no job runs. True when none does."""
        return self._wait(lambda: not self._running, timeout)

    def _wait(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Wait for `done` in slices of WAKE_S: Python runs a signal's handler (Ctrl-C) in the main thread only, and a
        main thread asleep on a lock wakes for a signal only if the kernel gave the signal to that thread, not to
        one of the jobs'. `ragd run --once` then heard its Ctrl-C only when the running job ended, and the next
        directory's job had started meanwhile (CI)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not done():
                left = WAKE_S if deadline is None else min(WAKE_S, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True
