"""Retrieval metrics (index/query/evaluate.py) and the queries file (verbs/evaluate.py), against hand-computed figures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ragd.errors import RagdError
from ragd.index.query.evaluate import (
    ALL,
    Outcome,
    Scores,
    by_group,
    documents,
    hit_at,
    mrr_at,
    ndcg_at,
    rank_of,
    recall_at,
    worst,
)
from ragd.verbs.evaluate import load_queries

RANKING = ["a", "b", "c", "d", "e", "f"]


def test_documents_keep_each_documents_first_chunk() -> None:
    assert documents(["x", "y", "x", "z", "y"]) == ["x", "y", "z"]
    assert rank_of(["x", "y"], "y") == 2 and rank_of(["x"], "q") is None


def test_one_answer() -> None:
    assert recall_at(RANKING, ["c"], 1) == 0.0 and recall_at(RANKING, ["c"], 5) == 1.0
    assert mrr_at(RANKING, ["c"], 10) == pytest.approx(1 / 3)
    assert ndcg_at(RANKING, ["c"], 10) == pytest.approx(1 / math.log2(4))  # 1/log2(3+1) over an ideal of 1
    assert ndcg_at(RANKING, ["a"], 10) == 1.0
    assert (mrr_at(RANKING, ["f"], 5), ndcg_at(RANKING, ["f"], 5), recall_at(RANKING, ["f"], 5)) == (0, 0, 0)
    assert (hit_at(RANKING, ["c"], 5), hit_at(RANKING, ["c"], 2), hit_at(RANKING, ["f"], 5)) == (
        1.0,
        0.0,
        0.0,
    )


def test_several_answers() -> None:
    answers = ["b", "e", "zz"]  # zz was not found at all
    assert recall_at(RANKING, answers, 1) == 0.0
    assert recall_at(RANKING, answers, 5) == pytest.approx(2 / 3)
    assert mrr_at(RANKING, answers, 10) == 0.5
    dcg = 1 / math.log2(3) + 1 / math.log2(6)  # ranks 2 and 5
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # three answers at ranks 1, 2, 3
    assert ndcg_at(RANKING, answers, 10) == pytest.approx(dcg / ideal)
    assert recall_at(RANKING, ["a", "b"], 1) == 0.5  # two answers: at most half of them in the top 1
    assert hit_at(RANKING, ["a", "b"], 1) == 1.0 and hit_at(RANKING, answers, 5) == 1.0  # any one of them
    assert ndcg_at(RANKING, ["b", "a"], 10) == pytest.approx(1.0)
    assert ndcg_at(RANKING, list("abcdefghijkl"), 3) == pytest.approx(1.0)  # the ideal holds k documents only


def test_scores_per_group_and_the_worst() -> None:
    def out(q: str, group: str, answers: list[str]) -> Outcome:
        return Outcome(q, group, tuple(answers), tuple(RANKING), Scores.of(RANKING, answers, 10))

    outs = [out("q1", "zh", ["a"]), out("q2", "zh", ["c"]), out("q3", "en", ["zz"]), out("q4", "", ["b"])]
    groups = by_group(outs)
    assert list(groups) == [ALL, "zh", "en"]  # a query without a group counts in `all` only
    assert groups["zh"].recall_1 == 0.5 and groups["zh"].mrr == pytest.approx((1 + 1 / 3) / 2)
    assert groups[ALL].recall_5 == 0.75 and groups["en"] == Scores(0.0, 0.0, 0.0, 0.0, 0.0)
    assert groups[ALL].to_json(10) == {"recall@1": 0.25, "recall@5": 0.75, "hit@5": 0.75, "mrr@10": pytest.approx(
        (1 + 1 / 3 + 0 + 0.5) / 4), "ndcg@10": groups[ALL].ndcg}  # fmt: skip
    assert [o.query for o in worst(outs, 2)] == ["q3", "q2"]
    assert [o.query for o in worst(outs, 10)] == ["q3", "q2", "q4"]  # q1 is perfect: not listed
    assert outs[2].ranks() == [None]
    with pytest.raises(ValueError):
        Scores.of(RANKING, [], 10)


def test_queries_file_json_lines_and_json(tmp_path: Path) -> None:
    (tmp_path / "kb" / "d").mkdir(parents=True)
    (tmp_path / "kb" / "d" / "x.md").write_text("x")
    (tmp_path / "kb" / "y.md").write_text("y")
    lines = tmp_path / "q.jsonl"
    lines.write_text('{"query": "one", "answer": "d/x.md", "group": "en"}\n\n'
                     '{"query": "two", "answers": ["y.md", "d/x.md", "y.md"]}\n')  # fmt: skip
    got = load_queries(lines, [tmp_path / "kb"])
    assert [(q.query, q.group) for q in got] == [("one", "en"), ("two", "")]
    assert got[1].answers == (str(tmp_path / "kb" / "y.md"), str(tmp_path / "kb" / "d" / "x.md"))
    js = tmp_path / "q.json"
    js.write_text(f'[{{"query": "abs", "answer": "{tmp_path / "kb" / "y.md"}"}}]')
    assert load_queries(js, [])[0].answers == (str(tmp_path / "kb" / "y.md"),)
    assert load_queries(lines, [], base=tmp_path / "kb")[0].answers == (str(tmp_path / "kb" / "d" / "x.md"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"query": "q", "answer": "missing.md"}\n', "line 1: answer missing.md is not a file"),
        ('{"query": "q"}\n', "give 'answers'"),
        ('{"query": "q", "answer": "y.md", "kind": "en"}\n', "unknown argument 'kind'"),
        ('{"query": "q", "answer": "y.md"}\n{oops\n', "line 2 is not valid JSON"),
        ("[{]", "is not valid JSON"),
        ("\n", "holds no query"),
    ],
)
def test_queries_file_errors_name_the_file_and_the_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "y.md").write_text("y")
    path = tmp_path / "q.jsonl"
    path.write_text(text)
    with pytest.raises(RagdError) as err:
        load_queries(path, [tmp_path])
    assert message in err.value.message and err.value.code == "usage"
