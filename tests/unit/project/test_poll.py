"""The tests' own wait helper (tests/support/poll.py): what it returns, and what its failure says."""

from __future__ import annotations

import itertools

import pytest

from tests.support.poll import poll


def test_returns_the_first_truthy_value() -> None:
    values = iter([None, [], 0, ["found"], ["later"]])
    assert poll(lambda: next(values), timeout=10, every=0.001) == ["found"]


def test_a_timeout_names_what_was_awaited_and_the_last_value() -> None:
    values = itertools.chain([None, ""], itertools.repeat(0))
    with pytest.raises(AssertionError, match=r"waiting for the queue to drain \(last value: 0\)") as err:
        poll(lambda: next(values), timeout=0.05, every=0.01, what="the queue to drain")
    assert "timed out after 0.05 s" in str(err.value)


def test_a_condition_that_raises_ends_the_wait_at_once() -> None:
    calls = []

    def exited() -> bool:
        calls.append(1)
        raise RuntimeError("the process exited")

    with pytest.raises(RuntimeError, match="the process exited"):
        poll(exited, timeout=10)
    assert len(calls) == 1
