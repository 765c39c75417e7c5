"""Retrieval metrics over known answers (`ragd eval`): pure functions of a document ranking and its answers.

Relevance is binary: a document is right or it is not. A ranking lists documents best first, each once (a
document's rank is that of its first chunk among the hits). With several answers, recall@k is the fraction of
them in the top k (so a query with two answers scores at most 0.5 at recall@1); MRR@k counts the first right
document; hit@5 says whether any right document is among the first five; nDCG@k rewards every right document by
its position, against the best possible order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ALL = "all"  # the row over every query


def documents(paths: Iterable[str]) -> list[str]:
    """A ranking of documents from chunk hits' paths, best first: each document at its first occurrence."""
    return list(dict.fromkeys(paths))


def rank_of(ranking: Sequence[str], answer: str) -> int | None:
    """1-based position of `answer` in `ranking`, None when absent."""
    try:
        return ranking.index(answer) + 1
    except ValueError:
        return None


def recall_at(ranking: Sequence[str], answers: Sequence[str], k: int) -> float:
    top = set(ranking[:k])
    return sum(a in top for a in set(answers)) / len(set(answers))


def hit_at(ranking: Sequence[str], answers: Sequence[str], k: int) -> float:
    """1 when any answer is among the first k documents, else 0 (recall@k of a query with one answer)."""
    return float(not set(ranking[:k]).isdisjoint(answers))


def mrr_at(ranking: Sequence[str], answers: Sequence[str], k: int) -> float:
    wanted = set(answers)
    for i, doc in enumerate(ranking[:k], 1):
        if doc in wanted:
            return 1.0 / i
    return 0.0


def ndcg_at(ranking: Sequence[str], answers: Sequence[str], k: int) -> float:
    wanted = set(answers)
    dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(ranking[:k], 1) if doc in wanted)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


@dataclass(frozen=True)
class Scores:
    recall_1: float
    recall_5: float
    hit_5: float  # any answer among the first five
    mrr: float  # @k
    ndcg: float  # @k

    @classmethod
    def of(cls, ranking: Sequence[str], answers: Sequence[str], k: int) -> Scores:
        if not answers:
            raise ValueError("a known-answer query needs at least one answer")
        return cls(recall_at(ranking, answers, 1), recall_at(ranking, answers, 5), hit_at(ranking, answers, 5),
                   mrr_at(ranking, answers, k), ndcg_at(ranking, answers, k))  # fmt: skip

    @classmethod
    def mean(cls, scores: Sequence[Scores]) -> Scores:
        if not scores:
            raise ValueError("no scores to average")
        n = len(scores)
        return cls(sum(s.recall_1 for s in scores) / n, sum(s.recall_5 for s in scores) / n,
                   sum(s.hit_5 for s in scores) / n, sum(s.mrr for s in scores) / n,
                   sum(s.ndcg for s in scores) / n)  # fmt: skip

    def to_json(self, k: int) -> dict[str, float]:
        return {
            "recall@1": self.recall_1,
            "recall@5": self.recall_5,
            "hit@5": self.hit_5,
            f"mrr@{k}": self.mrr,
            f"ndcg@{k}": self.ndcg,
        }


@dataclass(frozen=True)
class Outcome:
    """One query's result: what it asked, its answers, the documents found (best first) and its scores."""

    query: str
    group: str
    answers: tuple[str, ...]
    ranking: tuple[str, ...]
    scores: Scores
    seconds: float = 0.0

    def ranks(self) -> list[int | None]:
        return [rank_of(self.ranking, a) for a in self.answers]


def by_group(outcomes: Sequence[Outcome]) -> dict[str, Scores]:
    """Mean scores over every query (`all`) and over each group's, groups in the order first seen."""
    groups: dict[str, list[Scores]] = {ALL: [o.scores for o in outcomes]}
    for o in outcomes:
        if o.group:
            groups.setdefault(o.group, []).append(o.scores)
    return {g: Scores.mean(s) for g, s in groups.items() if s}


def worst(outcomes: Sequence[Outcome], n: int) -> list[Outcome]:
    """The `n` queries that did worst (lowest nDCG, then lowest MRR, then the file's order)."""
    order = sorted(range(len(outcomes)), key=lambda i: (outcomes[i].scores.ndcg, outcomes[i].scores.mrr, i))
    return [outcomes[i] for i in order[:n] if outcomes[i].scores.ndcg < 1.0]


def median_ms(outcomes: Sequence[Outcome]) -> float:
    return statistics.median(o.seconds for o in outcomes) * 1000 if outcomes else 0.0


def p95_ms(outcomes: Sequence[Outcome]) -> float:
    """The 95th percentile of the queries' times (the slowest one's with fewer than 20 queries)."""
    times = sorted(o.seconds for o in outcomes)
    return times[min(len(times) - 1, int(0.95 * len(times)))] * 1000 if times else 0.0
