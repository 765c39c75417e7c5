"""IndexBackend on an embedded zvec 0.8 collection (facts relied on here are measured in docs/zvec-notes.md).

Concurrency: zvec allows one writer or many readers per collection, across processes (a `flock` on `<dir>/LOCK`;
a second open raises IndexBusy). Within the process, zvec 0.8.0 with its default query thread pool deadlocked
when a write or an optimize ran beside two or more queries; with one query thread (`collection._ensure_init`) it did
not in stress runs. Writes and optimize take the write lock *and* the readers-writer lock exclusively (one writer
or many readers, as zvec documents), and queries share the readers-writer lock: searches wait for an optimize
(HNSW only; a flat collection is compacted instead, between whose steps searches go on). On a collection of several
segments (after an optimize) queries side by side still hung now and then under load, so there they run one at a
time (`ReadWriteLock.serial`).

Here: opening, writes, optimize and compaction, rest, close; the reads are in reads.py (the base class).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import zvec

from ...config import IndexConfig
from ...errors import IndexError_
from ...model import EmbeddingIdentity
from ..backend import IndexChunk, SourceWrite
from ..keyword.keywords import KeywordDoc, KeywordIndex, open_keywords
from ..records import encode_lead, extension, metadata_columns
from . import collection as zvec_open
from . import filters as F
from . import health, scan
from .collection import Resting, check_statuses, open_collection, zvec_errors
from .reads import ZvecReads
from .rwlock import ReadWriteLock
from .schema import (
    EMBEDDING,
    FTS_TEXT,
    META_TERMS,
    SOURCE_CHUNKS,
    SOURCE_PATH,
    check_text,
    doc_id,
    to_doc,
    vector_param,
)

log = logging.getLogger(__name__)

MAX_BATCH = 1024  # zvec 0.8 accepts at most 1024 documents per insert/upsert call
COMPACT_BLOCKS = 64  # a flat collection is compacted once its flushes have made this many blocks (~90 MB) ...
DOCS_PER_BLOCK = 1000  # ... or, if more, one per this many documents (100k: 100 blocks, ~140 MB)
COMPACT_BATCH = 256  # documents copied per step of a compaction (searches wait for one step at most)


class ZvecIndex(ZvecReads):
    def __init__(
        self,
        coll: zvec.Collection,
        keywords: KeywordIndex | None,
        path: Path,
        identity: EmbeddingIdentity,
        cfg: IndexConfig,
        read_only: bool,
    ) -> None:
        self._coll: zvec.Collection | None = coll
        self._kw = keywords  # None while resting or closed
        self._path = path
        self._identity = identity
        self._cfg = cfg
        self._read_only = read_only
        self._write_lock = threading.RLock()  # one writer at a time; optimize holds it too
        self._rw = ReadWriteLock()  # queries share it; writes take it alone
        # zvec 0.8 queries side by side on an optimized (several-segment) collection hung now and then under load:
        # there they run one at a time (docs/zvec-notes.md)
        self._rw.serial = zvec_open.segment_count(path) > 1
        self._written = 0  # documents written since open or the last optimize()
        self._used = time.monotonic()  # the last use of the collection
        self._rest: Resting | None = None  # while resting: closed until the next use (`rest`)
        self._waking = threading.Lock()

    # -- opening ------------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls, path: Path, identity: EmbeddingIdentity, cfg: IndexConfig, *, read_only: bool = False
    ) -> ZvecIndex:
        path = Path(path)
        coll = open_collection(path, identity, cfg, read_only)
        try:
            kw = open_keywords(path, read_only=read_only)
            index = cls(coll, kw, path, identity, cfg, read_only)
            if not read_only:
                index._repair_keywords()
        except BaseException:
            with contextlib.suppress(Exception):
                coll.close()
            raise
        return index

    def _repair_keywords(self) -> None:
        """Bring the keyword index level with the collection after a crash (keywords.py): the sources its journal
        names read back from zvec; the whole of it rebuilt when its document count differs."""
        kw, coll = self._keywords(), self._live()
        if pending := kw.pending():
            log.warning("the keyword index missed the last writes to %d sources or folders; reading them back "
                        "from the index", len(pending))  # fmt: skip
            with zvec_errors("scan", self._path):
                missed = [d for p in pending for d in self._keyword_docs(coll, p)]  # small: the last write's
            kw.write(folders=pending, docs=missed)
        documents = int(coll.stats.doc_count)
        if kw.documents() != documents:
            if kw.documents():
                log.warning("the keyword index at %s holds %d chunks, the index %d: rebuilding it from the index",
                            kw.path, kw.documents(), documents)  # fmt: skip
            else:
                log.info("making the keyword index at %s from the index (%d chunks)", kw.path, documents)
            with zvec_errors("scan", self._path):
                docs = self._keyword_docs(coll, None)
            kw.clear()
            kw.write(docs=docs)

    def _keyword_docs(self, coll: zvec.Collection, under: str | None) -> Iterator[KeywordDoc]:
        """The keyword documents of every chunk at or below `under` (all when None), from the collection: its rows
        read now, each turned into a keyword document as it is consumed (one copy of the texts in memory)."""
        flt = F.under(SOURCE_PATH, under) if under is not None else None
        rows = scan.rows(coll, flt, [SOURCE_PATH, FTS_TEXT, META_TERMS], seal_ok=self._read_only)
        return (
            keyword_doc(d.id, d.fields)
            for d in rows
            if under is None or F.is_under(str(d.fields.get(SOURCE_PATH, "")), under)
        )

    def _keywords(self) -> KeywordIndex:
        self._live()  # wakes a resting index
        assert self._kw is not None
        return self._kw

    # -- properties ---------------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    def _live(self) -> zvec.Collection:
        self._used = time.monotonic()
        if self._coll is None:
            if self._rest is None:
                raise IndexError_(f"the index at {self._path} is closed", "reopen it")
            self._wake()
            assert self._coll is not None
        return self._coll

    def _writable(self) -> zvec.Collection:
        if self._read_only:
            raise IndexError_(f"the index at {self._path} is open read-only", "writes go through the agent")
        return self._live()

    def count(self) -> int:
        with self._rw.reading():
            if (rest := self._rest) is not None:
                return rest.documents  # nothing wrote since it was closed: a write would have woken it
            return int(self._live().stats.doc_count)

    def _pending(self) -> int:
        stats = self._live().stats
        completeness = min(stats.index_completeness.values(), default=1.0)
        return max(self._written, round(stats.doc_count * (1.0 - completeness)))

    def _current_type(self) -> str:
        """The collection's vector index: "flat" or "hnsw"."""
        vector = self._live().schema.vector(EMBEDDING)
        return "hnsw" if vector is not None and vector.index_param.type == vector_param(self._cfg, "hnsw").type \
            else "flat"  # fmt: skip

    def _wanted_type(self) -> str:
        """The vector index the collection should have: the configured one, or ("auto") HNSW from
        IndexConfig.hnsw_after chunks on (and back to flat only below half of that, so that it does not flap)."""
        if self._cfg.type != "auto":
            return self._cfg.type
        documents = int(self._live().stats.doc_count)
        floor = self._cfg.hnsw_after // 2 if self._current_type() == "hnsw" else self._cfg.hnsw_after
        return "hnsw" if documents >= floor else "flat"

    def _index_type_differs(self) -> bool:
        return self._current_type() != self._wanted_type()

    @property
    def needs_optimize(self) -> bool:
        """HNSW: once IndexConfig.optimize_after documents await the graph (they are searched exactly meanwhile).
        A flat index is never optimized (it is compacted: `needs_compaction`), and a change of index type is made
        by a compaction too, on a copy, while searches go on."""
        with self._rw.reading():
            if self._read_only or self._current_type() != "hnsw" or self._index_type_differs():
                return False
            return self._pending() >= self._cfg.optimize_after

    @property
    def segments(self) -> int:
        """Segment directories on disk (zvec's layout: numbered directories; the writing segment is one)."""
        return zvec_open.segment_count(self._path)

    def stats(self) -> dict[str, Any]:
        needs_optimize = self.needs_optimize
        with self._rw.reading():
            coll = self._live()
            vector = coll.schema.vector(EMBEDDING)
            return {
                "path": str(self._path),
                "documents": int(coll.stats.doc_count),
                "pending": self._pending(),
                "needs_optimize": needs_optimize,
                "fingerprint": self._identity.fingerprint,
                "dimension": self._identity.dimension,
                "read_only": self._read_only,
                "index_type": str(vector.index_param.type.name).lower() if vector else "",
                "configured_type": self._cfg.type,
                "wanted_type": self._wanted_type(),
                "segments": self.segments,
                "blocks": self.blocks,
            }

    def health(self) -> dict[str, Any]:
        return {"backend": "zvec", "reachable": True}

    # -- writes: one at a time (write lock), and never beside a query (zvec 0.8 deadlocks) ----------------------
    @contextlib.contextmanager
    def _exclusive(self, op: str) -> Iterator[zvec.Collection]:
        with self._write_lock, self._rw.writing(), zvec_errors(op, self._path):
            yield self._writable()

    def replace_source(
        self, source_path: str, source_md5: str, root: str, chunks: Sequence[IndexChunk]
    ) -> None:
        self.write_sources([SourceWrite(source_path, source_md5, root, chunks)])

    def write_sources(self, writes: Sequence[SourceWrite]) -> None:
        """Per source: delete its chunks past the new count, then upsert the new ones, chunk 0 first.

        What a source holds comes from the caller (`held`) or from `source_chunks` of its chunk 0: one fetch by id
        for many sources, not a filtered query per source (whose cost grew with the collection: docs/benchmarks.md).
        The order keeps that record true whatever prefix of these calls a crash leaves: every stale chunk is
        deleted (highest first, chunk 0 last) before chunk 0 is rewritten with the new count, so no chunk lies
        past its chunk 0's count and none is left without its chunk 0.
        """
        last = {w.source_path: w for w in writes}  # a source written twice: the last write wins
        docs = [doc for w in last.values() for doc in self._docs(w)]  # all checked before anything is written
        with self._exclusive("write") as coll:
            kw = self._keywords()
            kw.begin(last)
            held = self._held(coll, list(last.values()))
            stale = [
                doc_id(w.source_path, i)
                for w in last.values()
                for i in range(held[w.source_path] - 1, len(w.chunks) - 1, -1)
            ]
            for start in range(0, len(stale), MAX_BATCH):
                statuses = coll.delete(stale[start : start + MAX_BATCH])
                check_statuses(
                    statuses, "delete", self._path, missing_ok=True
                )  # gone: a repeat after a crash
            for start in range(0, len(docs), MAX_BATCH):
                check_statuses(coll.upsert(docs[start : start + MAX_BATCH]), "upsert", self._path)
            self._written += len(docs) + len(stale)
            kw.write(sources=last, docs=[keyword_doc(d.id, d.fields) for d in docs])

    def _docs(self, w: SourceWrite) -> list[zvec.Doc]:
        check_text(w.source_path, "the path")
        metadata = metadata_columns(w.metadata)
        lead = encode_lead(w.lead, self._identity.dimension, w.source_path)
        docs = []
        for i, chunk in enumerate(w.chunks):
            if chunk.chunk_index != i or chunk.source_path != w.source_path:
                raise ValueError(f"chunk {i} of {w.source_path} is {chunk.source_path}#{chunk.chunk_index}")
            size = len(w.chunks)
            docs.append(
                to_doc(
                    w.source_path, w.source_md5, w.root, chunk, self._identity.dimension, size, metadata, lead
                )
            )
        return docs

    @staticmethod
    def _held(coll: zvec.Collection, writes: Sequence[SourceWrite]) -> dict[str, int]:
        """How many chunks the index holds per source: the caller's figure, else its chunk 0's record (0: none)."""
        held = {w.source_path: w.held for w in writes if w.held is not None}
        ask = {doc_id(w.source_path, 0): w.source_path for w in writes if w.held is None}
        ids = list(ask)
        for start in range(0, len(ids), MAX_BATCH):
            found = coll.fetch(
                ids[start : start + MAX_BATCH], output_fields=[SOURCE_CHUNKS], include_vector=False
            )
            for i, doc in found.items():
                held[ask[i]] = max(1, int(doc.fields.get(SOURCE_CHUNKS) or 0))
        return {w.source_path: held.get(w.source_path, 0) for w in writes}

    def _delete(self, path: str, *, folder: bool) -> int:
        """Delete the chunks of the source `path`, or (`folder`) of every source at or below it."""
        exact = F.under_is_exact(path)
        wide = F.under(SOURCE_PATH, path)  # a ValueError for a path that is not absolute
        flt = F.for_delete(wide if folder else F.equals(SOURCE_PATH, path)) if exact else None
        with self._exclusive("delete") as coll:
            kw = self._keywords()
            kw.begin([path])
            if flt is not None:
                before = coll.stats.doc_count
                coll.delete_by_filter(flt)
                removed = int(before - coll.stats.doc_count)
            else:  # no exact filter for a backslash: the re-checked ids
                rows = self._rows(coll, path, writable=True)
                ids = [r.id for r in rows if folder or r.path == path]
                for start in range(0, len(ids), MAX_BATCH):
                    check_statuses(coll.delete(ids[start : start + MAX_BATCH]), "delete", self._path)
                removed = len(ids)
            self._written += removed
            kw.write(folders=[path]) if folder else kw.write(sources=[path])
            return removed

    def delete_source(self, source_path: str) -> int:
        return self._delete(source_path, folder=False)

    def delete_subtree(self, dir_path: str) -> int:
        return self._delete(dir_path, folder=True)

    def flush(self) -> None:
        with self._exclusive("flush") as coll:
            coll.flush()

    def optimize(self) -> None:
        """Writes and queries wait (two queries beside an optimize hung inside zvec 0.8: docs/zvec-notes.md)."""
        with self._exclusive("optimize") as coll:
            coll.optimize()
            self._written = 0
            self._rw.serial = True  # several segments from now on

    # -- compaction (flat) -------------------------------------------------------------------------------------
    @property
    def blocks(self) -> int:
        """The vector index blocks on disk (zvec_open.block_count): one more at each flush that wrote documents."""
        return zvec_open.block_count(self._path)

    @property
    def needs_compaction(self) -> bool:
        """A collection whose vector index should change type (`_wanted_type`), or a flat one whose flushes have
        piled up COMPACT_BLOCKS blocks, or one per DOCS_PER_BLOCK documents in a large one (a compaction copies
        every document: so its cost per flush stays about the same at any size, and the blocks' memory stays a
        small share of the collection's; see `compact`)."""
        if self._read_only:
            return False
        with self._rw.reading():
            if self._index_type_differs():
                return True
            if self._current_type() != "flat":
                return False
            documents = int(self._live().stats.doc_count)
        return self.blocks >= max(COMPACT_BLOCKS, documents // DOCS_PER_BLOCK)

    def compact(self) -> int:
        """Rewrite the collection as one block: every document copied into a new collection beside it (a batch
        at a time, so that searches go on between batches), flushed once, then swapped in. Returns the blocks
        folded.

        zvec 0.8 adds a vector index block to the writing segment at each flush that wrote documents, keeps every
        block in memory (about 1.4 MB each, whatever it holds) and searches each one, and folds them only in an
        optimize, which also seals the segment (keyword statistics are per segment: docs/zvec-notes.md). An agent
        that flushed after every edit grew by 1.4 MB an edit and its searches slowed with it (docs/benchmarks.md,
        issue 14). The copy is one writing segment, as a rebuild from the sidecars would be, without reading
        them. A crash before the swap leaves the old collection in use and the copy as debris (removed at the
        next open); one between the two renames leaves no collection, which the agent refills from the sidecars.
        """
        with self._write_lock:
            folded = self.blocks
            fresh_path = self._path.with_name(self._path.name + zvec_open.COMPACTING)
            zvec_open.remove_debris(self._path)
            with self._rw.reading(), zvec_errors("compaction", self._path):
                kind = self._wanted_type()
                ids = [d.id for d in scan.rows(self._live(), None, [SOURCE_PATH], seal_ok=False)]
            fresh = open_collection(fresh_path, self._identity, self._cfg, read_only=False, kind=kind)
            try:
                for start in range(0, len(ids), COMPACT_BATCH):
                    with self._rw.reading(), zvec_errors("compaction", self._path):
                        docs = list(self._live().fetch(ids[start : start + COMPACT_BATCH]).values())
                    with self._rw.writing(), zvec_errors("compaction", fresh_path):  # no query runs beside
                        check_statuses(fresh.insert(docs), "insert", fresh_path)
                with self._rw.writing(), zvec_errors("compaction", fresh_path):
                    fresh.flush()
                    copied = int(fresh.stats.doc_count)
                    fresh.close()
                if kind == "hnsw":  # the graph, built in a child process while searches go on here
                    started = time.monotonic()
                    try:
                        health.optimize_in_child(fresh_path)
                    except (RuntimeError, OSError) as err:
                        raise IndexError_(str(err), "see the agent log; the index is left as it was") from err
                    log.info("HNSW graph of %d documents built in %.1f s", copied, time.monotonic() - started)
            except BaseException:
                with contextlib.suppress(Exception):
                    fresh.close()
                zvec_open.remove_debris(self._path)
                raise
            with self._rw.writing(), zvec_errors("compaction", self._path):
                if copied != int(
                    self._live().stats.doc_count
                ):  # nothing else writes meanwhile: a lost document
                    zvec_open.remove_debris(self._path)
                    raise IndexError_(f"compacting {self._path} copied {copied} of "
                                      f"{self._live().stats.doc_count} documents", "report it; the index is "
                                      "left as it was")  # fmt: skip
                self._live().close()
                self._coll = None
                self._path.rename(self._path.with_name(self._path.name + zvec_open.COMPACTED))
                fresh_path.rename(self._path)
                health.write_stamp(self._path)  # closed cleanly just now: no probe needed to reopen it
                self._coll = open_collection(self._path, self._identity, self._cfg, read_only=False)
                self._rw.serial = zvec_open.segment_count(self._path) > 1
                self._written = 0
            zvec_open.remove_debris(self._path)
            log.info("index compacted: %d blocks folded into one (%d documents, %s)", folded, copied, kind)
            return folded

    # -- rest: closed while nothing uses it ---------------------------------------------------------------------
    @property
    def resting(self) -> bool:
        return self._rest is not None

    def idle_s(self) -> float:
        """Seconds since the collection was last used (a query, a write, a listing)."""
        return time.monotonic() - self._used

    def rest(self) -> bool:
        """Close the collection until its next use, which opens it again (~0.15 s): an idle agent gives back zvec's
        memory (the open collection with its jieba dictionary; docs/benchmarks.md, issue 14). The collection's
        lock stays held meanwhile (`_Rest`), so no other process takes it for writing. False when a write or a
        query is running, on a read-only handle, or when resting or closed already."""
        if self._read_only or not self._write_lock.acquire(blocking=False):
            return False
        try:
            with self._rw.writing():
                if self._coll is None:
                    return False
                documents = int(self._coll.stats.doc_count)
                with zvec_errors("close", self._path):
                    self._coll.close()
                self._coll = None
                self._close_keywords()
                health.write_stamp(self._path)  # closed cleanly: waking needs no probe
                self._rest = Resting.hold(self._path, documents)
                return True
        finally:
            self._write_lock.release()

    def _wake(self) -> None:
        """Open the resting collection again (callers hold `_rw`; readers may arrive together)."""
        with self._waking:
            if self._coll is not None or (rest := self._rest) is None:
                return
            rest.release()  # zvec takes the lock itself, on a descriptor of its own
            self._coll = open_collection(self._path, self._identity, self._cfg, self._read_only)
            self._kw = open_keywords(self._path, read_only=self._read_only)
            self._rest = None
            log.debug("index %s opened again after a rest", self._path)

    def close(self) -> None:
        with self._write_lock, self._rw.writing():
            if (rest := self._rest) is not None:
                rest.release()  # closed already, stamped when it went to rest
                self._rest = None
            self._close_keywords()
            if self._coll is not None:
                with zvec_errors("close", self._path):
                    self._coll.close()
                self._coll = None
                if not self._read_only:
                    health.write_stamp(self._path)  # closed cleanly: the next open needs no probe

    def _close_keywords(self) -> None:
        if (kw := self._kw) is not None:
            self._kw = None
            kw.close()


def keyword_doc(doc_id: str, fields: dict[str, Any]) -> KeywordDoc:
    """The keyword index's document for a zvec document's fields."""
    path = str(fields.get(SOURCE_PATH, ""))
    return KeywordDoc(doc_id, path, extension(path), str(fields.get(FTS_TEXT) or ""),
                      str(fields.get(META_TERMS) or ""))  # fmt: skip
