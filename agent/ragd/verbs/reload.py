"""`reload`: re-read the config file, as SIGHUP does; roots are added and removed at once, a broken file changes
nothing (and is reported as the error, naming the file and the key)."""

from __future__ import annotations

from typing import Any, TypedDict

from .pause import NoArgs
from .roots import listing
from .runtime import Resident


class Reloaded(TypedDict):
    added: list[str]
    removed: list[str]
    roots: list[dict[str, Any]]  # as `roots list` shows them


def reload(rt: Resident, args: NoArgs | None = None) -> Reloaded:
    changed = rt.host.reload()
    return {"added": changed["added"], "removed": changed["removed"], "roots": listing(rt)}
