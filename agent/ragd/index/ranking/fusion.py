"""Hybrid ranking: the vector and keyword hit lists fused per document, then each document's passages in order.

Pure functions over `Hit` lists (no storage engine), so they are tested on their own (tests/unit/index/test_fusion.py).
Measured on the development set (bench/devset, `python -m bench.bench_eval`; docs/benchmarks.md):

- Documents, not chunks, are fused. A long document has many chunks, and so many chances that one of them lands
  near any query (on the vector side) or shares its common words (on the keyword side): fused per chunk, the long
  reference chapters came first for questions they do not answer. Each list is first turned into a document ranking
  (a document's best chunk), then the two rankings are fused by reciprocal rank (constant DOC_RANK_CONSTANT).
- A document's size counts against it, a little: the vector side ranks documents by their best chunk's cosine
  minus DENSE_SIZE_PENALTY × ln(its chunks), the keyword side divides a document's share by
  1 + KEYWORD_SIZE_PENALTY × ln(its chunks).
- The keyword side weighs in full for a query with identifiers (flags, snake_case, codes like E1042: `fts.
  identifier_like`), at KEYWORD_WEIGHT otherwise: words of a question in one language never match a document in
  the other, so at full weight they pushed same-language documents above the cross-lingual answer. A lookup (at
  most LOOKUP_WORDS words, no CJK: `ETIMEDOUT`, `Pin-Priority`, `git stash`) weighs LOOKUP_WEIGHT: a sentence
  model has nothing to go on in one word (for `LLMNR` its nearest chunk was `ln`'s), BM25 everything
  (`keyword_weight`).
- A question whose words are rare in the collection (every chunk holding any of them is in at most RARE_DOCUMENTS
  documents, and the first holds them all as written: a name, a code, a word that one note holds) is a lookup
  whatever its length or script (`rare`): its keyword hits weigh LOOKUP_WEIGHT and count whatever their BM25. In a
  tree of a few hundred documents with short notes, a note holding the one word asked for came 10th, below
  documents the vector side ranked on nothing (a sentence model knows nothing of 侧吸式 or KX7Q2M), and in a
  small collection such a word scores under KEYWORD_FLOOR (BM25 grows with the number of chunks).
- A near-empty document (one chunk, under EMPTY_CHARS letters and digits past its front matter: a stub of front
  matter, a draft) has its fused score multiplied by EMPTY_WEIGHT (`near_empty`): its title and tags match a
  question as well as any document's, and its one short chunk scores high on both sides, but it answers nothing
  ("how to list hidden files" had a stub titled "hidden files" first). A heading counts as text: a help page of
  one title line ("Add local dictionary sources") was the right answer to its own words on the desktop-help set.
- A question with Chinese text also brings the keyword hits of its words' English glosses (`lexicon`: the
  answer is often an English document the vector side misses), fused like the keyword side at TRANSLATED_WEIGHT
  (its evidence only); a question in English only, those of its words' Chinese glosses (the answer a Chinese
  page), at CHINESE_GLOSSES_WEIGHT.
- A document's lead (its title and opening prose, embedded once: pipeline/lead.py) says what the whole document is
  about, which none of a long document's chunks may say alone. The documents found (by any list) are ranked by
  their lead's cosine to the question; the first LEAD_DEPTH add a share at LEAD_WEIGHT, as one more list. Only
  documents the other lists found take part, so filters and scopes hold as they are; a document without a lead
  (written by another tool, or by an earlier ragd until its next job) takes no share.
- Results stay passages: a document's passages follow in their chunk-level order, the i-th carrying the document's
  score × PASSAGE_DECAY^i, so a second passage of the best document comes before the next document only when the
  best document is far ahead.

`Explanation` collects, while a query runs, what each side gave each document and what fusion made of it (`search
--explain`): the functions here fill it from the very values they rank by, so it cannot disagree with the ranking.
A query that asks for none passes None and pays nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..backend import Hit
from ..keyword import fts

_CJK = re.compile(f"[{fts.CJK}]")

RRF_RANK_CONSTANT = 60  # chunk-level fusion (kept for the ragjson tool's `query` semantics: see `fuse`)
DOC_RANK_CONSTANT = 10
KEYWORD_WEIGHT = 0.5  # the keyword side's weight for a query without identifiers
# ... and for a lookup of a word or two: 2 and 3 scored the same on the development set, 1 as an identifier
LOOKUP_WEIGHT = 2.0
LOOKUP_WORDS = 2  # (3 scored the same; a short Chinese question loses: its answer is often an English page)
DENSE_SIZE_PENALTY = 0.01  # cosine taken off per ln(chunks) of a document
KEYWORD_SIZE_PENALTY = 0.2
PASSAGE_DECAY = 0.5
TRANSLATED_WEIGHT = 1.0  # the share of the keyword hits of a Chinese question's English glosses
CHINESE_GLOSSES_WEIGHT = 0.5  # and of an English question's Chinese glosses (1.0 lowered English questions)
TRANSLATED_DEPTH = (
    30  # glosses hits asked for: deeper ones are noise (30 scored 0.747, 100 0.740) and cost 3x
)
LEAD_WEIGHT = 0.3  # the leads' share (0.5 lifted hit@5 but cost English questions 0.04 MRR)
LEAD_DEPTH = 10  # documents of the leads' ranking that take a share (20 and 5 scored about the same)
KEYWORD_FLOOR = 2.0  # BM25 below this is a match on common words only (measured on the bilingual test corpus)
RARE_DOCUMENTS = 3  # a question's words in at most this many documents (all their chunks) are rare: `rare`
KEYWORD_RELATIVE = 0.25  # keyword hits scoring below this share of the best one are not evidence
EMPTY_CHARS = 16  # letters and digits past its front matter a one-chunk document needs not to be near-empty
EMPTY_WEIGHT = 0.5  # what a near-empty document's fused score is multiplied by
_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\n(?:.*?\n)??(?:---|\.\.\.|\+\+\+)[ \t]*(?:\n|\Z)", re.S)


@dataclass
class Side:
    """What one side (vector, keyword, glosses, lead) said of a document."""

    rank: int | None  # the document's rank on this side (1 = first); None: found, but not counted (`dropped`)
    # the value this side ranks documents by: vector, its best passage's cosine (in hybrid mode minus
    # DENSE_SIZE_PENALTY x ln(its chunks)); keyword and glosses, its best passage's BM25; lead, the lead's cosine
    score: float
    share: float = 0.0  # what it added to the document's fused score (one side alone: all of it)
    dropped: str = ""  # why a keyword hit did not count: "floor" (BM25 under KEYWORD_FLOOR) or "relative"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "score": self.score, "share": self.share}
        if self.dropped:
            out["dropped"] = self.dropped
        return out


@dataclass
class Explanation:
    """Why each result of one query is where it is; filled by `hybrid.query` and `fuse_documents` when asked."""

    method: str = ""  # "hybrid" (documents fused by rank), "vector" or "keyword" (one side alone)
    params: dict[str, Any] = field(default_factory=dict)  # the constants and weights of this query
    sides: dict[str, dict[str, Side]] = field(default_factory=dict)  # side -> document path -> what it said
    chunks: dict[tuple[str, int], tuple[int, float]] = field(default_factory=dict)  # -> (passage, decay)
    documents: dict[str, tuple[int, float]] = field(default_factory=dict)  # path -> (fused rank, fused score)
    empty: set[str] = field(default_factory=set)  # near-empty documents (fused score x EMPTY_WEIGHT)

    def side(self, name: str) -> dict[str, Side]:
        return self.sides.setdefault(name, {})

    def query(self) -> dict[str, Any]:
        """What holds for every result of the query: how the sides were combined."""
        return {"method": self.method, **self.params}

    def of(self, path: str, chunk_index: int, score: float) -> dict[str, Any]:
        """One result's explanation: each side's rank, score and share, and (hybrid) the document's fused rank
        and score and the passage's place among its document's passages. `score`: the result's own."""
        out: dict[str, Any] = {}
        for name in ("vector", "keyword", "glosses", "lead"):
            if self.method == "hybrid" or name == self.method:
                found = self.sides.get(name, {}).get(path)
                out[name] = found.to_dict() if found is not None else None
        if path in self.documents:
            rank, fused = self.documents[path]
            passage, decay = self.chunks.get((path, chunk_index), (0, 1.0))
            out["document"] = {"rank": rank, "score": fused}
            if path in self.empty:
                out["document"]["near_empty"] = True
            out["passage"] = {"index": passage, "decay": decay}
        out["fused"] = score
        return out


def keyword_weight(text: str) -> float:
    """The keyword side's weight for the query `text`: LOOKUP_WEIGHT for a lookup, 1 with identifiers, else
    KEYWORD_WEIGHT."""
    if len(text.split()) <= LOOKUP_WORDS and not _CJK.search(text):
        return LOOKUP_WEIGHT
    return 1.0 if fts.identifier_like(text) else KEYWORD_WEIGHT


def rare(hits: list[Hit], asked: int, terms: list[fts.Term]) -> bool:
    """The keyword side's `hits` (`asked` were asked for) are every chunk that holds any of the question's
    `terms`, they are in at most RARE_DOCUMENTS documents, and the first holds every term as written: the question
    names something exactly (a name, a code, a word that one note holds). Then its keyword hits are evidence
    whatever their BM25 (in a small collection a word found once scores under KEYWORD_FLOOR: BM25 grows with the
    number of chunks), and weigh as a lookup's. (A rare word of a longer question that the first hit does not
    hold whole, "kitchen" of "kitchen renovation budget" in a page that says "kitchen sink", is not a lookup.)"""
    if not hits or len(hits) >= asked or len({h.source_path for h in hits}) > RARE_DOCUMENTS:
        return False
    text = fts.normalize(hits[0].content).casefold()
    return all(t.text.casefold() in text for t in terms)


def keyword_evidence(
    hits: list[Hit], explain: Explanation | None = None, side: str = "keyword", exact: bool = False
) -> list[Hit]:
    """The keyword hits that are evidence, not noise: BM25 at least KEYWORD_FLOOR (unless `exact`: see `rare`)
    and KEYWORD_RELATIVE of the best. `explain`: told of the documents left out (on `side`) and why.

    Rank fusion sees only ranks, so without this a query whose words happen to be common (a Chinese question
    about an English document shares only particles and single characters with the Chinese documents) would push
    every weak keyword match above the document the vector side ranked first.
    """
    floor = 0.0 if exact else KEYWORD_FLOOR
    cut = max(floor, KEYWORD_RELATIVE * hits[0].score) if hits else floor
    kept = [h for h in hits if h.score >= cut] if hits and hits[0].score >= floor else []
    if explain is not None:
        explain.params.update(keyword_floor=floor, keyword_relative=KEYWORD_RELATIVE)
        explain.params.setdefault("keyword_cut", {})[side] = cut
        dropped = explain.side(side)
        for path, score in _best(hits).items():
            if path not in dropped:
                dropped[path] = Side(None, score, dropped="floor" if score < floor else "relative")
    return kept


def near_empty(hit: Hit) -> bool:
    """`hit`'s document is one chunk with next to no text past its front matter (a stub, a draft). Its title and
    tags match a question as well as any document's can, and its one short chunk scores high on both sides, but
    it answers nothing."""
    if hit.source_chunks > 1:
        return False
    text = _FRONT_MATTER.sub("", hit.content, count=1)
    return sum(ch.isalnum() for ch in text) < EMPTY_CHARS


def fuse(dense: list[Hit], keyword: list[Hit], k: int) -> list[Hit]:
    """Reciprocal rank fusion (constant RRF_RANK_CONSTANT) of two ranked lists of chunks."""
    return _rrf([dense, keyword], k)


def _rrf(lists: list[list[Hit]], k: int) -> list[Hit]:
    order, scores = _rrf_order(lists)
    return [replace(hit, score=scores[hit.source_path, hit.chunk_index]) for hit in order[:k]]


def _rrf_order(lists: list[list[Hit]]) -> tuple[list[Hit], dict[tuple[str, int], float]]:
    """Each chunk of `lists` once (its first hit), best RRF score first, and the scores by (path, chunk)."""
    scores: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], Hit] = {}
    for ranked in lists:
        for rank, hit in enumerate(ranked, 1):
            key = (hit.source_path, hit.chunk_index)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_RANK_CONSTANT + rank)
            first.setdefault(key, hit)
    return sorted(first.values(), key=lambda h: scores[h.source_path, h.chunk_index], reverse=True), scores


def _size(hit: Hit) -> float:
    return math.log(max(1, hit.source_chunks))


def _by_document(hits: list[Hit], value: dict[str, float]) -> list[str]:
    """The documents of `hits` ranked by `value` (higher first), ties in the order first seen."""
    order = list(dict.fromkeys(h.source_path for h in hits))
    return sorted(order, key=lambda p: -value[p])


def fuse_documents(
    dense: list[Hit],
    keyword: list[Hit],
    k: int,
    keyword_weight: float = KEYWORD_WEIGHT,
    translated: list[Hit] | None = None,
    leads: Mapping[str, float] | None = None,
    explain: Explanation | None = None,
    translated_weight: float = TRANSLATED_WEIGHT,
) -> list[Hit]:
    """The best `k` passages of a hybrid query: `dense` (cosine similarities), `keyword` and `translated` (BM25
    evidence, see `keyword_evidence`; `translated`: the hits of the question's English glosses) fused per document,
    each document's passages then in their chunk-level (RRF) order. `leads`: the cosine of the question to the
    lead of each document that has one (documents in no list are ignored). `explain`: filled as it goes."""
    translated = translated or []
    cosine: dict[str, float] = {}
    for h in dense:
        cosine[h.source_path] = max(cosine.get(h.source_path, -2.0), h.score - DENSE_SIZE_PENALTY * _size(h))
    doc_score: dict[str, float] = {}
    for rank, path in enumerate(_by_document(dense, cosine), 1):
        doc_score[path] = 1.0 / (DOC_RANK_CONSTANT + rank)
        if explain is not None:
            explain.side("vector")[path] = Side(rank, cosine[path], doc_score[path])
    sizes = {h.source_path: _size(h) for h in [*dense, *keyword, *translated]}
    for name, hits, weight in (
        ("keyword", keyword, keyword_weight),
        ("glosses", translated, translated_weight),
    ):
        best = _best(hits) if explain is not None else {}
        for rank, path in enumerate(dict.fromkeys(h.source_path for h in hits), 1):
            share = weight / (DOC_RANK_CONSTANT + rank) / (1.0 + KEYWORD_SIZE_PENALTY * sizes[path])
            doc_score[path] = doc_score.get(path, 0.0) + share
            if explain is not None:
                explain.side(name)[path] = Side(rank, best[path], share)
    if leads:
        found = sorted((p for p in doc_score if p in leads), key=lambda p: -leads[p])
        for rank, path in enumerate(found, 1):
            share = LEAD_WEIGHT / (DOC_RANK_CONSTANT + rank) if rank <= LEAD_DEPTH else 0.0
            doc_score[path] += share
            if explain is not None:
                explain.side("lead")[path] = Side(rank, leads[path], share)
    empty = {h.source_path for h in [*dense, *keyword, *translated] if near_empty(h)}
    for path in empty:
        doc_score[path] *= EMPTY_WEIGHT
    passages: dict[str, list[Hit]] = {}
    for hit in _rrf_order([dense, keyword, translated])[0]:  # chunk-level order within each document
        passages.setdefault(hit.source_path, []).append(hit)
    ranked = [(doc_score[path] * PASSAGE_DECAY**i, hit) for path, hits in passages.items()
              for i, hit in enumerate(hits)]  # fmt: skip
    ranked.sort(key=lambda t: t[0], reverse=True)  # (stable: ties keep the order above)
    if explain is not None:
        _explain_fused(explain, doc_score, passages, [hit for _, hit in ranked], keyword_weight, empty,
                       translated_weight)  # fmt: skip
    return [replace(hit, score=score) for score, hit in ranked[:k]]


def _best(hits: list[Hit]) -> dict[str, float]:
    """Each document's best score in `hits`."""
    best: dict[str, float] = {}
    for h in hits:
        best[h.source_path] = max(best.get(h.source_path, h.score), h.score)
    return best


def _explain_fused(explain: Explanation, doc_score: dict[str, float], passages: dict[str, list[Hit]],
                   ranked: list[Hit], keyword_weight: float, empty: set[str],
                   translated_weight: float) -> None:  # fmt: skip
    explain.method = "hybrid"
    explain.params.update(
        fusion="rrf",  # each side's share: weight / (rank_constant + rank), summed per document
        rank_constant=DOC_RANK_CONSTANT,
        weights={"vector": 1.0, "keyword": keyword_weight, "glosses": translated_weight, "lead": LEAD_WEIGHT},
        lead_depth=LEAD_DEPTH,
        size_penalty={"vector": DENSE_SIZE_PENALTY, "keyword": KEYWORD_SIZE_PENALTY},
        passage_decay=PASSAGE_DECAY,
        empty_weight=EMPTY_WEIGHT,
    )
    explain.empty = empty
    order = dict.fromkeys(h.source_path for h in ranked)  # in the order of their first passages
    explain.documents = {p: (rank, doc_score[p]) for rank, p in enumerate(order, 1)}
    explain.chunks = {(h.source_path, h.chunk_index): (i, PASSAGE_DECAY**i)
                      for hits in passages.values() for i, h in enumerate(hits)}  # fmt: skip
