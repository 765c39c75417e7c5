"""Debouncer: quiet period, ceiling, urgency, order, discard, and a real wait across threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ragd.resident.debounce import Debouncer

A, B, C = Path("/r/a"), Path("/r/b"), Path("/r/a/c")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_due_after_quiet_period(clock: Clock) -> None:
    d = Debouncer(quiet=0.3, ceiling=3.0, clock=clock)
    d.touch(A)
    clock.t += 0.29
    assert d.pop_due() == []
    clock.t += 0.02
    assert d.pop_due() == [A]
    assert d.pending() == 0
    assert d.pop_due() == []


def test_new_events_postpone_until_ceiling(clock: Clock) -> None:
    d = Debouncer(quiet=0.3, ceiling=3.0, clock=clock)
    d.touch(A)
    for _ in range(14):  # an event every 0.2 s: never quiet for 0.3 s
        clock.t += 0.2
        d.touch(A)
        assert d.pop_due() == []
    clock.t += 0.2  # 3.0 s after the first event
    assert d.pop_due() == [A]
    d.touch(A)  # a fresh round starts its own ceiling
    clock.t += 0.2
    assert d.pop_due() == []


def test_urgent_is_due_at_once(clock: Clock) -> None:
    d = Debouncer(clock=clock)
    d.touch(A)
    d.touch(B, urgent=True)
    assert d.pop_due() == [B]
    d.touch(A, urgent=True)  # urgency sticks to an already pending directory
    assert d.pop_due() == [A]


def test_oldest_first_and_explicit_now(clock: Clock) -> None:
    d = Debouncer(quiet=0.3, ceiling=3.0, clock=clock)
    d.touch(B, now=1.0)
    d.touch(A, now=1.1)
    d.touch(B, now=1.2)  # a later event postpones B but does not move it behind A
    assert d.pop_due(now=1.45) == [A]
    d.touch(A, now=1.5)
    assert d.pop_due(now=2.0) == [B, A]


def test_pending_under_and_discard_under(clock: Clock) -> None:
    d = Debouncer(clock=clock)
    for p in (A, B, C, Path("/r/ab")):
        d.touch(p)
    assert d.pending() == 4
    assert d.pending_under(A) == 2  # /r/a and /r/a/c, not /r/ab
    d.discard_under(A)
    assert d.pending() == 2
    assert d.pending_under(A) == 0
    clock.t += 10
    assert sorted(d.pop_due()) == [Path("/r/ab"), B]


def test_discarded_then_touched_again_is_one_fresh_round(clock: Clock) -> None:
    d = Debouncer(quiet=0.3, ceiling=3.0, clock=clock)
    d.touch(A)
    d.discard_under(A)
    clock.t += 0.2
    d.touch(A)
    clock.t += 0.2  # due for the first round, not for the second
    assert d.pop_due() == []
    clock.t += 0.2
    assert d.pop_due() == [A]
    clock.t += 10
    assert d.pop_due() == []
    assert d.pending() == 0


def test_many_directories_come_out_in_order(clock: Clock) -> None:
    d = Debouncer(quiet=0.3, ceiling=3.0, clock=clock)
    dirs = [Path(f"/r/{i}") for i in range(2000)]
    for i, p in enumerate(dirs):
        d.touch(p, now=1000.0 + i * 0.001)
    for p in dirs[::2]:
        d.touch(p, now=1002.5)  # postponed: due at 1002.8
    assert d.pop_due(now=1002.7) == dirs[1::2]
    assert d.pop_due(now=1002.9) == dirs[::2]


def test_wait_due_times_out_and_close_wakes() -> None:
    d = Debouncer(quiet=0.05, ceiling=1.0)
    t0 = time.monotonic()
    assert d.wait_due(timeout=0.05) == []
    assert time.monotonic() - t0 >= 0.05
    got: list[list[tuple[Path, float]]] = []
    waiter = threading.Thread(target=lambda: got.append(d.wait_due(timeout=None)))
    waiter.start()
    d.close()
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    assert got == [[]]


def test_wait_due_wakes_on_touch_from_another_thread() -> None:
    d = Debouncer(quiet=0.05, ceiling=1.0)
    got: list[list[tuple[Path, float]]] = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        got.append(d.wait_due(timeout=5.0))

    waiter = threading.Thread(target=wait)
    waiter.start()
    started.wait(5)
    t0 = time.monotonic()
    d.touch(A)
    touched = time.monotonic()
    waiter.join(timeout=5)
    [[(due, last)]] = got
    assert due == A and t0 <= last <= touched  # with the time of its latest event
    assert time.monotonic() - t0 < 2.0  # woke for the quiet period, not the 5 s timeout


def test_rejects_non_positive_settings() -> None:
    with pytest.raises(ValueError):
        Debouncer(quiet=0)
