"""`pause` and `resume`: stop and restart starting directory jobs (running ones finish; changes keep being noted)."""

from __future__ import annotations

from typing import TypedDict

from .arguments import Args
from .runtime import Resident


class NoArgs(Args):
    pass


class Paused(TypedDict):
    paused: bool


def pause(rt: Resident, args: NoArgs | None = None) -> Paused:
    rt.scheduler.pause()
    return {"paused": True}


def resume(rt: Resident, args: NoArgs | None = None) -> Paused:
    rt.scheduler.resume()
    return {"paused": False}
