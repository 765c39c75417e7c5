"""Reading one document: its text or a line window of it (`read_document`), an indexed chunk with its neighbours
(`read_chunk`), its sidecar facts (`file_info`) and its chunks as the sidecar holds them (`file_chunks`).

One implementation for MCP (the tools `read_document` and `read_chunk`, the resources `ragd://file/` and
`ragd://chunks/`) and the web page's document view. Every path a caller names goes through `paths.check_path`
(inside a root, also after symlinks) and `paths.check_tracked` (not ignored by ragd), and a scoped caller's
through `access` (only files that caller can read: docs/access.md). Where the text comes from: document_text.py.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ragctl import protocol as p

from .. import access
from ..errors import RagdError, StorageError
from ..pipeline import sidecar
from ..vocabulary import FileState
from .arguments import Args
from .document_text import read_document_text, select_lines
from .paths import SafePath, check_path, check_tracked
from .runtime import Resident

MAX_NEIGHBORS = 20


class ReadDocumentArgs(Args):
    path: str  # absolute, or relative to a root (as in search results)
    start_line: int | None = None  # first line (1-based); default 1
    end_line: int | None = None  # last line (inclusive); default the end


class ReadChunkArgs(Args):
    path: str  # absolute, or relative to a root
    chunk_index: int
    neighbors: int = 0  # chunks to add on each side


class FileArgs(Args):
    path: str  # absolute (a missing leading slash is added: a resource URI's `{+path}`)


def resource_uri(kind: str, path: Path | str) -> str:
    """The URI of a ragd resource (mcp/resources.py): ragd://<kind>/<absolute path without its leading slash>."""
    return f"ragd://{kind}{quote(str(path), safe='/')}"


def read_document(rt: Resident, args: ReadDocumentArgs) -> dict[str, Any]:
    """A document's text (or a line range of it), as ragd indexes it; see document_text.py for where it comes
    from."""
    rt.ready()
    safe = check_path(args.path, rt.roots)
    check_tracked(safe, rt.ignore)
    access.scope().check_readable(safe.path)
    text, source = read_document_text(safe.path, rt.config.limits.max_file_size)
    return {"path": str(safe.path), "root": str(safe.root), "source": source,
            **select_lines(text, args.start_line, args.end_line)}  # fmt: skip


def read_chunk(rt: Resident, args: ReadChunkArgs) -> dict[str, Any]:
    """Chunk `chunk_index` of a document from the index, with `neighbors` chunks on each side."""
    chunk_index, neighbors = args.chunk_index, args.neighbors
    rt.ready()
    safe = check_path(args.path, rt.roots)
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


def checked(rt: Resident, raw: str) -> SafePath:
    """An absolute path (its leading slash added if missing) inside a root, and tracked."""
    safe = check_path("/" + raw.lstrip("/"), rt.roots)
    check_tracked(safe, rt.ignore)
    return safe


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


def file_info(rt: Resident, args: FileArgs) -> dict[str, Any]:
    """A document's facts from its .ragjson entry (a deleted one's too): state, chunks, md5, model, error, what
    the index holds of it, its metadata."""
    safe = checked(rt, args.path)
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
        "state": FileState.DELETED if deleted else entry.status, "chunks": len(entry.chunks),
        "md5": entry.source.md5_hash, "size_bytes": entry.source.size_bytes, "mtime": entry.source.mtime,
        "model": entry.model_name, "dimension": entry.dimension, "parser": entry.parser,
        "ocr": dict(entry.ocr) if entry.ocr else None, "splitter": entry.splitter, "error": dict(entry.error) if entry.error else None,
        "create_dt": entry.create_dt, "modify_dt": entry.modify_dt,
        "retry_at": tracked.retry_at if tracked else None, "indexed": indexed,
        "chunks_uri": resource_uri("chunks", safe.path),
        "metadata": entry.metadata.to_json() if entry.metadata else None,
    }  # fmt: skip


def file_chunks(rt: Resident, args: FileArgs) -> dict[str, Any]:
    """A document's chunks from its .ragjson entry: content and citation fields, no vectors."""
    safe = checked(rt, args.path)
    access.scope().check_readable(safe.path)
    entry, deleted = _entry_or_fail(safe)
    chunks = []
    for i, c in enumerate(entry.chunks):
        m = c.meta
        chunks.append(chunk_dict(i, c.content, m.get("heading_path"), m.get("page"),
                                 int(m.get("start_line") or 0), int(m.get("end_line") or 0)))  # fmt: skip
    return {"path": str(safe.path), "root": str(safe.root), "state": FileState.DELETED if deleted else entry.status,
            "chunks": chunks}  # fmt: skip
