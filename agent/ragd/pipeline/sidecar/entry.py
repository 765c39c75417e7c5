"""The `.ragjson` entry format (RAG-Storage-Spec v2.4, as the ragjson tool writes it): a file entry and its
chunks, lead and source as typed values, read from and written to JSON; the processing statuses; the spec's
timestamps and base64 vectors."""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from ..metadata import EntryMetadata

VERSION = "2.4"


DIR_ENTRY = {"ragjson_version": VERSION}


# processing.status values: the first seven of vocabulary.FileState
CHUNK_META_KEYS = ("start_index", "end_index", "start_line", "end_line", "heading_path", "page", "header")


def utc_stamp(ts: float | None = None) -> str:
    """`2026-11-30T16:30:32Z`, the spec's timestamp form."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(value: str) -> float | None:
    """Unix seconds of a `2026-11-30T16:30:32Z` stamp (None if it is not one)."""
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return None


def encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(data: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(data), dtype="<f4")


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """`source` of a file entry. mtime_ns/ctime_ns are ragd's optional extras (the ragjson tool omits them)."""

    file_name: str
    md5_hash: str
    size_bytes: int
    mtime: int
    inode: int
    mtime_ns: int | None = None
    ctime_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "file_name": self.file_name,
            "md5_hash": self.md5_hash,
            "size_bytes": self.size_bytes,
            "mtime": self.mtime,
            "inode": self.inode,
        }
        if self.mtime_ns is not None:
            data["mtime_ns"] = self.mtime_ns
            data["ctime_ns"] = self.ctime_ns
        return data


@dataclass(frozen=True)
class StoredChunk:
    content: str
    content_hash: str
    overlap_size: int = 0
    vector_base64: str | None = None  # None while the chunk is not embedded yet
    meta: Mapping[str, Any] = field(
        default_factory=dict
    )  # start_index, end_index, start_line, heading_path, ...

    @property
    def vector(self) -> np.ndarray | None:
        return None if self.vector_base64 is None else decode_vector(self.vector_base64)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content": self.content,
            "content_hash": self.content_hash,
            "overlap_size": self.overlap_size,
        }
        if self.vector_base64 is not None:
            data["vector_base64"] = self.vector_base64
        data.update({k: v for k, v in self.meta.items() if v is not None})
        return data


@dataclass(frozen=True)
class StoredLead:
    """`lead` of a file entry (ragd's optional extra): the document's lead text (lead.py), its md5 and its vector
    ("" when the text is: a document with no title nor prose has no lead to embed). The index holds the vector with
    each of the document's chunks for hybrid ranking (index/ranking/fusion.py)."""

    content: str
    content_hash: str
    vector_base64: str

    @property
    def vector(self) -> np.ndarray | None:
        return decode_vector(self.vector_base64) if self.vector_base64 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "content_hash": self.content_hash,
            "vector_base64": self.vector_base64,
        }

    @classmethod
    def from_json(cls, raw: object) -> StoredLead | None:
        """The lead a file entry holds; None for none, or for one of another shape (it is made again)."""
        if not isinstance(raw, dict):
            return None
        content, digest, vec = raw.get("content"), raw.get("content_hash"), raw.get("vector_base64")
        if not (isinstance(content, str) and isinstance(digest, str) and isinstance(vec, str)):
            return None
        if bool(vec) != bool(content):  # a text with no vector, or a vector of no text
            return None
        return cls(content, digest, vec)


@dataclass(frozen=True)
class FileEntry:
    status: str
    create_dt: str
    modify_dt: str
    source: SourceInfo
    model_name: str
    dimension: int
    chunks: tuple[StoredChunk, ...] = ()
    parser: str | None = None
    splitter: str | None = None
    split_revision: int | None = (
        None  # of ragd's parse/split rules (structure.SPLIT_REVISION) that made the chunks
    )
    error: Mapping[str, Any] | None = None
    ocr: Mapping[str, Any] | None = None  # what OCR did for the text (model.OcrReport.to_json)
    document_id: str | None = (
        None  # the document's identity, kept across renames and moves (pipeline/identity.py)
    )
    metadata: EntryMetadata | None = None  # the document's metadata fields (metadata.py, docs/metadata.md)
    lead: StoredLead | None = (
        None  # the document's lead and its vector (lead.py); None in another tool's entries
    )
    warning: str | None = None  # what was read with damage, e.g. "2 undecodable bytes replaced (U+FFFD)"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ragjson_version": VERSION,
            "processing": {"status": self.status, "create_dt": self.create_dt, "modify_dt": self.modify_dt},
            "source": self.source.to_json(),
            "embedding": {"model_name": self.model_name, "dimension": self.dimension},
            "chunks": [c.to_json() for c in self.chunks],
        }
        for key in ("parser", "splitter", "split_revision", "error", "ocr", "document_id", "warning"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.metadata is not None:
            data["metadata"] = self.metadata.to_json()
        if self.lead is not None:
            data["lead"] = self.lead.to_json()
        return data

    @property
    def all_vectors(self) -> bool:
        return all(c.vector_base64 is not None for c in self.chunks)

    def with_status(self, status: str, **changes: Any) -> FileEntry:
        return replace(self, status=status, modify_dt=utc_stamp(), **changes)


def _chunk_from_json(raw: Mapping[str, Any]) -> StoredChunk:
    meta = {k: raw[k] for k in CHUNK_META_KEYS if k in raw}
    vec = raw.get("vector_base64")
    return StoredChunk(
        content=raw["content"],
        content_hash=raw["content_hash"],
        overlap_size=int(raw.get("overlap_size", 0)),
        vector_base64=vec if isinstance(vec, str) and vec else None,
        meta=meta,
    )


def entry_from_json(data: Mapping[str, Any]) -> FileEntry | None:
    """A file entry, or None for a directory entry. Raises KeyError/TypeError/ValueError on malformed data."""
    if set(data) == {"ragjson_version"}:
        return None
    proc, src, emb = data["processing"], data["source"], data["embedding"]
    source = SourceInfo(
        file_name=src["file_name"],
        md5_hash=src["md5_hash"],
        size_bytes=int(src["size_bytes"]),
        mtime=int(src["mtime"]),
        inode=int(src["inode"]),
        mtime_ns=src.get("mtime_ns"),
        ctime_ns=src.get("ctime_ns"),
    )
    return FileEntry(
        status=proc["status"],
        create_dt=proc.get("create_dt", ""),
        modify_dt=proc.get("modify_dt", ""),
        source=source,
        model_name=emb["model_name"],
        dimension=int(emb["dimension"]),
        chunks=tuple(_chunk_from_json(c) for c in data.get("chunks") or ()),
        parser=data.get("parser"),
        splitter=data.get("splitter"),
        split_revision=_revision(data.get("split_revision")),
        error=data.get("error"),
        ocr=data["ocr"] if isinstance(data.get("ocr"), dict) else None,
        document_id=_document_id(data.get("document_id")),
        metadata=EntryMetadata.from_json(data.get("metadata")),
        lead=StoredLead.from_json(data.get("lead")),
        warning=data["warning"] if isinstance(data.get("warning"), str) else None,
    )


def _document_id(value: object) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def _revision(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def dumps(data: Mapping[str, Any]) -> bytes:
    """Indented UTF-8 JSON like the ragjson tool's (orjson: the stdlib encoder is pure Python when indenting)."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2)
