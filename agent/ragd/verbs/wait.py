"""`wait`: return once the agent is idle and settled (docs/protocol.md), streaming what is left meanwhile.

Idle: no directory queued, running or debouncing, nothing waiting for the embedder, no change note waiting for
the writer, no verification running; settled: no watch event for a moment (a move seen as a lone move-out is held
that long). While paused with work to do, it says so instead of waiting for ever.
"""

from __future__ import annotations

import time
from typing import TypedDict

from pydantic import Field

from ragctl import protocol as p

from ..errors import RagdError
from .arguments import Args
from .runtime import Progress, Resident, no_progress
from .status import busy

POLL_S = 0.05
SETTLE_S_PAUSED = 0.6  # a wait while paused says so once the changes already seen have reached the queue
STREAM_EVERY_S = 0.5


class WaitArgs(Args):
    timeout: float | None = Field(default=None, ge=0)


class Waited(TypedDict, total=False):
    waited_s: float  # absent when the caller went away before the agent was idle


def wait(rt: Resident, args: WaitArgs | None = None, progress: Progress = no_progress) -> Waited:
    """{"waited_s": seconds}; RagdError(timeout) after `timeout` s, (unavailable) when paused or stopping."""
    return until_idle(rt, (args or WaitArgs()).timeout, time.monotonic(), progress)


def until_idle(rt: Resident, timeout: float | None, since: float, progress: Progress) -> Waited:
    deadline = None if timeout is None else since + timeout
    last_sent = 0.0
    while not rt.settled(since):
        now = time.monotonic()
        if rt.scheduler.paused and now - since >= SETTLE_S_PAUSED:
            _refuse_if_stuck(rt)
        if deadline is not None and now >= deadline:
            raise RagdError(f"the agent is still busy after {timeout:g} s", "wait longer, or see `ragctl status`",
                            code=p.TIMEOUT)  # fmt: skip
        if rt.host.stopping():
            raise RagdError("the agent is stopping", code=p.UNAVAILABLE)
        if now - last_sent >= STREAM_EVERY_S:
            if not progress(busy(rt)):
                return {}
            last_sent = now
        time.sleep(POLL_S)
    return {"waited_s": round(time.monotonic() - since, 3)}


def _refuse_if_stuck(rt: Resident) -> None:
    pending, running = rt.dirs_to_do()
    if pending and not running:
        raise RagdError(f"the agent is paused with {pending} director{'y' if pending == 1 else 'ies'} to do, "
                        "so it will not become idle", "run `ragctl resume`", code=p.UNAVAILABLE)  # fmt: skip
