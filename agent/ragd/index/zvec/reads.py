"""The read side of ZvecIndex: listings, a source's chunks and queries (vector, keyword, both fused), each under
the shared side of the readers-writer lock (backend.py says why)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import zvec

from ...config import IndexConfig
from ...model import EmbeddingIdentity
from .. import records
from ..backend import Hit, SourceSummary
from ..keyword import fts
from ..keyword.keywords import KeywordIndex
from ..ranking import hybrid
from ..where import Where
from . import filters as F
from . import scan
from .collection import zvec_errors
from .rwlock import ReadWriteLock
from .scan import MAX_TOPK
from .schema import (
    CHUNK_INDEX,
    EMBEDDING,
    EXT,
    HIT_FIELDS,
    META_TERMS,
    SOURCE_MD5,
    SOURCE_PATH,
    check_vector,
    to_hit,
)

_ROW_FIELDS = [SOURCE_PATH, SOURCE_MD5, CHUNK_INDEX]
HNSW_EF_MAX = 2048  # zvec 0.8 refuses a wider HNSW search
# A listing of more than ONE_QUERY chunks is made in parts, by the first character of each chunk's source md5 (hex:
# sixteen parts of about equal size; the bounds split every string, so an odd or empty md5 is listed too). One query
# returned every chunk's row at once: +113 MiB for 60,000 chunks (the verification after a big folder's job); in
# parts, +55 MiB and no slower (docs/benchmarks/history.md, measured alone). A smaller listing (a file's chunks, a
# folder's) is one query: the md5 is not indexed, and each part's filter costs ~2 ms.
ONE_QUERY = 4096
_MD5_BOUNDS = (None, *"123456789abcdef", None)


def _md5_part(low: str | None, high: str | None) -> str:
    return F.all_of(low and f"{SOURCE_MD5} >= '{low}'", high and f"{SOURCE_MD5} < '{high}'")


class _Row(NamedTuple):
    id: str
    path: str
    md5: str
    chunk_index: int

    @classmethod
    def of(cls, doc: zvec.Doc) -> _Row:
        f = doc.fields
        return cls(doc.id, f.get(SOURCE_PATH, ""), f.get(SOURCE_MD5, ""), int(f.get(CHUNK_INDEX, 0)))


class ZvecReads:
    """What ZvecIndex reads with; it opens, writes, rests and closes the collection (`_live` opens a resting one)."""

    _path: Path
    _identity: EmbeddingIdentity
    _read_only: bool
    _cfg: IndexConfig
    _write_lock: threading.RLock
    _rw: ReadWriteLock
    _written: int

    def _live(self) -> zvec.Collection:
        raise NotImplementedError

    def _keywords(self) -> KeywordIndex:
        raise NotImplementedError

    def _current_type(self) -> str:
        raise NotImplementedError

    def give_back_pages(self) -> int:
        raise NotImplementedError

    def sources(self, prefix: str | None = None) -> dict[str, SourceSummary]:
        # iter_docs would be faster, but on a writable collection each call seals the writing segment (scan.py):
        # list with filtered queries.
        # A read-only handle lists with iter_docs (no seal), holding the write lock: an iterator fails optimize.
        if prefix is not None and not prefix.startswith("/"):  # the caller's mistake, not the index's
            raise ValueError(f"a path filter needs an absolute path, not {prefix!r}")
        lock = self._write_lock if self._read_only else contextlib.nullcontext()
        with lock, self._rw.reading(), zvec_errors("scan", self._path):
            rows = self._rows(self._live(), prefix, writable=not self._read_only)
            summary = records.summaries((r.path, r.md5, r.chunk_index) for r in rows)
        # a listing in parts read the fields of that many documents through the index's mapped files (~40 MiB of
        # the agent's memory after the verification of a 100,000-chunk index): given back now, not when next idle
        if sum(s.chunk_count for s in summary.values()) > ONE_QUERY:
            self.give_back_pages()
        return summary

    @staticmethod
    def _rows(coll: zvec.Collection, prefix: str | None, *, writable: bool) -> Iterator[_Row]:
        """The documents at or below `prefix` (all when None), re-checked (the filter may over-match); more than
        ONE_QUERY of them listed in parts (`_MD5_BOUNDS`), a part at a time, each part's documents dropped before
        the next is asked for: a caller that sums them as they come never holds them all (a row for each chunk and
        two sets for each source held ~970 bytes a source of two chunks while listing: test_index_zvec.py)."""
        flt = F.under(SOURCE_PATH, prefix) if prefix is not None else None
        for docs in ZvecReads._parts(coll, flt, _ROW_FIELDS, writable=writable):
            for row in map(_Row.of, docs):
                if prefix is None or F.is_under(row.path, prefix):
                    yield row
            del docs  # before the next part is asked for

    @staticmethod
    def _parts(
        coll: zvec.Collection, flt: str | None, fields: list[str], *, writable: bool
    ) -> Iterator[list[zvec.Doc]]:
        """The documents matching `flt` (all when None) with `fields`, a list at a time: one list when they are at
        most ONE_QUERY, else one for each part of `_MD5_BOUNDS` (the caller keeps what it needs of a part before
        the next is asked for)."""
        few = scan.query(coll, flt, fields, ONE_QUERY)
        if len(few) < ONE_QUERY:
            yield few
            return
        del few
        for low, high in itertools.pairwise(_MD5_BOUNDS):
            yield scan.rows(coll, F.all_of(flt, _md5_part(low, high)), fields, seal_ok=not writable)

    def _ids(self) -> list[str]:
        """Every document's id, listed in parts (`_parts`): a compaction's list of what to copy. Listed in one answer,
        200,000 documents took ~180 MiB while they were (docs/benchmarks/history.md, the copy in a child)."""
        return [d.id for docs in self._parts(self._live(), None, [SOURCE_MD5], writable=True) for d in docs]

    def chunks(self, source_path: str) -> list[Hit]:
        # a path with a backslash has no exact filter (filters.py): the wider one, each hit's path re-checked
        exact = F.under_is_exact(source_path)
        flt = F.equals(SOURCE_PATH, source_path) if exact else F.under(SOURCE_PATH, source_path)
        with self._rw.reading(), zvec_errors("lookup", self._path):
            docs = self._live().query(topk=MAX_TOPK, filter=flt, output_fields=HIT_FIELDS)
        hits = (to_hit(d, 0.0) for d in docs)
        return sorted((h for h in hits if h.source_path == source_path), key=lambda h: h.chunk_index)

    def query(
        self,
        *,
        vector: np.ndarray | None,
        text: str | None,
        k: int,
        path_prefixes: Sequence[str] = (),
        extensions: Sequence[str] = (),
        scope: str = "agent",  # one agent's index: every scope is this agent's files
        where: Sequence[Where] = (),
    ) -> list[Hit]:
        exts = records.extensions(extensions)
        flt = F.all_of(
            F.under_any(SOURCE_PATH, path_prefixes) if path_prefixes else None,
            F.any_of(EXT, exts) if exts else None,
            *(F.like(META_TERMS, w.pattern()) for w in where),
        )
        dense: hybrid.Dense | None = None
        if vector is not None:
            with self._rw.reading():
                ef = self._hnsw_ef() if self._current_type() == "hnsw" else 0
            near = zvec.Query(EMBEDDING, vector=check_vector(vector, self._identity.dimension, "the query"),
                              param=zvec.HnswQueryParam(ef=ef) if ef else None)  # fmt: skip
            dense = functools.partial(self._dense, near, flt, path_prefixes)

        def keyword_side(terms: list[fts.Term], top: int, evidence: bool) -> list[Hit]:
            return self._keyword(terms, top, path_prefixes, exts, where)

        return hybrid.query(dense, keyword_side, text, k, vector)

    def _hnsw_ef(self) -> int:
        """IndexConfig.hnsw_ef, or (0) one by size: 512 up to 256k chunks, then one per 500 chunks up to zvec's
        limit of 2048 (recall@10 against exact search on the benchmark's vectors: 0.97 at 100k with 512, 0.90 at
        1M with 2048; docs/benchmarks.md)."""
        if self._cfg.hnsw_ef:
            return self._cfg.hnsw_ef
        return min(HNSW_EF_MAX, max(512, int(self._live().stats.doc_count) // 500))

    def _dense(self, near: zvec.Query, flt: str | None, prefixes: Sequence[str], top: int) -> list[Hit]:
        return self._run(near, top, flt, prefixes)

    def _keyword(
        self,
        terms: list[fts.Term],
        k: int,
        prefixes: Sequence[str],
        exts: Sequence[str],
        where: Sequence[Where],
    ) -> list[Hit]:
        """Keyword hits: BM25 from the keyword index (keywords.py), their chunks read from the collection."""
        with self._rw.reading(), zvec_errors("query", self._path):
            found = self._keywords().search(terms, k, prefixes=prefixes, exts=exts, where=where)
            if not found:
                return []
            docs = self._live().fetch([i for i, _ in found], output_fields=HIT_FIELDS, include_vector=False)
        return [to_hit(docs[i], score) for i, score in found if i in docs]

    def _run(self, query: zvec.Query, k: int, flt: str | None, prefixes: Sequence[str]) -> list[Hit]:
        """The top k by cosine, scored by similarity (zvec gives a cosine distance)."""
        if not all(F.under_is_exact(p) for p in prefixes):
            return self._run_rechecked(query, k, flt, prefixes)
        with self._rw.reading(), zvec_errors("query", self._path):
            docs = self._live().query(query, topk=k, filter=flt or None, output_fields=HIT_FIELDS)
        return [to_hit(d, 1.0 - float(d.score or 0.0)) for d in docs if d is not None][:k]  # a similarity

    def _run_rechecked(
        self, query: zvec.Query, k: int, flt: str | None, prefixes: Sequence[str]
    ) -> list[Hit]:
        """A prefix with a backslash has a wider filter (filters.py): every candidate's path is re-checked (up to
        MAX_TOPK of them, however many siblings outrank the ones under the prefix), then the best k are read."""
        with self._rw.reading(), zvec_errors("query", self._path):
            coll = self._live()
            wide = coll.query(query, topk=MAX_TOPK, filter=flt or None, output_fields=[SOURCE_PATH])
            best = [d for d in wide if d is not None
                    and any(F.is_under(str(d.fields.get(SOURCE_PATH, "")), p) for p in prefixes)][:k]  # fmt: skip
            full = coll.fetch([d.id for d in best], output_fields=HIT_FIELDS, include_vector=False)
        return [to_hit(full[d.id], 1.0 - float(d.score or 0.0)) for d in best if d.id in full]  # a similarity
