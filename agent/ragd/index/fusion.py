"""Hybrid ranking: reciprocal rank fusion of the vector and keyword hit lists, keeping only keyword evidence.

Pure functions over `Hit` lists (no storage engine), so they are tested on their own (tests/unit/test_fusion.py).
"""

from __future__ import annotations

from dataclasses import replace

from . import Hit

RRF_RANK_CONSTANT = 60
KEYWORD_FLOOR = 2.0  # BM25 below this is a match on common words only (measured on the bilingual test corpus)
KEYWORD_RELATIVE = 0.25  # keyword hits scoring below this share of the best one are not evidence


def keyword_evidence(hits: list[Hit]) -> list[Hit]:
    """The keyword hits that are evidence, not noise: BM25 at least KEYWORD_FLOOR and KEYWORD_RELATIVE of the best.

    Rank fusion sees only ranks, so without this a query whose words happen to be common (a Chinese question
    about an English document shares only particles and single characters with the Chinese documents) would push
    every weak keyword match above the document the vector side ranked first.
    """
    if not hits or hits[0].score < KEYWORD_FLOOR:
        return []
    cut = max(KEYWORD_FLOOR, KEYWORD_RELATIVE * hits[0].score)
    return [h for h in hits if h.score >= cut]


def fuse(dense: list[Hit], keyword: list[Hit], k: int) -> list[Hit]:
    """Reciprocal rank fusion (constant RRF_RANK_CONSTANT) of two ranked lists of chunks."""
    scores: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], Hit] = {}
    for ranked in (dense, keyword):
        for rank, hit in enumerate(ranked, 1):
            key = (hit.source_path, hit.chunk_index)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_RANK_CONSTANT + rank)
            first.setdefault(key, hit)
    best = sorted(scores, key=lambda key: scores[key], reverse=True)[:k]
    return [replace(first[key], score=scores[key]) for key in best]
