"""`orphans`: indexed sources whose file or live EMBEDDED sidecar is gone; with `clean`, removed from the index.

One implementation for ragctl, MCP (`ragd://orphans/`) and the offline `ragd orphans`: the check and the removal
run on the index writer (`rt.write`), so they never race a change note being applied.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from .. import access
from ..index.write.sync import IndexSync
from .arguments import Args, under_a_root
from .runtime import Runtime


class OrphansArgs(Args):
    path: str | None = None
    clean: bool = False


class OrphansResult(TypedDict):
    path: str | None  # the prefix asked for
    orphans: list[str]
    removed: int


def orphans(rt: Runtime, args: OrphansArgs | None = None) -> OrphansResult:
    args = args or OrphansArgs()
    rt.ready()
    if args.clean:
        access.require_full("removing orphans from the index (clean)")
    path = under_a_root(args.path, rt.roots)
    found = rt.write(lambda s: _find(s, path, args.clean)).result()
    found = access.scope().keep(
        found, lambda source: source, gone_ok=True
    )  # a gone file: its folder's listing
    return {"path": str(path) if path is not None else None, "orphans": found,
            "removed": len(found) if args.clean else 0}  # fmt: skip


def _find(sync: IndexSync, path: Path | None, clean: bool) -> list[str]:
    found = sync.orphans(path)  # None: every source (the index holds only sources under a root)
    if clean and found:
        for source in found:
            sync.index.delete_source(source)
        sync.flush()
    return found
