"""`wait`: return once the agent is idle and settled (docs/protocol.md), streaming what is left meanwhile.

Idle: no directory queued, running or debouncing, nothing waiting for the embedder, no change note waiting for
the writer, no verification running; settled: no watch event for a moment (a move seen as a lone move-out is held
that long). While paused with work to do, it says so instead of waiting for ever.

With `paths` (each under a root), only those parts of the roots count: it returns once nothing is left to do there
(no directory walked for, debouncing, queued or in a job, no file waiting for vectors, no change note not yet
applied, no watch event for a moment), however busy the agent is elsewhere.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from pydantic import Field

from ragctl import protocol as p

from ..errors import RagdError
from ..paths import Within
from .arguments import Args, under_a_root
from .runtime import Progress, Resident, no_progress
from .status import busy

POLL_S = 0.05
SETTLE_S_PAUSED = 0.6  # a wait while paused says so once the changes already seen have reached the queue
STREAM_EVERY_S = 0.5


class WaitArgs(Args):
    timeout: float | None = Field(default=None, ge=0)
    paths: list[str] = Field(default_factory=list)  # only these files and folders (with their subfolders)


class Waited(TypedDict, total=False):
    waited_s: float  # absent when the caller went away before the agent was idle
    paths: list[str]  # the paths waited for, as the agent names them (absent: the whole agent)


def wait(rt: Resident, args: WaitArgs | None = None, progress: Progress = no_progress) -> Waited:
    """{"waited_s": seconds}; RagdError(timeout) after `timeout` s, (unavailable) when paused or stopping,
    (not_found) for a path under no root."""
    args = args or WaitArgs()
    since = time.monotonic()
    if not args.paths:
        return until_idle(rt, args.timeout, since, progress)
    paths = [path for raw in args.paths if (path := under_a_root(raw, rt.roots, "paths")) is not None]
    within = Within.of(paths)
    waited = until_idle(rt, args.timeout, since, progress, within)
    return {**waited, "paths": [str(p) for p in paths]} if waited else waited


def until_idle(rt: Resident, timeout: float | None, since: float, progress: Progress,
               within: Within | None = None) -> Waited:  # fmt: skip
    """Wait until the agent (`within`: that part of its roots) is idle and settled."""
    deadline = None if timeout is None else since + timeout
    last_sent = 0.0
    while not (rt.settled(since) if within is None else rt.settled_within(within, since)):
        now = time.monotonic()
        if rt.scheduler.paused and now - since >= SETTLE_S_PAUSED:
            _refuse_if_stuck(rt, within)
        if deadline is not None and now >= deadline:
            where = "" if within is None else " there"
            raise RagdError(f"the agent is still busy{where} after {timeout:g} s",
                            "wait longer, or see `ragctl status`", code=p.TIMEOUT)  # fmt: skip
        if rt.host.stopping():
            raise RagdError("the agent is stopping", code=p.UNAVAILABLE)
        if now - last_sent >= STREAM_EVERY_S:
            if not progress(_left(rt, within)):
                return {}
            last_sent = now
        time.sleep(POLL_S)
    return {"waited_s": round(time.monotonic() - since, 3)}


def _left(rt: Resident, within: Within | None) -> dict[str, Any]:
    """The progress line: what is left to do (`within`: there)."""
    return busy(rt) if within is None else rt.to_do_within(within)


def _refuse_if_stuck(rt: Resident, within: Within | None) -> None:
    """Paused with directories waiting (there), the agent cannot become idle (there) before `resume`: say so at
    once, even while a job that started before the pause still runs (a big folder's may run for minutes)."""
    pending = rt.dirs_to_do()[0] if within is None else rt.to_do_within(within)["pending_dirs"]
    if pending:  # whatever still runs: the directories queued will not start before `resume`
        raise RagdError(f"the agent is paused with {pending} director{'y' if pending == 1 else 'ies'} to do, "
                        "so it will not become idle", "run `ragctl resume`", code=p.UNAVAILABLE)  # fmt: skip
