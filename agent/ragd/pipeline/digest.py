"""A file entry's digest: what a directory job needs of an entry to decide that its file is unchanged and to report
it (status, the recorded stat and md5, the embedding identity, the chunk count, the error), without the chunks.

The stat cache (`statcache.py`) keeps digests so that an unchanged directory's job does not read and parse its
`.ragjson` files; a job that has work to do reads the full entries it needs (`sidecar.read_entry`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, overload

from .sidecar import FileEntry, SourceInfo
from .structure import needs_resplit


@dataclass(frozen=True, slots=True)
class Digest:
    status: str
    modify_dt: str
    source: SourceInfo
    model_name: str
    dimension: int
    chunk_count: int
    all_vectors: bool  # every chunk has a vector
    outdated: bool  # made by older parse/split rules that now split it differently (structure.needs_resplit)
    splitter: str | None = None
    parser: str | None = None
    split_revision: int | None = None
    error: Mapping[str, Any] | None = None
    document_id: str | None = None
    meta_basis: str | None = None  # the folder defaults and keys its metadata was made with (metadata.basis)
    has_lead: bool = False  # the entry holds its document's lead (lead.py)

    @classmethod
    def of(cls, entry: FileEntry, name: str) -> Digest:
        """The digest of the entry of the file `name`."""
        return cls(_shared(entry.status), entry.modify_dt, _source(entry.source, name), _shared(entry.model_name),
                   entry.dimension, len(entry.chunks), entry.all_vectors, outdated(entry, name),
                   _shared(entry.splitter), _shared(entry.parser), entry.split_revision, entry.error,
                   entry.document_id, _shared(entry.metadata.basis if entry.metadata else None),
                   entry.lead is not None)  # fmt: skip

    def to_json(self) -> list[Any]:
        s = self.source
        source = [s.file_name, s.md5_hash, s.size_bytes, s.mtime, s.inode, s.mtime_ns, s.ctime_ns]
        return [self.status, self.modify_dt, source, self.model_name, self.dimension, self.chunk_count,
                self.all_vectors, self.outdated, self.splitter, self.parser, self.split_revision,
                None if self.error is None else dict(self.error), self.document_id, self.meta_basis,
                self.has_lead]  # fmt: skip

    @classmethod
    def from_json(cls, raw: Any) -> Digest:
        """The digest `to_json` made (the stat cache checks its file whole: see statcache.py). Raises TypeError or
        ValueError on a record of another shape."""
        (
            status,
            modify_dt,
            src,
            model,
            dim,
            count,
            vectors,
            old,
            splitter,
            parser,
            revision,
            error,
            doc,
            basis,
            lead,
        ) = raw
        return cls(_shared(status), modify_dt, SourceInfo(*src), _shared(model), dim, count, vectors, old,
                   _shared(splitter), _shared(parser), revision, error, doc, _shared(basis),
                   bool(lead))  # fmt: skip


@overload
def _shared(text: str) -> str: ...
@overload
def _shared(text: None) -> None: ...
def _shared(text: str | None) -> str | None:
    """One copy of a string that every entry of a folder repeats (its status, model, splitter, parser, metadata
    basis), not one per entry: a job holds a digest for each file of its folder, 30,000 for a big one (issue 36).
    (An enum member, such as a status, is one object already.)"""
    return sys.intern(text) if type(text) is str else text


def _source(src: SourceInfo, name: str) -> SourceInfo:
    """`src`, its file name the very string `name` that keys the digest rather than a copy of it."""
    return replace(src, file_name=name) if src.file_name == name and src.file_name is not name else src


def outdated(entry: FileEntry | Digest, name: str) -> bool:
    """Chunks made by older parse/split rules that now differ (structure.needs_resplit)."""
    if isinstance(entry, Digest):
        return entry.outdated
    # generators: an entry of today's rules (the common case) is decided before any chunk is looked at
    paths = ([str(h) for h in p] for c in entry.chunks if isinstance(p := c.meta.get("heading_path"), list))
    first = entry.chunks[0].content if entry.chunks else ""
    texts = (c.content for c in entry.chunks)
    return needs_resplit(name, entry.parser, entry.split_revision, paths, first, texts)


def lacks_lead(entry: FileEntry | Digest) -> bool:
    """An entry ragd made (it names its parser), with chunks but no lead: of a ragd from before leads (lead.py)."""
    if isinstance(entry, Digest):
        return entry.parser is not None and entry.chunk_count > 0 and not entry.has_lead
    return entry.parser is not None and bool(entry.chunks) and entry.lead is None
