"""Waiting for a condition in a test: poll it, never sleep a guessed time.

poll(lambda: len(server.requests) == 2, timeout=10, what="both requests")
hits = poll(lambda: keyword_hits("papa"), what="papa to be searchable")  # the truthy value comes back
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(cond: Callable[[], T], timeout: float = 30.0, every: float = 0.05, what: str = "the condition") -> T:
    """Call `cond` every `every` s until it returns something truthy, and return that value; after `timeout` s
    raise AssertionError naming `what` and the last value `cond` returned. An exception from `cond` propagates
    at once (a condition can fail the wait early, e.g. when the process it waits on has exited)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value: {value!r})")
        time.sleep(every)
