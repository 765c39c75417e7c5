"""`roots list|add|remove`: the roots the agent watches; added and removed ones are kept in roots.json.

A root inside another root adds no files (they are already indexed under the outer one) and removing it removes
none; the reply's `notes` say so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal, TypedDict

from ragctl import protocol as p

from .. import access
from ..errors import RagdError
from ..paths import is_under, overlaps, root_problem
from .arguments import Args, absolute, bad
from .runtime import Resident

log = logging.getLogger(__name__)


class RootsArgs(Args):
    action: Literal["list", "add", "remove"] = "list"
    path: str | None = None


class RootsResult(TypedDict):
    roots: list[dict[str, Any]]  # {"path", "watcher", "source"(, "error")}
    notes: list[str]  # how the root added or removed nests with the others


def roots(rt: Resident, args: RootsArgs | None = None) -> RootsResult:
    args = args or RootsArgs()
    notes: list[str] = []
    if args.action != "list":
        access.require_full(f"roots {args.action}")
        if args.path is None:
            raise bad(f"roots {args.action} needs an absolute path")
        notes = change(rt, args.action, absolute(args.path))
    return {"roots": listing(rt), "notes": notes}


def listing(rt: Resident) -> list[dict[str, Any]]:
    def source(r: Path) -> str:  # where the root comes from: the config file, `ragd run DIR`, or `roots add`
        return "config" if r in rt.config.roots else "command line" if r in rt.cli_roots else "ragctl"

    out = [{"path": str(r), "watcher": rt.watch_mode(r), "source": source(r)} for r in rt.roots]
    out += [{"path": str(r), "watcher": "off", "source": source(r), "error": f"{r} {why}"}
            for r, why in rt.missing_roots.items()]  # fmt: skip
    return access.scope().keep(out, lambda r: r["path"], gone_ok=True)  # the roots a scoped caller can list


def change(rt: Resident, action: str, root: Path) -> list[str]:
    """Add or remove `root` (kept in roots.json); returns notes on how it nests with the other roots."""
    if action == "add":
        problem = root_problem(root)
        if problem is not None:
            hint = (
                "check its permissions"
                if problem.startswith("cannot be reached")
                else "create it first, or check the path"
            )
            raise RagdError(f"{root} {problem}", hint, code=p.NOT_FOUND)
        rt.embed.try_now()  # an embeddings API held down after an outage: tried with the new root's first texts
        rt.change_root_overlay(lambda overlay: overlay.add(root))  # roots.json, or the copy while it vanished
        notes = overlaps(root, rt.roots)
    else:
        if root not in rt.roots and root not in rt.missing_roots:
            raise RagdError(
                f"{root} is not a root of this agent", "see `ragctl roots list`", code=p.NOT_FOUND
            )
        configured = root in rt.configured_roots()
        rt.change_root_overlay(lambda overlay: overlay.remove(root, configured=configured))
        notes = [f"{root} is inside the root {r}: its files stay indexed" for r in rt.roots
                 if r != root and is_under(root, r)][:1]  # fmt: skip
    rt.set_roots(rt.resolve_roots())
    for note in notes:
        log.info("roots %s: %s", action, note)
    return notes
