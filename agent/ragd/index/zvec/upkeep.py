"""The upkeep of ZvecIndex's vector index: its type (flat or HNSW, `auto` by size), the optimize that builds an HNSW
graph, and the compaction that rewrites a flat collection's piled-up blocks as one (or changes its type), while
searches go on."""

from __future__ import annotations

import logging
import time

import zvec

from ... import mapped
from ...errors import IndexError_
from . import collection, health
from .collection import open_collection, zvec_errors
from .schema import (
    EMBEDDING,
    vector_param,
)
from .writes import ZvecWrites

log = logging.getLogger(__name__)

COMPACT_BLOCKS = 64  # a flat collection is compacted once its flushes have made this many blocks (~90 MB) ...
DOCS_PER_BLOCK = 1000  # ... or, if more, one per this many documents (100k: 100 blocks, ~140 MB)
# While a long stream of writes goes on (a big folder's job never pauses), a flat collection is compacted once its
# flushes have made this many blocks (~35 MB), or one per this many documents if more: 6,000 notes written in 93
# flushes left the process at 457 MiB with 93 blocks, 403 MiB with 10 blocks (a flush every 10th batch), 259 MiB
# compacted at each 24th block (docs/benchmarks/history.md, a big folder's blocks bounded).
BUSY_COMPACT_BLOCKS = 24
BUSY_DOCS_PER_BLOCK = 2500
COMPACT_BATCH = 256  # documents copied per step of a compaction (searches wait for one step at most)
# steps of a compaction between two give-backs of the pages it mapped (mapped.py): the documents of a step lie all
# over the collection's files, and four steps of a 100,000-chunk collection held ~60 MiB of their pages (a give-back
# costs a read of /proc/self/maps, ~1 ms)
GIVE_BACK_EVERY = 1


class ZvecUpkeep(ZvecWrites):
    """Optimize and compaction; the open collection (`_coll`) is closed and reopened by a compaction's swap."""

    _coll: zvec.Collection | None

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
        return collection.segment_count(self._path)

    def optimize(self) -> None:
        """Writes and queries wait (two queries beside an optimize hung inside zvec 0.8: docs/zvec-notes.md)."""
        with self._exclusive("optimize") as coll:
            coll.optimize()
            self._written = 0
            self._rw.serial = True  # several segments from now on

    def give_back_pages(self) -> int:
        """Take the pages of the collection's mapped files out of the process's resident set (mapped.py: they stay
        in the page cache; the next search maps what it reads again). Queries and writes wait the moment it takes,
        which keeps zvec from unmapping a file meanwhile. Never waits for a write, an optimize or a compaction (an
        optimize holds the collection for a minute at 100,000 chunks, and the agent's main loop calls this when it
        becomes idle): 0 then, as for a resting collection; a compaction's own thread, which holds the write lock,
        gives back as it copies (`compact`). Returns the bytes of the maps advised."""
        if not self._write_lock.acquire(blocking=False):
            return 0
        try:
            with self._rw.writing():
                return mapped.give_back(self._path) if self._coll is not None else 0
        finally:
            self._write_lock.release()

    # -- compaction (flat) -------------------------------------------------------------------------------------
    @property
    def blocks(self) -> int:
        """The vector index blocks on disk (collection.block_count): one more at each flush that wrote documents."""
        return collection.block_count(self._path)

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

    @property
    def needs_compaction_busy(self) -> bool:
        """A flat collection whose flushes have piled up BUSY_COMPACT_BLOCKS blocks, or one per BUSY_DOCS_PER_BLOCK
        documents in a large one, while writes keep coming: compacted without waiting for a pause, which a big
        folder's job does not give (its blocks piled up to ~110 in a job of 30,000 notes, and their compaction after
        it made the agent's peak). A change of index type waits for a pause (`needs_compaction`)."""
        if self._read_only:
            return False
        with self._rw.reading():
            if self._index_type_differs() or self._current_type() != "flat":
                return False
            documents = int(self._live().stats.doc_count)
        return self.blocks >= max(BUSY_COMPACT_BLOCKS, documents // BUSY_DOCS_PER_BLOCK)

    def compact(self) -> int:
        """Rewrite the collection as one block: every document copied into a new collection beside it (read a
        batch at a time, so that searches go on between batches, and written by a child process: `CopyInChild`),
        flushed once, then swapped in. Returns the blocks folded.

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
            fresh_path = self._path.with_name(self._path.name + collection.COMPACTING)
            collection.remove_debris(self._path)
            with self._rw.reading(), zvec_errors("compaction", self._path):
                kind = self._wanted_type()
                ids = self._ids()
            # created empty with its schema here; filled, flushed and (HNSW) optimized by a child process, so that
            # the copy's writing segment and the graph's build are never in the agent's memory
            open_collection(fresh_path, self._identity, self._cfg, read_only=False, kind=kind).close()
            started = time.monotonic()
            child: health.CopyInChild | None = None
            try:
                child = health.CopyInChild(
                    fresh_path, optimize=kind == "hnsw", timeout=health.OPTIMIZE_TIMEOUT_S
                )
                for step, start in enumerate(range(0, len(ids), COMPACT_BATCH), 1):
                    with self._rw.reading(), zvec_errors("compaction", self._path):
                        docs = list(self._live().fetch(ids[start : start + COMPACT_BATCH]).values())
                    child.send(docs)
                    if step % GIVE_BACK_EVERY == 0:  # the pages the copy read: out of the agent's RSS
                        self.give_back_pages()  # (the write lock is this thread's already)
                copied = child.finish()
            except BaseException as err:
                if child is not None:
                    child.kill()
                collection.remove_debris(self._path)
                if isinstance(err, (RuntimeError, OSError)):
                    raise IndexError_(str(err), "see the agent log; the index is left as it was") from err
                raise
            log.log(logging.INFO if kind == "hnsw" else logging.DEBUG, "copy of %d documents%s made in a child "
                    "process in %.1f s", copied, " and its HNSW graph" if kind == "hnsw" else "",
                    time.monotonic() - started)  # fmt: skip
            with self._rw.writing(), zvec_errors("compaction", self._path):
                if copied != int(
                    self._live().stats.doc_count
                ):  # nothing else writes meanwhile: a lost document
                    collection.remove_debris(self._path)
                    raise IndexError_(f"compacting {self._path} copied {copied} of "
                                      f"{self._live().stats.doc_count} documents", "report it; the index is "
                                      "left as it was")  # fmt: skip
                self._live().close()
                self._coll = None
                self._path.rename(self._path.with_name(self._path.name + collection.COMPACTED))
                fresh_path.rename(self._path)
                health.write_stamp(self._path)  # closed cleanly just now: no probe needed to reopen it
                self._coll = open_collection(self._path, self._identity, self._cfg, read_only=False)
                self._rw.serial = collection.segment_count(self._path) > 1
                self._written = 0
                # what opening the copy read of its files (~43 MiB of an HNSW collection of 100,000 chunks, kept
                # until the agent was next idle): out of the agent's RSS, in the page cache for the next search
                mapped.give_back(self._path)
            collection.remove_debris(self._path)
            log.info("index compacted: %d blocks folded into one (%d documents, %s)", folded, copied, kind)
            return folded
