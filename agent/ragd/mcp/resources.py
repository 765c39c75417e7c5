"""The MCP resources as plain functions over the running agent: the ragjson tool's server surface.

    ragd://dir/{+path}      a directory's documents and subdirectories with their state (ragd://dir/ : the roots)
    ragd://file/{+path}     a document's metadata from its .ragjson entry (state, chunks, md5, model, error)
    ragd://chunks/{+path}   a document's chunks from its .ragjson entry (content and citation fields, no vectors)
    ragd://orphans/{+path}  indexed sources under a directory whose file or sidecar is gone (ragd://orphans/ : all)

`{+path}` is an absolute path without its leading slash (`ragd://file/home/me/kb/a.md`), percent-encoded where
needed (space %20, `#` %23, `?` %3F, non-ASCII as UTF-8). Every path passes the same checks as the tools' paths.
Results are plain data; `app.py` serves them as JSON.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ragctl import protocol as p

from ..errors import RagdError, StorageError
from ..pipeline import sidecar
from ..pipeline.scan import list_dir
from .paths import SafePath, check_path, check_tracked, leads_inside
from .tools import chunk_dict, ready

if TYPE_CHECKING:
    from ..edges.lifecycle import Lifecycle
    from ..resident.agent import Agent

KINDS = ("dir", "file", "chunks", "orphans")


def uri(kind: str, path: Path | str) -> str:
    return f"ragd://{kind}{quote(str(path), safe='/')}"


def _checked(agent: Agent, raw: str) -> SafePath:
    safe = check_path("/" + raw.lstrip("/"), agent.roots)
    check_tracked(safe, agent.ignore)
    return safe


def directory(life: Lifecycle, raw: str) -> dict[str, Any]:
    agent = life.agent
    if not raw.strip("/"):
        return {"roots": [{"path": str(r), "uri": uri("dir", r), "watcher": agent.watcher.mode(r)}
                          for r in list(agent.roots)]}  # fmt: skip
    safe = _checked(agent, raw)
    if not safe.path.is_dir():
        raise RagdError(f"{safe.path} is not a directory", f"read ragd://file{safe.path} for a file",
                        code=p.NOT_FOUND)  # fmt: skip
    try:
        listing = list_dir(safe.path, agent.ignore)
    except OSError as err:
        raise RagdError(f"cannot list {safe.path}: {err.strerror or err}", code=p.FAILED) from None
    dirs = [{"name": d, "type": "dir", "uri": uri("dir", safe.path / d)} for d in listing.dirs]
    files = []
    for name in sorted(listing.files):
        path = safe.path / name
        if path.is_symlink() and not leads_inside(path, agent.roots):
            continue  # a link out of the roots: refused when read, so not offered either
        st = agent.tracker.file_state(path)
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


def file_info(life: Lifecycle, raw: str) -> dict[str, Any]:
    agent = life.agent
    safe = _checked(agent, raw)
    entry, deleted = _entry_or_fail(safe)
    tracked = agent.tracker.file_state(safe.path)
    indexed = None
    if agent.state != "starting" and hasattr(agent, "indexer") and not agent.rebuilding:
        summary = agent.indexer.index.sources(str(safe.path)).get(str(safe.path))
        indexed = {"chunks": summary.chunk_count, "md5": summary.source_md5} if summary else None
    return {
        "path": str(safe.path), "root": str(safe.root), "exists": safe.path.is_file(),
        "state": "DELETED" if deleted else entry.status, "chunks": len(entry.chunks),
        "md5": entry.source.md5_hash, "size_bytes": entry.source.size_bytes, "mtime": entry.source.mtime,
        "model": entry.model_name, "dimension": entry.dimension, "parser": entry.parser,
        "splitter": entry.splitter, "error": dict(entry.error) if entry.error else None,
        "create_dt": entry.create_dt, "modify_dt": entry.modify_dt,
        "retry_at": tracked.retry_at if tracked else None, "indexed": indexed,
        "chunks_uri": uri("chunks", safe.path),
    }  # fmt: skip


def file_chunks(life: Lifecycle, raw: str) -> dict[str, Any]:
    safe = _checked(life.agent, raw)
    entry, deleted = _entry_or_fail(safe)
    chunks = []
    for i, c in enumerate(entry.chunks):
        m = c.meta
        chunks.append(chunk_dict(i, c.content, m.get("heading_path"), m.get("page"),
                                 int(m.get("start_line") or 0), int(m.get("end_line") or 0)))  # fmt: skip
    return {"path": str(safe.path), "root": str(safe.root), "state": "DELETED" if deleted else entry.status,
            "chunks": chunks}  # fmt: skip


def orphans(life: Lifecycle, raw: str) -> dict[str, Any]:
    agent = ready(life)
    if not raw.strip("/"):
        found = [o for r in list(agent.roots) for o in agent.indexer.sync.orphans(r)]
        return {"path": None, "orphans": list(dict.fromkeys(found))}
    safe = check_path("/" + raw.lstrip("/"), agent.roots)  # a deleted directory is still a valid prefix
    if os.path.lexists(safe.path):
        check_tracked(safe, agent.ignore)
    return {"path": str(safe.path), "orphans": agent.indexer.sync.orphans(safe.path)}
