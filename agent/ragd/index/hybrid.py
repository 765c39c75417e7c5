"""One hybrid query over any backend: the dense list, the keyword evidence and the glosses of a Chinese question,
fused by document (fusion.py). The backends differ only in how they run one dense or one keyword search."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from . import MAX_K, Hit, fts, lexicon
from .fusion import TRANSLATED_DEPTH, fuse_documents, keyword_evidence, keyword_weight

Dense = Callable[[int], list[Hit]]  # top k by cosine similarity (score: similarity), best first
Keyword = Callable[[list[fts.Term], int, bool], list[Hit]]  # (terms, top k, evidence only) -> BM25 hits


def query(dense: Dense | None, keyword: Keyword, text: str | None, k: int) -> list[Hit]:
    """Vector only (no text), keyword only (no dense side), or both fused."""
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}")
    terms = fts.terms(text) if text else []
    if dense is None:
        return keyword(terms, k, False)
    if not terms:
        return dense(k)
    depth = min(max(4 * k, 20), MAX_K)
    cosine = dense(depth)
    weight = keyword_weight(text or "")
    found = keyword_evidence(keyword(terms, depth, True))
    translated: list[Hit] = []
    if glosses := lexicon.shared().terms(text or ""):  # a Chinese question's English words
        translated = keyword_evidence(keyword(glosses, min(depth, TRANSLATED_DEPTH), True))
    return fuse_documents(cosine, found, k, weight, translated)


def similarity(hits: list[Hit]) -> list[Hit]:
    """Hits scored by cosine distance, scored by similarity instead."""
    return [replace(h, score=1.0 - h.score) for h in hits]
