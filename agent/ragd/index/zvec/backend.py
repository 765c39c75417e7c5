"""IndexBackend on an embedded zvec 0.8 collection (facts relied on here are measured in docs/zvec-notes.md).

Concurrency: zvec allows one writer or many readers per collection, across processes (a `flock` on `<dir>/LOCK`;
a second open raises IndexBusy). Within the process, zvec 0.8.0 with its default query thread pool deadlocked
when a write or an optimize ran beside two or more queries; with one query thread (`collection._ensure_init`) it did
not in stress runs. Writes and optimize take the write lock *and* the readers-writer lock exclusively (one writer
or many readers, as zvec documents), and queries share the readers-writer lock: searches wait for an optimize
(HNSW only; a flat collection is compacted instead, between whose steps searches go on). On a collection of several
segments (after an optimize) queries side by side still hung now and then under load, so there they run one at a
time (`ReadWriteLock.serial`).

Here: opening, stats, rest, close; the reads are in reads.py, the writes in writes.py, optimize and compaction
in upkeep.py (the base classes, in that order).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zvec

from ...config import IndexConfig
from ...errors import IndexError_
from ...model import EmbeddingIdentity
from ..keyword.keywords import KeywordDoc, KeywordIndex, open_keywords
from . import collection, health, scan
from . import filters as F
from .collection import Resting, open_collection, zvec_errors
from .rwlock import ReadWriteLock
from .schema import (
    EMBEDDING,
    FTS_TEXT,
    META_TERMS,
    SOURCE_PATH,
)
from .upkeep import ZvecUpkeep
from .writes import keyword_doc

log = logging.getLogger(__name__)


class ZvecIndex(ZvecUpkeep):
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
        self._rw.serial = collection.segment_count(path) > 1
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
