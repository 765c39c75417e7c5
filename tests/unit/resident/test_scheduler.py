"""The scheduler: one job per directory at a time, reruns, priorities, pause, timed retries."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ragd.pipeline.dirjob import DirResult
from ragd.resident.scheduler import Scheduler, job_slots
from tests.support.poll import poll


def _poll(cond, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    poll(cond, timeout=timeout, every=0.01)


class Jobs:
    """A job function that records the order of runs and can hold a directory's job until released."""

    def __init__(self) -> None:
        self.started: list[Path] = []
        self.done: list[tuple[Path, BaseException | None]] = []
        self.gates: dict[Path, threading.Event] = {}
        self.active = 0
        self.most_active = 0  # the most jobs seen running at once
        self.max_active: dict[Path, int] = {}
        self.lock = threading.Lock()

    def run(self, d: Path) -> DirResult:
        with self.lock:
            self.started.append(d)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            self.max_active[d] = self.max_active.get(d, 0) + 1
        gate = self.gates.get(d)
        if gate is not None:
            gate.wait(5)
        with self.lock:
            self.active -= 1
            self.max_active[d] -= 1
        if d.name == "boom":
            raise OSError("disk on fire")
        return DirResult(d)

    def on_done(self, d: Path, result: DirResult | None, err: BaseException | None) -> None:
        with self.lock:
            self.done.append((d, err))


def test_one_job_per_directory_and_a_rerun_after_it() -> None:
    jobs = Jobs()
    a = Path("/r/a")
    jobs.gates[a] = threading.Event()
    s = Scheduler(jobs.run, jobs.on_done, jobs=2)
    s.enqueue([a])
    _poll(lambda: jobs.started == [a])
    s.enqueue([a, a])  # dirty again while running: exactly one more run, after this one
    assert s.counts() == (1, 1) and s.busy()
    jobs.gates[a].set()
    # (a job's outcome is handed on just before it leaves the running set)
    _poll(lambda: len(jobs.done) == 2 and not s.busy())
    assert jobs.started == [a, a]
    assert s.close(1.0)


def test_a_directory_queued_without_again_while_its_job_runs_is_not_run_twice() -> None:
    jobs = Jobs()
    a, b = Path("/r/a"), Path("/r/b")
    jobs.gates[a] = threading.Event()
    s = Scheduler(jobs.run, jobs.on_done, jobs=2)
    s.enqueue([a])
    _poll(lambda: jobs.started == [a])
    s.enqueue([a, b], again=False)  # `a` has its job (running); `b` is queued as ever
    _poll(lambda: len(jobs.done) == 1 and s.counts()[1] == 1)  # `b` done
    assert s.counts() == (0, 1)  # nothing queued after `a`
    s.enqueue([a])  # a change seen in it: run once more after all
    jobs.gates[a].set()
    _poll(lambda: len(jobs.done) == 3 and not s.busy())
    assert jobs.started == [a, b, a]
    assert s.close(1.0)


def test_a_change_seen_before_the_running_job_began_does_not_run_it_again() -> None:
    """The debouncer hands a directory over with its latest event's time: a job that began after it lists what
    the event said (a folder moved in, queued by its parent's job before its own event came through)."""
    jobs = Jobs()
    a = Path("/r/a")
    jobs.gates[a] = threading.Event()
    s = Scheduler(jobs.run, jobs.on_done, jobs=2)
    before = time.monotonic()
    s.enqueue([a])
    _poll(lambda: jobs.started == [a])
    s.enqueue([a], express=True, seen={a: before})  # seen before the job began: nothing to run again
    assert s.counts() == (0, 1)
    s.enqueue([a], express=True, seen={a: time.monotonic()})  # seen while it runs: once more after it
    assert s.counts() == (1, 1)
    jobs.gates[a].set()
    _poll(lambda: len(jobs.done) == 2 and not s.busy())
    assert jobs.started == [a, a]
    assert s.close(1.0)


def test_urgent_directories_go_before_background_ones() -> None:
    jobs = Jobs()
    block = Path("/r/block")
    jobs.gates[block] = threading.Event()
    s = Scheduler(jobs.run, jobs.on_done, jobs=1)
    s.enqueue([block])
    _poll(lambda: jobs.started == [block])
    s.enqueue([Path("/r/b1"), Path("/r/b2")], urgent=False)
    s.enqueue([Path("/r/u1")], urgent=True)
    s.enqueue([Path("/r/b2")], urgent=True)  # promoted
    jobs.gates[block].set()
    _poll(lambda: len(jobs.done) == 4)
    assert jobs.started == [block, Path("/r/u1"), Path("/r/b2"), Path("/r/b1")]


def test_pause_holds_jobs_and_resume_releases_them() -> None:
    jobs = Jobs()
    s = Scheduler(jobs.run, jobs.on_done, jobs=2)
    s.pause()
    s.enqueue([Path("/r/x"), Path("/r/y")])
    time.sleep(0.05)
    assert jobs.started == [] and s.paused and s.counts_under(Path("/r")) == (2, 0)
    s.resume()
    _poll(lambda: len(jobs.done) == 2)


def test_failures_reach_the_done_callback_and_the_queue_goes_on() -> None:
    jobs = Jobs()
    s = Scheduler(jobs.run, jobs.on_done, jobs=1)
    s.enqueue([Path("/r/boom"), Path("/r/ok")])
    _poll(lambda: len(jobs.done) == 2)
    assert isinstance(jobs.done[0][1], OSError) and jobs.done[1] == (Path("/r/ok"), None)


def test_timed_retries_and_discard_under() -> None:
    jobs = Jobs()
    s = Scheduler(jobs.run, jobs.on_done, jobs=1)
    s.retry_later(Path("/r/later"), 100.0)
    s.retry_later(Path("/q/gone"), 50.0)
    assert s.tick(now=10.0) == 40.0
    s.discard_under(Path("/q"))
    assert s.tick(now=60.0) == 40.0
    assert s.tick(now=100.0) is None
    _poll(lambda: jobs.started == [Path("/r/later")] and s.counts() == (0, 0))  # its job run and ended
    s.pause()
    s.enqueue([Path("/r/sub/a"), Path("/other/b")])
    s.discard_under(Path("/r"))
    assert s.counts() == (1, 0)


def test_wait_idle_waits_for_every_job_and_for_those_queued_by_a_finished_one() -> None:
    """What `run --once` waits for: reruns and the jobs a done callback queues (new subdirectories) too."""
    jobs = Jobs()
    a, b = Path("/r/a"), Path("/r/b")
    jobs.gates[a] = threading.Event()
    s: Scheduler
    subs: list[Path] = []

    def on_done(d: Path, result: DirResult | None, err: BaseException | None) -> None:
        jobs.on_done(d, result, err)
        if d == a and not subs:  # the first job of a found a subdirectory
            subs.append(a / "sub")
            s.enqueue(subs)

    s = Scheduler(jobs.run, on_done, jobs=2)
    s.enqueue([a, b], urgent=False)
    _poll(lambda: a in jobs.started)
    s.enqueue([a])  # dirty again while running
    assert not s.wait_idle(timeout=0.05)
    jobs.gates[a].set()
    assert s.wait_idle()
    assert sorted(jobs.started) == [a, a, Path("/r/a/sub"), b] and len(jobs.done) == 4
    s.pause()
    s.enqueue([Path("/r/c")])
    assert not s.wait_idle(timeout=0.05)  # paused with work queued: not idle
    assert s.close(1.0)


def test_a_changed_directory_runs_beside_full_slots_and_says_so() -> None:
    """Every slot busy with the initial index: a directory where a change was seen (express) starts at once in the
    slot of its own, ahead of urgent and background work; an urgent one waits for a slot. Its job knows it is
    express (its texts then jump the embed queue); a rerun of it after a change stays express."""
    jobs = Jobs()
    busy, edited, sub, later = Path("/r/busy"), Path("/r/edited"), Path("/r/sub"), Path("/r/later")
    for d in (busy, edited):
        jobs.gates[d] = threading.Event()
    s = Scheduler(jobs.run, jobs.on_done, jobs=1)
    seen: dict[Path, bool] = {}
    s.enqueue([busy], urgent=False)
    _poll(lambda: jobs.started == [busy])
    s.enqueue([later], urgent=False)
    s.enqueue([sub], urgent=True)
    s.enqueue([edited], express=True)
    _poll(lambda: jobs.started == [busy, edited])
    seen[busy], seen[edited] = s.express(busy), s.express(edited)
    assert seen == {busy: False, edited: True}
    s.enqueue([edited], express=True)  # changed again while its job runs: one more express run after it
    assert s.counts() == (3, 2)
    jobs.gates[edited].set()
    _poll(lambda: jobs.started.count(edited) == 2)
    assert sub not in jobs.started  # the one regular slot is still busy
    jobs.gates[busy].set()
    _poll(lambda: len(jobs.done) == 5 and not s.busy())
    assert jobs.started == [busy, edited, edited, sub, later]
    assert not s.express(edited) and s.close(1.0)


def test_auto_jobs_widen_once_texts_go_to_an_embeddings_api() -> None:
    assert job_slots(0, "openai") == (2, 8) and job_slots(0, "local") == (2, None)
    assert job_slots(3, "openai") == (3, None)  # a number set in the config (or `--jobs`) is kept

    jobs, gate = Jobs(), threading.Event()

    def queue(s: Scheduler, name: str, n: int) -> None:
        dirs = [Path(f"/r/{name}{i}") for i in range(n)]
        jobs.gates.update(dict.fromkeys(dirs, gate))
        s.enqueue(dirs, urgent=False)

    def runs_at_once(n: int) -> None:
        _poll(lambda: jobs.active == n)
        time.sleep(0.1)
        assert jobs.most_active == n

    s = Scheduler(jobs.run, jobs.on_done, 2, widen_to=4)
    queue(s, "d", 6)
    runs_at_once(2)  # nothing embedded yet: two at a time
    s.widen()  # texts went to the embedder: four at a time from now on, the queued ones too
    runs_at_once(4)
    gate.set()
    _poll(lambda: not s.busy())
    assert s.close(1.0)
    gate.clear()
    jobs.most_active = 0
    fixed = Scheduler(jobs.run, jobs.on_done, 2)  # without `widen_to`: widen() changes nothing
    queue(fixed, "fixed", 4)
    fixed.widen()
    runs_at_once(2)
    gate.set()
    _poll(lambda: not fixed.busy())
    assert fixed.close(1.0)


def test_a_bulk_job_no_longer_counts_as_an_edit_nor_does_its_rerun_until_it_ends() -> None:
    """An express job that turns out to be bulk work (a big folder's, reporting in steps) stops counting as an edit
    on its way; so does a change seen in its folder meanwhile, whose run waits for the job's end, and counts again
    once it is queued."""
    jobs = Jobs()
    big = Path("/r/big")
    jobs.gates[big] = threading.Event()
    s = Scheduler(jobs.run, jobs.on_done, jobs=1)
    s.enqueue([big], express=True)
    _poll(lambda: jobs.started == [big])
    assert s.express_busy()
    s.no_longer_express(big)
    assert not s.express(big) and not s.express_busy()
    s.enqueue([big], express=True)  # an edit in the folder while its job runs: a rerun after it
    assert not s.express_busy()
    first, jobs.gates[big] = jobs.gates[big], threading.Event()  # the rerun waits on a gate of its own
    first.set()
    _poll(lambda: jobs.started.count(big) == 2)
    assert s.express(big) and s.express_busy()  # the rerun is the edit's
    jobs.gates[big].set()
    _poll(lambda: len(jobs.done) == 2 and not s.busy())
    assert not s.express_busy() and s.close(1.0)


def test_a_signal_given_to_a_jobs_thread_interrupts_the_wait_for_idle_at_once() -> None:
    """Python runs a signal's handler in the main thread, which, asleep on a lock, woke for it only if the kernel
    gave the signal to that thread: `ragd run --once` heard its Ctrl-C, delivered to a job's thread, only when the
    running job ended, and the next directory's job had started meanwhile (CI). The wait wakes every WAKE_S now."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set in the main thread")

    class Interrupted(Exception):
        pass

    def interrupted(signum: int, frame: object) -> None:
        raise Interrupted

    jobs = Jobs()
    jobs.gates[Path("/r/slow")] = threading.Event()  # the job runs until released (or 5 s)
    running: list[int] = []
    orig = jobs.run

    def run(d: Path) -> DirResult:
        running.append(threading.get_ident())
        return orig(d)

    s = Scheduler(run, jobs.on_done, jobs=1)
    previous = signal.signal(signal.SIGUSR1, interrupted)
    try:
        s.enqueue([Path("/r/slow"), Path("/r/next")])
        _poll(lambda: running)
        threading.Timer(0.3, signal.pthread_kill, (running[0], signal.SIGUSR1)).start()
        with pytest.raises(Interrupted):
            s.wait_idle()
        assert jobs.done == [], "the wait heard the signal only once the job had ended"
    finally:
        signal.signal(signal.SIGUSR1, previous)
        jobs.gates[Path("/r/slow")].set()
        s.close(timeout=5)
    assert jobs.started == [Path("/r/slow")], "a job started after the interruption"


def test_a_job_that_ends_at_once_hands_its_outcome_on_from_its_own_thread() -> None:
    """A future's done-callback runs on the thread that adds it when the job has already ended (a folder gone ends
    its job at once): `on_done` ran on the thread that queued the folder, under the scheduler's condition. The
    agent's `on_done` takes the agent's lock, which `ragctl roots add` holds while it queues the root's folders here:
    each waited for the other. Every outcome is now handed on by the job's own thread."""
    threads: list[str] = []

    def on_done(d: Path, result: DirResult | None, err: BaseException | None) -> None:
        threads.append(threading.current_thread().name)

    sched = Scheduler(lambda d: DirResult(d), on_done, jobs=4)
    for i in range(300):
        sched.enqueue([Path(f"/kb/d{i}")])
    assert sched.wait_idle(timeout=10)
    sched.close(timeout=5)
    assert len(threads) == 300
    assert all(name.startswith("dirjob") for name in threads), sorted(set(threads))
