"""The index's interface: the backend protocol, its value types, and where a collection lives.

It imports no storage engine, so importing it is cheap. The implementations are `zvec.backend.ZvecIndex` (an
embedded zvec collection, the default) and `milvus.backend.MilvusIndex` (a Milvus server or Milvus Lite), opened
through `factory.open_index`.

Layout: one collection per embedding fingerprint, at `<data_dir>/index/<collection_name(identity)>/`, so vectors
of different models, dimensions or splitter settings are never mixed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..model import EmbeddingIdentity
from .where import Where

# Bump when the collection's fields, or how its text is cut into words, change: a new version is a new collection,
# filled from the sidecars. 3: Chinese cut with ragd's trimmed jieba dictionary (jiebadict.py). 4: document metadata
# (`meta_terms` for filters, `metadata` for results: where.py). 5: the keyword index moved out of zvec into tantivy
# beside the collection (keywords.py); `fts_text` is a plain field. 6: `lead`, the vector of the document's lead on
# each of its chunks (hybrid.py). 7: the vectors in half precision (zvec/schema.py, VECTOR_TYPE).
SCHEMA_VERSION = 7
# A Milvus collection's name keeps the version whose fields it has (6): version 7 changed only the zvec collection,
# and a new name would leave every agent sharing a server to fill a new collection.
MILVUS_SCHEMA_VERSION = 6
MAX_K = 100  # the largest number of hits one query returns
BUSY_HINT = "stop the other process, or talk to the running agent with `ragctl`"  # an index held elsewhere


@dataclass(frozen=True)
class IndexChunk:
    """One chunk to store. `header` (file name, title, heading path) is indexed for keywords with `content`."""

    source_path: str
    chunk_index: int
    content: str
    content_hash: str
    header: str
    vector: np.ndarray
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    start_line: int = 0
    end_line: int = 0


@dataclass(frozen=True)
class SourceWrite:
    """What the index should hold for one source: exactly `chunks` (none: the source is removed).

    `held`: how many chunks the index holds for it now, numbered 0..held-1, when the caller knows (from `sources()`,
    which lists the index itself); None lets the backend look it up from the record its last write left.
    """

    source_path: str
    source_md5: str
    root: str
    chunks: Sequence[IndexChunk]
    held: int | None = None
    metadata: Mapping[str, Sequence[str]] = field(default_factory=dict)  # the document's fields (where.py)
    lead: np.ndarray | None = None  # the vector of the document's lead (pipeline/lead.py), held by each chunk


@dataclass(frozen=True, slots=True)  # a verification pass holds one for every source of the index
class SourceSummary:
    """What the index holds for one source file.

    `source_md5` is "" when the source's chunks disagree (a write interrupted by a crash): such a source never
    matches its sidecar, so reconciliation rewrites it.
    """

    source_path: str
    source_md5: str
    chunk_count: int


@dataclass(frozen=True)
class Hit:
    """One query result. `score`: cosine similarity (vector only), BM25 (keyword only) or RRF (hybrid)."""

    source_path: str
    chunk_index: int
    score: float
    content: str
    heading_path: tuple[str, ...]
    page: int | None
    start_line: int
    end_line: int
    root: str = ""
    source_chunks: int = 1  # how many chunks its document has (hybrid ranking weighs a document's size)
    agent: str = ""  # on a shared index (Milvus): the agent whose machine holds the file
    metadata: Mapping[str, Any] = field(default_factory=dict)  # its document's fields (model.fields_json)
    lead: str = ""  # its document's lead vector as stored (records.encode_lead; "" for none): hybrid ranking


class IndexBackend(Protocol):
    """A store of chunks keyed by (source_path, chunk_index). One writer; queries may run in other threads."""

    @property
    def path(self) -> Path: ...

    @property
    def needs_optimize(self) -> bool:
        """True once enough documents were written since the last `optimize()` (IndexConfig.optimize_after)."""
        ...

    def replace_source(
        self, source_path: str, source_md5: str, root: str, chunks: Sequence[IndexChunk]
    ) -> None:
        """Make the index hold exactly `chunks` for `source_path` (old chunks beyond the new count are removed)."""
        ...

    def write_sources(self, writes: Sequence[SourceWrite]) -> None:
        """Make the index hold exactly each write's chunks for its source, many sources at once.

        Cheaper than `replace_source` per source (no lookup for sources the caller knows, batched deletes and
        upserts), and recoverable: a crash part way leaves nothing a repeat of the same writes does not fix.
        Fails before writing anything when a write's input is invalid.
        """
        ...

    def delete_source(self, source_path: str) -> int:
        """Remove every chunk of one source; returns how many were removed."""
        ...

    def delete_subtree(self, dir_path: str) -> int:
        """Remove every chunk of sources below the directory `dir_path` (never of siblings such as `dir_path_x`, nor
        of a source at `dir_path` itself: a file that replaced the folder, applied before the folder's deletion)."""
        ...

    def sources(self, prefix: str | None = None) -> dict[str, SourceSummary]:
        """Every indexed source, or those at or below the path `prefix`, with their md5 and chunk count."""
        ...

    def chunks(self, source_path: str) -> list[Hit]:
        """The stored chunks of one source, in chunk order (score 0)."""
        ...

    def query(
        self,
        *,
        vector: np.ndarray | None,
        text: str | None,
        k: int,
        path_prefixes: Sequence[str] = (),
        extensions: Sequence[str] = (),
        scope: str = "agent",
        where: Sequence[Where] = (),
    ) -> list[Hit]:
        """Top-k hits by vector, by keywords (`text` is raw user text) or both fused with RRF, of the documents
        whose metadata matches every `where` filter.

        `scope`: "agent" searches this agent's files, "all" every agent's on a shared index (Milvus; an index of
        one agent holds only its own)."""
        ...

    def count(self) -> int: ...

    def flush(self) -> None:
        """Make the writes so far durable."""
        ...

    def optimize(self) -> None:
        """Build the vector/keyword indexes over recent writes. Writes wait while it runs; queries do not."""
        ...

    @property
    def needs_compaction(self) -> bool:
        """True once the collection's flushes have piled up enough blocks that it should be rewritten as one."""
        ...

    @property
    def needs_compaction_busy(self) -> bool:
        """True once the flushes of a long stream of writes (a big folder's job) have piled up so many blocks that
        it should be rewritten as one now, without waiting for a pause."""
        ...

    def compact(self) -> int:
        """Rewrite the collection as one block (writes wait; queries go on between its steps): blocks folded."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def health(self) -> dict[str, Any]:
        """Which backend, and for a remote one whether it answers (`reachable`, `last_error`, `retry_in_s`)."""
        ...

    @property
    def resting(self) -> bool:
        """Closed by `rest` until its next use."""
        ...

    def idle_s(self) -> float:
        """Seconds since the index was last used."""
        ...

    def rest(self) -> bool:
        """Give back the memory of an index nothing uses (its next use opens it again). True if it did."""
        ...

    def give_back_pages(self) -> int:
        """Take the pages of the index's mapped files out of the process's resident set (they stay in the page
        cache; ragd/mapped.py): bytes advised, 0 for an index that maps none."""
        ...

    def close(self) -> None: ...


def collection_name(identity: EmbeddingIdentity, schema: int = SCHEMA_VERSION) -> str:
    """A directory name for the identity's collection: readable, file-system safe and unique per fingerprint."""
    fingerprint = identity.fingerprint
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", fingerprint).strip("._-")[:80]
    digest = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:10]
    return f"v{schema}-{readable}-{digest}"


def collection_dir(data_dir: Path, identity: EmbeddingIdentity) -> Path:
    return Path(data_dir) / "index" / collection_name(identity)
