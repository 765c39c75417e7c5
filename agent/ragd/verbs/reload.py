"""`reload`: re-read the config file, as SIGHUP does; roots are added and removed at once, a broken file changes
nothing (and is reported as the error, naming the file and the key)."""

from __future__ import annotations

from typing import Any

from .pause import NoArgs
from .roots import listing
from .runtime import Resident


def reload(rt: Resident, args: NoArgs | None = None) -> dict[str, Any]:
    """{"added": [...], "removed": [...], "roots": the roots as `roots list` shows them}."""
    changed = rt.host.reload()
    return {**changed, "roots": listing(rt)}
