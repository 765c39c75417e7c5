"""The development sets' known-answer queries (docs/evaluation.md, "The development sets") are well-formed and
point at documents their corpus really has: each set's committed manifest.json lists the files its pinned
packages build into, so a typo in an answer, a query of an unknown kind, or a 'cross-language' question with an
answer in its own language fails here, without downloading anything. (Read as files: tests never import bench/.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragd.verbs.evaluate import KnownAnswer

BENCH = Path(__file__).resolve().parents[3] / "bench"
# set folder -> (groups its README documents, the fewest queries it holds)
SETS = {
    "devset": ({"zh", "en", "mixed", "cross", "identifier", "list"}, 200),
    "devset_desktop": ({"en", "zh", "mixed", "cross", "paraphrase"}, 150),
    "devset_handbook": ({"en", "zh", "mixed", "cross", "paraphrase"}, 150),
}
HAN = re.compile(r"[\u4e00-\u9fff]")


def language(path: str) -> str:
    """'zh' or 'en': the corpus keeps each language in its own folder (zh/…, debian-reference/zh-cn/…)."""
    return "zh" if re.match(r"(zh/|debian-reference/zh-cn/)", path) else "en"


def load(folder: str) -> tuple[list[KnownAnswer], dict[str, str]]:
    lines = (BENCH / folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [KnownAnswer.model_validate(json.loads(line)) for line in lines if line.strip()]
    files = json.loads((BENCH / folder / "manifest.json").read_text(encoding="utf-8"))["files"]
    return queries, files


@pytest.mark.parametrize("folder", sorted(SETS))
def test_every_answer_is_a_document_of_the_set(folder: str) -> None:
    queries, files = load(folder)
    missing = [(q.query, a) for q in queries for a in q.answers if a not in files]
    assert missing == []


@pytest.mark.parametrize("folder", sorted(SETS))
def test_queries_are_well_formed(folder: str) -> None:
    groups, fewest = SETS[folder]
    queries, _ = load(folder)
    assert len(queries) >= fewest
    assert {q.group for q in queries} == groups
    texts = [q.query.strip() for q in queries]
    assert len(set(texts)) == len(texts), "a question is asked twice"
    assert all(len(set(q.answers)) == len(q.answers) for q in queries), "an answer is listed twice"
    assert all(not a.startswith("/") and ".." not in a.split("/") for q in queries for a in q.answers)


@pytest.mark.parametrize("folder", sorted(SETS))
def test_cross_language_questions_have_answers_only_in_the_other_language(folder: str) -> None:
    queries, _ = load(folder)
    wrong = []
    for q in queries:
        if q.group == "cross":
            asked = "zh" if HAN.search(q.query) else "en"
            if any(language(a) == asked for a in q.answers):
                wrong.append(q.query)
    assert wrong == []


@pytest.mark.parametrize("folder", ["devset_desktop", "devset_handbook"])
def test_each_kind_of_question_is_well_represented(folder: str) -> None:
    queries, _ = load(folder)
    per_group = {g: sum(1 for q in queries if q.group == g) for g in SETS[folder][0]}
    assert min(per_group.values()) >= 25, per_group
    chinese = [q for q in queries if q.group in ("zh", "mixed")]
    assert all(HAN.search(q.query) for q in chinese)
    mixed = [q for q in queries if q.group == "mixed"]
    assert all(re.search(r"[A-Za-z]", q.query) for q in mixed), "a mixed question names an English term"
    assert all(not HAN.search(q.query) for q in queries if q.group == "en")
