"""`pause` and `resume`: stop and restart starting directory jobs (running ones finish; changes keep being noted)."""

from __future__ import annotations

from typing import Any

from .arguments import Args
from .runtime import Resident


class NoArgs(Args):
    pass


def pause(rt: Resident, args: NoArgs | None = None) -> dict[str, Any]:
    rt.scheduler.pause()
    return {"paused": True}


def resume(rt: Resident, args: NoArgs | None = None) -> dict[str, Any]:
    rt.scheduler.resume()
    return {"paused": False}
