"""The read side of MilvusIndex: this agent's rows listed a range of primary keys at a time, counts, a source's
chunks, and queries (dense, BM25 or both fused by the same hybrid ranking as on zvec: ranking/hybrid.py)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .. import records
from ..backend import Hit, SourceSummary
from ..keyword import fts
from ..ranking import hybrid
from ..records import check_vector
from ..where import Where
from . import filters as M
from . import phrases
from .connection import SESSION, STRONG, MilvusConnection
from .schema import (
    AGENT,
    CHUNK_INDEX,
    EMBEDDING,
    EXT,
    FTS_TEXT,
    HIT_FIELDS,
    META_TERMS,
    PK,
    SOURCE_MD5,
    SOURCE_PATH,
    SPARSE,
    to_hit,
)

PAGE_ROWS = 4_096  # rows a listing reads at once (about)
QUERY_LIMIT = 16_384  # the most rows one Milvus query returns


class MilvusReads(MilvusConnection):
    def _rows(self, client: Any, flt: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """Every row of this agent matching `flt`. A query returns at most QUERY_LIMIT rows, and Milvus Lite has
        no query iterator, so the agent's primary keys (its key, "-", a uuid in hex) are read a range of them at a
        time: ranges by the uuid's first hex digits, as many as the count asks for, split again when one is full."""
        total = self._count(client, flt)
        if total == 0:
            return
        depth = 0
        while total / 16**depth > PAGE_ROWS:
            depth += 1
        prefixes = [""] if depth == 0 else [format(i, f"0{depth}x") for i in range(16**depth)]
        while prefixes:
            lo = f"{self._key}-{prefixes.pop()}"
            rows = client.query(self._name, filter=M.all_of(flt, f"{PK} >= {M.literal(lo)}",
                                                           f"{PK} < {M.literal(lo + '~')}"),
                                output_fields=[PK, *fields], limit=QUERY_LIMIT, consistency_level=STRONG)  # fmt: skip
            if len(rows) >= QUERY_LIMIT:  # perhaps more: ask again, a sixteenth at a time
                prefixes.extend(lo[len(self._key) + 1 :] + c for c in "0123456789abcdef")
                continue
            yield from rows

    def _count(self, client: Any, flt: str) -> int:
        rows = client.query(self._name, filter=flt, output_fields=["count(*)"], consistency_level=STRONG)
        return int(rows[0]["count(*)"]) if rows else 0

    # -- reads ----------------------------------------------------------------------------------------------------
    def count(self) -> int:
        with self._call("count") as client:
            return self._count(client, self._mine())

    def sources(self, prefix: str | None = None) -> dict[str, SourceSummary]:
        flt = self._mine(M.under(SOURCE_PATH, prefix) if prefix is not None else None)
        with self._call("scan") as client:
            rows = self._rows(client, flt, [SOURCE_PATH, SOURCE_MD5, CHUNK_INDEX])
            return records.summaries((r[SOURCE_PATH], r[SOURCE_MD5], int(r[CHUNK_INDEX])) for r in rows)

    def chunks(self, source_path: str) -> list[Hit]:
        with self._call("lookup") as client:
            rows = list(self._rows(client, self._mine(M.equals(SOURCE_PATH, source_path)), HIT_FIELDS))
        return sorted((to_hit(r, 0.0) for r in rows), key=lambda h: h.chunk_index)

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
        if scope not in ("agent", "all"):
            raise ValueError(f"scope must be 'agent' or 'all', not {scope!r}")
        exts = records.extensions(extensions)
        flt = M.all_of(
            M.equals(AGENT, self.agent_id) if scope == "agent" else None,
            M.under_any(SOURCE_PATH, path_prefixes) if path_prefixes else None,
            M.any_of(EXT, exts) if exts else None,
            *(M.like(META_TERMS, w.pattern()) for w in where),
        )
        dense: hybrid.Dense | None = None
        if vector is not None:
            near = check_vector(vector, self._identity.dimension, "the query").tolist()
            dense = functools.partial(self._search, near, EMBEDDING, flt=flt)

        def keyword(terms: list[fts.Term], top: int, evidence: bool) -> list[Hit]:
            words = " ".join(t.text for t in terms)
            if not words:
                return []
            holds = phrases.matcher(terms)  # BM25 is a bag of words: phrases and identifiers checked here
            fields = HIT_FIELDS if holds is None else [*HIT_FIELDS, FTS_TEXT]
            rows = self._found(words, SPARSE, top, flt, fields)
            return [to_hit(row, score) for row, score in rows
                    if score > 0 and (holds is None or holds(str(row.get(FTS_TEXT, ""))))]  # fmt: skip

        return hybrid.query(dense, keyword, text, k, vector)

    def _search(self, data: Any, field: str, top: int, *, flt: str) -> list[Hit]:
        return [to_hit(row, score) for row, score in self._found(data, field, top, flt, HIT_FIELDS)]

    def _found(
        self, data: Any, field: str, top: int, flt: str, fields: list[str]
    ) -> list[tuple[dict[str, Any], float]]:
        """The top rows and their scores: COSINE similarity, or BM25 (which Milvus Lite gives negated)."""
        with self._call("query") as client:
            found = client.search(self._name, data=[data], anns_field=field, limit=top, filter=flt,
                                  output_fields=fields, consistency_level=SESSION)  # fmt: skip
        bm25 = field == SPARSE
        return [(h["entity"], abs(float(h["distance"])) if bm25 else float(h["distance"])) for h in found[0]]
