"""The MCP resources as plain functions over the running agent: the ragjson tool's server surface.

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
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragctl import protocol as p

from .. import access
from ..errors import RagdError, StorageError
from ..pipeline import sidecar
from ..pipeline.scan import list_dir
from ..verbs import orphans as orphans_verb
from .paths import SafePath, check_path, check_tracked, leads_inside
from .tools import chunk_dict, resource_uri

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

KINDS = ("dir", "file", "chunks", "orphans")


uri = resource_uri


def _checked(rt: Resident, raw: str) -> SafePath:
    safe = check_path("/" + raw.lstrip("/"), rt.roots)
    check_tracked(safe, rt.ignore)
    return safe


def directory(rt: Resident, raw: str) -> dict[str, Any]:
    scope = access.scope()
    if not raw.strip("/"):
        return {"roots": [{"path": str(r), "uri": uri("dir", r), "watcher": rt.watch_mode(r)}
                          for r in list(rt.roots) if scope.enterable(r)]}  # fmt: skip
    safe = _checked(rt, raw)
    if not scope.listable(safe.path):
        raise access.NotReadable(f"path refused: {safe.path} cannot be listed by {scope.caller.describe()}",
                                 "ragd lists only the folders you can list yourself")  # fmt: skip
    if not safe.path.is_dir():
        raise RagdError(f"{safe.path} is not a directory", f"read ragd://file{safe.path} for a file",
                        code=p.NOT_FOUND)  # fmt: skip
    try:
        listing = list_dir(safe.path, rt.ignore)
    except OSError as err:
        raise RagdError(f"cannot list {safe.path}: {err.strerror or err}", code=p.FAILED) from None
    dirs = [{"name": d, "type": "dir", "uri": uri("dir", safe.path / d)} for d in listing.dirs
            if scope.enterable(safe.path / d)]  # fmt: skip
    files = []
    for name in sorted(listing.files):
        path = safe.path / name
        if path.is_symlink() and not leads_inside(path, rt.roots):
            continue  # a link out of the roots: refused when read, so not offered either
        if not scope.readable(path):
            continue
        st = rt.tracker.file_state(path)
        files.append({"name": name, "type": "file", "size_bytes": listing.files[name].st_size,
                      "state": st.state if st else "PENDING", "reason": st.reason if st else "",
                      "uri": uri("file", path)})  # fmt: skip
    return {"path": str(safe.path), "root": str(safe.root), "entries": dirs + files}


def _entry(safe: SafePath) -> tuple[sidecar.FileEntry | None, bool]:
    """The file's sidecar entry (None if it has none) and whether that entry is a deleted one."""
    parent, name = safe.path.parent, safe.path.name
    try:
        live = sidecar.read_entry(sidecar.entry_path(parent, name))
        if live is not None:
            return live, False
    except StorageError as err:
        if sidecar.entry_path(parent, name).exists():
            raise RagdError(err.message, err.hint, code=p.FAILED) from None
    return sidecar.try_read(sidecar.entry_path(parent, name, deleted=True)), True


def _entry_or_fail(safe: SafePath) -> tuple[sidecar.FileEntry, bool]:
    entry, deleted = _entry(safe)
    if entry is None:
        if safe.path.is_dir():
            raise RagdError(f"{safe.path} is a directory", f"read ragd://dir{safe.path}", code=p.NOT_FOUND)
        why = "is not indexed yet (see `ragctl status`)" if safe.path.is_file() else "does not exist"
        raise RagdError(f"{safe.path} has no .ragjson entry: it {why}", code=p.NOT_FOUND)
    return entry, deleted


def file_info(rt: Resident, raw: str) -> dict[str, Any]:
    safe = _checked(rt, raw)
    access.scope().check_readable(safe.path)  # a deleted file, too: nobody can read it any more
    entry, deleted = _entry_or_fail(safe)
    tracked = rt.tracker.file_state(safe.path)
    indexed = None
    with contextlib.suppress(RagdError):  # the index is not open (starting, rebuilding): "indexed" stays null
        rt.ready()
        summary = rt.reader().sources(str(safe.path)).get(str(safe.path))
        indexed = {"chunks": summary.chunk_count, "md5": summary.source_md5} if summary else None
    return {
        "path": str(safe.path), "root": str(safe.root), "exists": safe.path.is_file(),
        "state": "DELETED" if deleted else entry.status, "chunks": len(entry.chunks),
        "md5": entry.source.md5_hash, "size_bytes": entry.source.size_bytes, "mtime": entry.source.mtime,
        "model": entry.model_name, "dimension": entry.dimension, "parser": entry.parser,
        "ocr": dict(entry.ocr) if entry.ocr else None, "splitter": entry.splitter, "error": dict(entry.error) if entry.error else None,
        "create_dt": entry.create_dt, "modify_dt": entry.modify_dt,
        "retry_at": tracked.retry_at if tracked else None, "indexed": indexed,
        "chunks_uri": uri("chunks", safe.path),
        "metadata": entry.metadata.to_json() if entry.metadata else None,
    }  # fmt: skip


def file_chunks(rt: Resident, raw: str) -> dict[str, Any]:
    safe = _checked(rt, raw)
    access.scope().check_readable(safe.path)
    entry, deleted = _entry_or_fail(safe)
    chunks = []
    for i, c in enumerate(entry.chunks):
        m = c.meta
        chunks.append(chunk_dict(i, c.content, m.get("heading_path"), m.get("page"),
                                 int(m.get("start_line") or 0), int(m.get("end_line") or 0)))  # fmt: skip
    return {"path": str(safe.path), "root": str(safe.root), "state": "DELETED" if deleted else entry.status,
            "chunks": chunks}  # fmt: skip


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
