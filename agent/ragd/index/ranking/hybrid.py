"""One hybrid query over any backend: the dense list, the keyword evidence and the glosses of the question (English
words for a Chinese one, Chinese words for an English one),
fused by document with the leads of the documents found (fusion.py). The backends differ only in how they run one
dense or one keyword search.

`explaining()` asks the query run inside it to fill a `fusion.Explanation` (`search --explain`): a context variable,
so that no backend passes it on (each calls `query` in the caller's thread); unset, nothing is collected."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from ..backend import MAX_K, Hit
from ..keyword import fts, lexicon
from ..records import lead_bytes
from .fusion import (
    CHINESE_GLOSSES_WEIGHT,
    LOOKUP_WEIGHT,
    TRANSLATED_DEPTH,
    TRANSLATED_WEIGHT,
    Explanation,
    Side,
    fuse_documents,
    keyword_evidence,
    keyword_weight,
    rare,
)

Dense = Callable[[int], list[Hit]]  # top k by cosine similarity (score: similarity), best first
Keyword = Callable[[list[fts.Term], int, bool], list[Hit]]  # (terms, top k, evidence only) -> BM25 hits

_EXPLAIN: ContextVar[Explanation | None] = ContextVar("ragd_explain", default=None)


@contextmanager
def explaining() -> Iterator[Explanation]:
    """An Explanation that the queries run in this block (in this thread) fill."""
    found = Explanation()
    token = _EXPLAIN.set(found)
    try:
        yield found
    finally:
        _EXPLAIN.reset(token)


def query(
    dense: Dense | None, keyword: Keyword, text: str | None, k: int, vector: np.ndarray | None = None
) -> list[Hit]:
    """Vector only (no text), keyword only (no dense side), or both fused. `vector`: the question's, for the leads
    of the documents found (hybrid only). The dense side asks for MAX_K hits whatever `k`: a deeper pool of
    documents for the leads to rank (40 hits for k=10 found fewer answers: docs/benchmarks.md), at little cost."""
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}")
    explain = _EXPLAIN.get()
    terms = fts.terms(text) if text else []
    if dense is None:
        return _alone(explain, "keyword", keyword(terms, k, False))
    if not terms:
        return _alone(explain, "vector", dense(k))
    depth = min(max(4 * k, 20), MAX_K)
    cosine = dense(MAX_K if vector is not None else depth)
    raw = keyword(terms, depth, True)
    exact = rare(raw, depth, terms)
    weight = LOOKUP_WEIGHT if exact else keyword_weight(text or "")
    found = keyword_evidence(raw, explain, exact=exact)
    if explain is not None:
        explain.params["rare"] = exact
    translated: list[Hit] = []
    gloss_weight = TRANSLATED_WEIGHT
    glosses = lexicon.shared().glosses(text or "")  # a Chinese question's English words, or the reverse
    if glosses.terms:
        if glosses.chinese:
            gloss_weight = CHINESE_GLOSSES_WEIGHT
        glossed = keyword(glosses.terms, min(depth, TRANSLATED_DEPTH), True)
        translated = keyword_evidence(glossed, explain, "glosses")
        if explain is not None:
            explain.params["glosses"] = [t.text for t in glosses.terms]
    leads = lead_cosines(vector, [*cosine, *found, *translated]) if vector is not None else None
    return fuse_documents(cosine, found, k, weight, translated, leads, explain, gloss_weight)


def _alone(explain: Explanation | None, side: str, hits: list[Hit]) -> list[Hit]:
    """The hits of one side alone, in their order (explained: each passage's rank and score on that side)."""
    if explain is not None:
        explain.method = side
        ranks = explain.side(side)
        for h in hits:  # a document's rank and score: its best passage's
            if h.source_path not in ranks:
                ranks[h.source_path] = Side(len(ranks) + 1, h.score, h.score)
    return hits


def lead_cosines(vector: np.ndarray, hits: list[Hit]) -> dict[str, float]:
    """The cosine of `vector` to the lead of each document of `hits` that has one (decoded together: one matrix)."""
    q = np.asarray(vector, dtype=np.float32).reshape(-1)
    q = q / (np.linalg.norm(q) or 1.0)
    found: dict[str, bytes] = {}
    for h in hits:
        if h.lead and h.source_path not in found and (data := lead_bytes(h.lead, q.shape[0])) is not None:
            found[h.source_path] = data
    paths, raw = list(found), list(found.values())
    if not raw:
        return {}
    with np.errstate(invalid="ignore", over="ignore"):
        cosines = np.frombuffer(b"".join(raw), dtype="<f2").reshape(len(raw), -1).astype(np.float32) @ q
    return {p: float(c) for p, c in zip(paths, cosines, strict=True) if np.isfinite(c)}
