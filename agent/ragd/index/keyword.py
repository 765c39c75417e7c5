"""Keyword queries that stay fast on common words: rare terms first, the common ones only scored (issue 14).

zvec scores an OR query over every document that holds any of its terms, so a query with one word found in most
chunks costs as much as scoring the whole collection (at 100k chunks ~200 ms a word; 1M: seconds). The same query
written `+(rare terms) common terms` walks only the documents of the rare terms and still adds the common terms to
their scores (measured: 1 ms instead of 31 ms for `"w5000" battery` at 100k). What it leaves out is the documents
that hold only common terms, and `termstats` bounds what those can score (`TermStats.bound`): a max-score plan.

The narrow query's answer is kept only when it is provably the full query's:
- its k-th hit scores at least the common terms' bound (no document left out could rank among the first k), or
- for the hybrid search's keyword side, which keeps only evidence (`fusion.keyword_evidence`: BM25 of at least
  KEYWORD_FLOOR and KEYWORD_RELATIVE of the best), no document left out could pass that cut either; a query
  whose terms together cannot reach KEYWORD_FLOOR then needs no keyword search at all.
Otherwise the full query runs (slower, never worse). A term counts as rare when the sample finds it in at most
RARE_SHARE of the chunks; the rarest term always does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import Hit
from .fts import Term, render, render_required
from .fusion import KEYWORD_FLOOR, KEYWORD_RELATIVE
from .termstats import TermStats

RARE_SHARE = 0.02  # a term in at most this share of the chunks is searched (its documents walked) in full

Run = Callable[[str, int], list[Hit]]  # (query string, top k) -> hits, best first


@dataclass(frozen=True)
class Plan:
    required: list[Term]  # a document must hold one of these to be found
    optional: list[Term]  # scored where found, never searched for on their own
    optional_bound: float  # the most a document holding only optional terms can score


def plan(found: Sequence[Term], stats: TermStats) -> Plan | None:
    """Split `found` into rare (required) and common (optional) terms; None when none is common."""
    if len(found) < 2:
        return None
    by_share = sorted(found, key=stats.share)
    required = [t for t in by_share[1:] if stats.share(t) <= RARE_SHARE]
    required.insert(0, by_share[0])
    optional = [t for t in found if t not in required]
    if not optional:
        return None
    return Plan(required, optional, sum(stats.bound(t) for t in optional))


def proven(hits: list[Hit], k: int, bound: float, evidence: bool) -> bool:
    """`hits` (of the narrow query) are what the full query would give, when documents left out score <= `bound`."""
    if len(hits) >= k and hits[k - 1].score >= bound:
        return True
    best = hits[0].score if hits else 0.0
    return evidence and bound < max(KEYWORD_FLOOR, KEYWORD_RELATIVE * best)


def search(run: Run, found: Sequence[Term], k: int, stats: TermStats | None, *, evidence: bool) -> list[Hit]:
    """The top `k` keyword hits for `found` (`evidence`: only those `keyword_evidence` would keep matter)."""
    if not found:
        return []
    if stats is None:
        return run(render(list(found)), k)
    if evidence and sum(stats.bound(t) for t in found) < KEYWORD_FLOOR:
        return []  # no document can score as evidence
    p = plan(found, stats)
    if p is None:
        return run(render(list(found)), k)
    hits = run(render_required(p.required, p.optional), k)
    return hits if proven(hits, k, p.optional_bound, evidence) else run(render(list(found)), k)
