"""The MCP tools as plain functions over the running agent: arguments in, plain data out, RagdError on failure.

`app.py` registers them with the MCP SDK (schemas, annotations, error translation); nothing here imports it, so
the functions are testable and reusable without an MCP session. Every path a client names goes through
`paths.check_path` (inside a root, also after symlinks) and `paths.check_tracked` (not ignored by ragd), and a
scoped caller's through `access` (only files that caller can read: docs/access.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ragctl import protocol as p

from .. import access
from ..errors import RagdError
from ..paths import root_of
from ..resident.historydb import KINDS
from ..verbs import search as search_verb
from ..verbs import status as status_verb
from .documents import read_document_text, select_lines
from .paths import check_path, check_tracked

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

MAX_NEIGHBORS = 20


def resource_uri(kind: str, path: Path | str) -> str:
    """The URI of a ragd resource (resources.py): ragd://<kind>/<absolute path without its leading slash>."""
    return f"ragd://{kind}{quote(str(path), safe='/')}"


def search(rt: Resident, query: str, top_k: int = 5, path_prefix: str | None = None, mode: str = "hybrid",
           files: bool = False, scope: str = "agent", where: Sequence[str] = (),
           explain: bool = False) -> dict[str, Any]:  # fmt: skip
    """The control verb `search` (and `ragctl search --json`): {"results": [...]} (and "files" with `files`,
    "explain" with `explain`)."""
    args = search_verb.SearchArgs(query=query, top_k=top_k, path_prefix=[path_prefix] if path_prefix else [],
                                  mode=mode, files=files, scope=scope, where=list(where), explain=explain)  # type: ignore[arg-type]  # fmt: skip
    found = search_verb.search(rt, args)
    return {"results": found["results"], **{k: found[k] for k in ("files", "explain") if k in found}}


def query(rt: Resident, q: str, topn: int = 5, where: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The ragjson tool's `query`: a hybrid search shaped as [{content, source, score}]."""
    hits = search_verb.search(rt, search_verb.SearchArgs(query=q, top_k=topn, where=list(where)))["results"]
    return [{"content": r["content"], "source": r["path"], "score": r["score"]} for r in hits]


def read_document(
    rt: Resident, path: str, start_line: int | None = None, end_line: int | None = None
) -> dict[str, Any]:
    """A document's text (or a line range of it), as ragd indexes it; see documents.py for where it comes from."""
    rt.ready()
    safe = check_path(path, rt.roots)
    check_tracked(safe, rt.ignore)
    access.scope().check_readable(safe.path)
    text, source = read_document_text(safe.path, rt.config.limits.max_file_size)
    return {"path": str(safe.path), "root": str(safe.root), "source": source,
            **select_lines(text, start_line, end_line)}  # fmt: skip


def read_chunk(rt: Resident, path: str, chunk_index: int, neighbors: int = 0) -> dict[str, Any]:
    """Chunk `chunk_index` of a document from the index, with `neighbors` chunks on each side."""
    rt.ready()
    safe = check_path(path, rt.roots)
    check_tracked(safe, rt.ignore)
    access.scope().check_readable(safe.path)
    if not 0 <= neighbors <= MAX_NEIGHBORS:
        raise RagdError(f"neighbors must be from 0 to {MAX_NEIGHBORS}, not {neighbors}", code=p.BAD_REQUEST)
    hits = rt.reader().chunks(str(safe.path))
    if not hits:
        raise RagdError(f"{safe.path} has no chunks in the index",
                        "it may not be indexed yet (see `ragctl status`), or it is not a document ragd indexes",
                        code=p.NOT_FOUND)  # fmt: skip
    if not 0 <= chunk_index < len(hits):
        raise RagdError(f"{safe.path} has chunks 0 to {len(hits) - 1}, not {chunk_index}",
                        "take chunk_index from a search result", code=p.NOT_FOUND)  # fmt: skip
    lo, hi = max(0, chunk_index - neighbors), min(len(hits), chunk_index + neighbors + 1)
    return {
        "path": str(safe.path),
        "root": str(safe.root),
        "chunk_index": chunk_index,
        "chunk_count": len(hits),
        "chunks": [
            chunk_dict(h.chunk_index, h.content, h.heading_path, h.page, h.start_line, h.end_line)
            for h in hits[lo:hi]
        ],
    }


def chunk_dict(
    index: int, content: str, heading_path: Any, page: int | None, start_line: int, end_line: int
) -> dict[str, Any]:
    return {"chunk_index": index, "content": content, "heading_path": list(heading_path or ()),
            "page": page, "start_line": start_line, "end_line": end_line}  # fmt: skip


def inside_roots(rt: Resident, paths: Sequence[str]) -> list[str]:
    """The paths a client names (absolute, or relative to a root), each checked to lie inside a root."""
    return [str(check_path(path, rt.roots).path) for path in paths]


def status(rt: Resident) -> dict[str, Any]:
    """The agent's status, exactly as the control verb `status` (and `ragctl status --json`) reports it."""
    return dict(status_verb.snapshot(rt))


def recent_changes(rt: Resident, since_hours: float = 24.0, path_prefix: str | None = None,
                   limit: int = 100, kinds: Sequence[str] = KINDS) -> dict[str, Any]:  # fmt: skip
    """The documents that changed in the last `since_hours` (each once, its latest change), newest first, from
    the agent's history (resident/history.py: kept across restarts)."""
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
        "changes": [_change(rt, ev) for ev in list(latest.values())[:limit]],
        "truncated": more,
    }


def _change(rt: Resident, ev: Any) -> dict[str, Any]:
    path = Path(ev.path)
    root = root_of(path, rt.roots)
    return {"path": ev.path, "rel_path": str(path.relative_to(root)) if root else ev.path,
            "root": str(root) if root else None, "change": ev.kind, "directory": False,
            "at": _iso(ev.at), "reason": ev.detail, "uri": resource_uri("file", path),
            "document_id": ev.document_id, "old_path": ev.old_path}  # fmt: skip


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
