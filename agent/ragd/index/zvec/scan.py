"""Listing the documents of a zvec collection that match a filter, without sealing its writing segment.

`iter_docs` is the fast way to read many documents, but on a writable collection every call seals the writing
segment, and a collection of several segments runs its queries one at a time (zvec 0.8 hung with queries side
by side there: docs/zvec-notes.md). Filtered queries do not seal, but return at most MAX_TOPK documents; so a writable collection is listed with queries over ranges of `chunk_index`, a range
that fills a query being split in two. Read-only handles (no seal) use `iter_docs` when one query is not enough.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import zvec

from . import filters as F
from .schema import CHUNK_INDEX

log = logging.getLogger(__name__)

MAX_TOPK = 100_000  # zvec 0.8 rejects a larger topk


def rows(
    coll: zvec.Collection, flt: str | None, fields: list[str], *, seal_ok: bool, limit: int = MAX_TOPK
) -> list[zvec.Doc]:
    """Every document matching `flt` (all when None), with `fields`. `seal_ok`: iter_docs may be used.

    `limit` is the most one query returns (zvec's maximum topk; smaller in tests of the range splitting).
    """
    if seal_ok:
        docs = query(coll, flt, fields, limit) if flt else None
        if docs is not None and len(docs) < limit:
            return docs
        return list(_iterate(coll, fields))  # the caller re-checks its filter
    found: list[zvec.Doc] = []
    ranges: list[tuple[int, int | None]] = [(0, None)]  # [low, high) of chunk_index; None: unbounded
    while ranges:
        low, high = ranges.pop()
        docs = query(coll, F.all_of(flt, _chunk_range(low, high)), fields, limit)
        if len(docs) < limit:
            found.extend(docs)
        elif high is None:
            ranges += [(low, 2 * low + 1), (2 * low + 1, None)]
        elif high - low > 1:
            ranges += [(low, (low + high) // 2), ((low + high) // 2, high)]
        else:  # more sources than one query returns share one chunk index: no query can list them
            log.warning("listing %s with iter_docs: its writing segment is sealed", coll.path)
            return list(_iterate(coll, fields))
    return found


def _chunk_range(low: int, high: int | None) -> str:
    return f"{CHUNK_INDEX} >= {low}" + ("" if high is None else f" AND {CHUNK_INDEX} < {high}")


def query(coll: zvec.Collection, flt: str | None, fields: list[str], limit: int) -> list[zvec.Doc]:
    """At most `limit` documents matching `flt` (any when None), with `fields`: one query, never sealing."""
    return list(coll.query(topk=limit, filter=flt or f"{CHUNK_INDEX} >= 0", output_fields=fields))


def _iterate(coll: zvec.Collection, fields: list[str]) -> Iterator[zvec.Doc]:
    with coll.iter_docs(output_fields=fields, include_vector=False) as it:
        yield from it
