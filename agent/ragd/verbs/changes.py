"""`changes`: what happened to the documents (resident/history.py): events newest first, or one document's story.

With a `path` that names a document (one there now, or the last one deleted there) the answer is that document:
its identity, state, versions and events (all of them, at every path it had). With a folder (or no path: every
root) it is the events under it since `since`: a duration ("2d", "3h", "30m", "1w", "90s") or a UTC time
("2026-12-01", "2026-12-01T08:00:00Z"). The implementation of `ragctl changes`.

`recent_changes` answers MCP's tool of that name and the web page's list of changes: the documents that changed in
the last hours, each once (its latest change), newest first, `limit` documents rather than `limit` events.
"""

from __future__ import annotations

import calendar
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from pydantic import Field

from ragctl import protocol as p

from .. import access
from ..access.scope import Scope
from ..errors import RagdError
from ..paths import root_of
from ..resident.historydb import iso
from ..vocabulary import KINDS
from .arguments import Args, under_a_root
from .documents import resource_uri
from .paths import check_path
from .runtime import Resident

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


class ChangesArgs(Args):
    path: str | None = None  # a document, or a folder under a root (default: everything)
    since: str = "7d"  # a duration back from now, or a UTC date/time
    limit: int = Field(default=100, ge=1, le=10_000)
    kinds: list[str] = Field(default_factory=lambda: [str(k) for k in KINDS])


class ChangesResult(TypedDict, total=False):
    path: str | None
    since: str | None
    changes: list[dict[str, Any]]
    truncated: bool
    document: dict[str, Any]  # with a path naming a document: it, its versions


def since_seconds(raw: str, now: float | None = None) -> float:
    """The start of a period as epoch seconds, from "2d"-style durations or a UTC date/time."""
    now = time.time() if now is None else now
    match = _DURATION.match(raw)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    text = raw.strip().rstrip("Zz")
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
        try:
            return float(calendar.timegm(time.strptime(text, fmt)))
        except ValueError:
            continue
    raise RagdError(f"since: {raw!r} is neither a duration nor a date",
                    'use e.g. "2d", "3h", "30m", "1w" or "2026-12-01" (UTC)', code=p.BAD_REQUEST)  # fmt: skip


def changes(rt: Resident, args: ChangesArgs | None = None) -> ChangesResult:
    args = args or ChangesArgs()
    unknown = sorted(set(args.kinds) - set(KINDS))
    if unknown:
        raise RagdError(f"unknown kinds of change: {', '.join(unknown)}", f"known: {', '.join(KINDS)}",
                        code=p.BAD_REQUEST)  # fmt: skip
    start = since_seconds(args.since)
    path = under_a_root(args.path, rt.roots)
    history = rt.history
    seen = access.scope()  # a scoped caller (docs/access.md): only the events of paths it may see
    doc = history.document(path=str(path)) if path is not None else None
    if doc is not None and seen.visible(doc.path):
        events, more = history.changes(document_id=doc.id, kinds=args.kinds, limit=args.limit)
        events = seen.keep(events, lambda e: e.path, gone_ok=True)
        return {"path": str(path), "since": None, "changes": [event_json(rt, e, seen) for e in events],
                "truncated": more, "document": {**doc.to_json(), "versions": history.versions(doc.id)}}  # fmt: skip
    under = [str(path)] if path is not None else [str(r) for r in rt.roots]
    events, more = history.changes(since=start, under=under, kinds=args.kinds, limit=args.limit)
    events = seen.keep(events, lambda e: e.path, gone_ok=True)
    return {"path": str(path) if path is not None else None, "since": iso(start),
            "changes": [event_json(rt, e, seen) for e in events], "truncated": more}  # fmt: skip


def event_json(rt: Resident, event: Any, seen: Scope) -> dict[str, Any]:
    root = root_of(Path(event.path), rt.roots)
    rel = str(Path(event.path).relative_to(root)) if root is not None else event.path
    data = {**event.to_json(), "rel_path": rel, "root": str(root) if root is not None else None}
    if data["old_path"] and not seen.visible(data["old_path"]):
        data["old_path"] = None  # where it came from is not the caller's to see
    return data


class RecentArgs(Args):
    since_hours: float = 24.0
    path_prefix: str | None = None  # absolute, or relative to a root
    limit: int = 100  # documents
    kinds: tuple[str, ...] = KINDS


def recent_changes(rt: Resident, args: RecentArgs | None = None) -> dict[str, Any]:
    """The documents that changed in the last `since_hours` (each once, its latest change), newest first, from
    the agent's history (resident/history.py: kept across restarts)."""
    args = args or RecentArgs()
    since_hours, path_prefix, limit, kinds = args.since_hours, args.path_prefix, args.limit, args.kinds
    start = time.time() - since_hours * 3600
    under = [str(check_path(path_prefix, rt.roots).path)] if path_prefix else [str(r) for r in rt.roots]
    latest: dict[str, Any] = {}
    more, fetch = False, limit * 4
    while True:  # each document once: ask for more events until `limit` documents are found (or all are)
        events, truncated = rt.history.changes(since=start, under=under, kinds=kinds, limit=fetch)
        latest = {}
        for ev in events:
            latest.setdefault(ev.document_id, ev)
        if len(latest) > limit or not truncated or fetch >= 100_000:
            more = len(latest) > limit or truncated
            break
        fetch *= 4
    scope = access.scope()  # a scoped caller: the changes of files it may see
    if not scope.full:
        kept = scope.keep(latest.values(), lambda ev: ev.path, gone_ok=True)
        more = more or len(latest) > len(kept)
        latest = {ev.document_id: ev for ev in kept}
    return {
        "since": _iso(start),
        "agent_started": _iso(rt.started),
        "changes": [_change(rt, ev, scope) for ev in list(latest.values())[:limit]],
        "truncated": more,
    }


def _change(rt: Resident, ev: Any, seen: Scope) -> dict[str, Any]:
    path = Path(ev.path)
    old_path = ev.old_path if ev.old_path and seen.visible(ev.old_path) else None  # as `changes` (event_json)
    root = root_of(path, rt.roots)
    return {"path": ev.path, "rel_path": str(path.relative_to(root)) if root else ev.path,
            "root": str(root) if root else None, "change": ev.kind, "directory": False,
            "at": _iso(ev.at), "reason": ev.detail, "uri": resource_uri("file", path),
            "document_id": ev.document_id, "old_path": old_path}  # fmt: skip


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
