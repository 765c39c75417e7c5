"""The MCP tools as plain functions over the running agent: arguments in, plain data out, RagdError on failure.

`app.py` registers them with the MCP SDK (schemas, annotations, error translation); nothing here imports it, so
the functions are testable and reusable without an MCP session. Every path a client names goes through
`verbs/paths.check_path` (inside a root, also after symlinks) and `verbs/paths.check_tracked` (not ignored by ragd),
and a scoped caller's through `access` (only files that caller can read: docs/access.md); reading a document or a
chunk is the verbs' (verbs/documents.py), and so are the recent changes (verbs/changes.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragctl.protocol import TOP_K

from ..verbs import changes as changes_verb
from ..verbs import documents
from ..verbs import search as search_verb
from ..verbs import status as status_verb
from ..verbs.arguments import parse
from ..verbs.paths import check_path

if TYPE_CHECKING:
    from ..verbs.runtime import Resident


def search(rt: Resident, args: Mapping[str, Any]) -> dict[str, Any]:
    """The control verb `search` (and `ragctl search --json`) with the tool's arguments, by their names in
    docs/protocol.md (those left out, None, take their defaults): {"results": [...]} (and "files" with `files`,
    "explain" with `explain`)."""
    query = parse(search_verb.SearchQuery, {k: v for k, v in args.items() if v is not None})
    found = search_verb.search(rt, query)
    return {"results": found["results"], **{k: found[k] for k in ("files", "explain") if k in found}}


def query(rt: Resident, q: str, topn: int = TOP_K, where: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The ragjson tool's `query` (its names, `q` and `topn`, are that tool's): a hybrid search shaped as
    [{content, source, score}]."""
    asked = parse(search_verb.SearchQuery, {"query": q, "top_k": topn, "where": list(where)})
    hits = search_verb.search(rt, asked)["results"]
    return [{"content": r["content"], "source": r["path"], "score": r["score"]} for r in hits]


def read_document(
    rt: Resident, path: str, start_line: int | None = None, end_line: int | None = None
) -> dict[str, Any]:
    """The verb `documents.read_document`: a document's text, or a line range of it."""
    return documents.read_document(
        rt, documents.ReadDocumentArgs(path=path, start_line=start_line, end_line=end_line)
    )


def read_chunk(rt: Resident, path: str, chunk_index: int, neighbors: int = 0) -> dict[str, Any]:
    """The verb `documents.read_chunk`: an indexed chunk, with `neighbors` chunks on each side."""
    return documents.read_chunk(
        rt, documents.ReadChunkArgs(path=path, chunk_index=chunk_index, neighbors=neighbors)
    )


def inside_roots(rt: Resident, paths: Sequence[str]) -> list[str]:
    """The paths a client names (absolute, or relative to a root), each checked to lie inside a root."""
    return [str(check_path(path, rt.roots).path) for path in paths]


def status(rt: Resident) -> dict[str, Any]:
    """The agent's status, exactly as the control verb `status` (and `ragctl status --json`) reports it."""
    return dict(status_verb.snapshot(rt))


def recent_changes(
    rt: Resident, since_hours: float = 24.0, path_prefix: str | None = None, limit: int = 100
) -> dict[str, Any]:
    """The verb `changes.recent_changes`: each document changed in the last `since_hours` once, newest first."""
    return changes_verb.recent_changes(
        rt, changes_verb.RecentArgs(since_hours=since_hours, path_prefix=path_prefix, limit=limit)
    )
