"""A file entry's digest: what a directory job needs of an entry to decide that its file is unchanged and to report
it (status, the recorded stat and md5, the embedding identity, the chunk count, the error), without the chunks.

The stat cache (`statcache.py`) keeps digests so that an unchanged directory's job does not read and parse its
`.ragjson` files; a job that has work to do reads the full entries it needs (`sidecar.read_entry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .sidecar import FileEntry, SourceInfo
from .structure import needs_resplit


@dataclass(frozen=True)
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
        return cls(entry.status, entry.modify_dt, entry.source, entry.model_name, entry.dimension,
                   len(entry.chunks), entry.all_vectors, outdated(entry, name), entry.splitter, entry.parser,
                   entry.split_revision, entry.error, entry.document_id,
                   entry.metadata.basis if entry.metadata else None, entry.lead is not None)  # fmt: skip

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
        return cls(status, modify_dt, SourceInfo(*src), model, dim, count, vectors, old, splitter, parser,
                   revision, error, doc, basis, bool(lead))  # fmt: skip


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
