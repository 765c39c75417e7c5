"""The write side of ZvecIndex: a source's chunks replaced, sources and folders deleted, flushes; one write at a
time (the write lock), and never beside a query (the readers-writer lock: backend.py says why). The keyword index
beside the collection is written with it (keyword/keywords.py, its journal first)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import zvec

from ...pipeline.cutwords import CUT_WORDS, Words
from ..backend import IndexChunk, SourceWrite
from ..keyword.keywords import KeywordDoc
from ..records import check_vectors, encode_lead, extension, metadata_columns
from . import filters as F
from .collection import check_statuses, zvec_errors
from .reads import ZvecReads
from .schema import (
    FTS_TEXT,
    META_TERMS,
    SOURCE_CHUNKS,
    SOURCE_PATH,
    check_text,
    doc_id,
    to_doc,
)

MAX_BATCH = 1024  # zvec 0.8 accepts at most 1024 documents per insert/upsert call


class ZvecWrites(ZvecReads):
    """What ZvecIndex writes with; `_writable` is the collection, refused on a read-only handle."""

    # -- writes: one at a time (write lock), and never beside a query (zvec 0.8 deadlocks) ----------------------
    def _writable(self) -> zvec.Collection:
        raise NotImplementedError

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
        # the keyword texts and words the parse workers made (pipeline/cutwords.py), chunk by chunk; None: here
        cut = [CUT_WORDS.take(c.content_hash, c.header) for w in last.values() for c in w.chunks]
        kept = iter(cut)
        # all checked before anything is written
        docs = [doc for w in last.values() for doc in self._docs(w, kept)]
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
            kw.write(
                sources=last,
                docs=[
                    keyword_doc(d.id, d.fields, k[1] if k else None) for d, k in zip(docs, cut, strict=True)
                ],
            )

    def _docs(self, w: SourceWrite, kept: Iterator[Words | None]) -> list[zvec.Doc]:
        """The source's documents; `kept` gives each chunk's keyword text and words made already, or None."""
        check_text(w.source_path, "the path")
        metadata = metadata_columns(w.metadata)
        lead = encode_lead(w.lead, self._identity.dimension, w.source_path)
        for i, chunk in enumerate(w.chunks):
            if chunk.chunk_index != i or chunk.source_path != w.source_path:
                raise ValueError(f"chunk {i} of {w.source_path} is {chunk.source_path}#{chunk.chunk_index}")
        vectors = check_vectors([c.vector for c in w.chunks], self._identity.dimension,
                                [f"{w.source_path}#{i}" for i in range(len(w.chunks))])  # fmt: skip
        docs = []
        for chunk, vector in zip(w.chunks, vectors, strict=True):
            size, k = len(w.chunks), next(kept)
            docs.append(to_doc(w.source_path, w.source_md5, w.root, chunk, self._identity.dimension, size,
                               metadata, lead, fts_text=k[0] if k else None, vector=vector))  # fmt: skip
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
        """Delete the chunks of the source `path`, or (`folder`) of every source below it (a source at `path`
        itself is a file of that name, not in the folder: the folder replaced by a file, both still indexed)."""
        exact = F.under_is_exact(path)
        wide = F.below(SOURCE_PATH, path)  # a ValueError for a path that is not absolute
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
                ids = [r.id for r in rows if (r.path != path if folder else r.path == path)]  # below, or it
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


def keyword_doc(doc_id: str, fields: dict[str, Any], words: str | None = None) -> KeywordDoc:
    """The keyword index's document for a zvec document's fields (`words`: its text already cut, or None)."""
    path = str(fields.get(SOURCE_PATH, ""))
    return KeywordDoc(doc_id, path, extension(path), str(fields.get(FTS_TEXT) or ""),
                      str(fields.get(META_TERMS) or ""), words)  # fmt: skip
