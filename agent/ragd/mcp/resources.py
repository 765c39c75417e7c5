"""The MCP resources as plain functions over the verbs (verbs/): the ragjson tool's server surface.

    ragd://dir/{+path}      a directory's documents and subdirectories with their state (ragd://dir/ : the roots)
    ragd://file/{+path}     a document's metadata from its .ragjson entry (state, chunks, md5, model, error)
    ragd://chunks/{+path}   a document's chunks from its .ragjson entry (content and citation fields, no vectors)
    ragd://orphans/{+path}  indexed sources under a directory whose file or sidecar is gone (ragd://orphans/ : all)

`{+path}` is an absolute path without its leading slash (`ragd://file/home/me/kb/a.md`), percent-encoded where
needed (space %20, `#` %23, `?` %3F, non-ASCII as UTF-8). Every path passes the same checks as the tools' paths.
A scoped caller (docs/access.md) reads only files it can read and lists only directories it can list, and their
entries it may see. Results are plain data; `app.py` serves them as JSON.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragctl import protocol as p

from .. import access
from ..errors import RagdError
from ..verbs import browse
from ..verbs import documents as documents_verb
from ..verbs import orphans as orphans_verb
from ..verbs.documents import resource_uri
from ..verbs.paths import check_path, check_tracked

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

KINDS = ("dir", "file", "chunks", "orphans")


uri = resource_uri


def directory(rt: Resident, raw: str) -> dict[str, Any]:
    """ragd://dir/{+path}: the `browse` verb."""
    return browse.browse(rt, browse.BrowseArgs(path=raw))


def file_info(rt: Resident, raw: str) -> dict[str, Any]:
    """ragd://file/{+path}: the verb `documents.file_info`."""
    return documents_verb.file_info(rt, documents_verb.FileArgs(path=raw))


def file_chunks(rt: Resident, raw: str) -> dict[str, Any]:
    """ragd://chunks/{+path}: the verb `documents.file_chunks`."""
    return documents_verb.file_chunks(rt, documents_verb.FileArgs(path=raw))


def orphans(rt: Resident, raw: str) -> dict[str, Any]:
    """The `orphans` verb, for every root (ragd://orphans/) or under a path (a deleted one is a valid prefix)."""
    if not raw.strip("/"):
        found = orphans_verb.orphans(rt)
    else:
        safe = check_path("/" + raw.lstrip("/"), rt.roots)
        if os.path.lexists(safe.path):
            check_tracked(safe, rt.ignore)
        found = orphans_verb.orphans(rt, orphans_verb.OrphansArgs(path=str(safe.path)))
    return {"path": found["path"], "orphans": found["orphans"]}


def documents(rt: Resident, cursor: str | None, limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """One page of `resources/list`: every document the agent knows under its roots, as `ragd://file/…`
    resources in a stable order, and the cursor of the next page (None after the last). The cursor is the last
    path of the page (opaque to clients); a page that starts after it stays right while files come and go."""
    after = None
    if cursor is not None:
        try:
            after = Path(base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8"))
        except (ValueError, UnicodeError):
            raise RagdError(f"invalid cursor {cursor[:60]!r}", "start again without a cursor",
                            code=p.BAD_REQUEST) from None  # fmt: skip
        if not after.is_absolute():
            raise RagdError(
                f"invalid cursor {cursor[:60]!r}", "start again without a cursor", code=p.BAD_REQUEST
            )
    found, more = _readable_files(rt, after, limit)
    page = []
    for path, st in found:
        root = next((r for r in rt.roots if path.is_relative_to(r)), None)
        name = str(path.relative_to(root)) if root is not None else str(path)
        page.append({"uri": uri("file", path), "name": name, "title": path.name, "state": st.state})
    next_cursor = None
    if more and found:
        next_cursor = base64.urlsafe_b64encode(str(found[-1][0]).encode("utf-8")).decode("ascii")
    return page, next_cursor


def _readable_files(rt: Resident, after: Path | None, limit: int) -> tuple[list[tuple[Path, Any]], bool]:
    """Up to `limit` documents after `after` that the caller can read (all of them for an unrestricted caller),
    and whether more follow."""
    scope = access.scope()
    found, more = rt.tracker.files(after, limit)
    if scope.full:
        return found, more
    kept = scope.keep(found, lambda item: item[0])
    while more and found and len(kept) < limit:
        found, more = rt.tracker.files(found[-1][0], limit)
        kept += scope.keep(found, lambda item: item[0])
    return kept[:limit], more or len(kept) > limit
