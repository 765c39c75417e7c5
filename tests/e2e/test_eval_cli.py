"""`ragd eval` through the real command over the bilingual corpus indexed with `ragd run --once`."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.index.query.evaluate import ALL, Outcome, Scores, by_group, documents
from tests.e2e.conftest import ragd, ragd_json, write_api_config
from tests.support.fake_openai import FakeOpenAI

BILINGUAL = Path(__file__).parents[1] / "data" / "bilingual"
K = 10


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(corpus root, queries file) with the corpus indexed once; RAGD_CONFIG set by each test."""
    base = tmp_path_factory.mktemp("eval")
    shutil.copytree(BILINGUAL / "corpus", base / "kb")
    queries = base / "queries.jsonl"
    rows = json.loads((BILINGUAL / "queries.json").read_text())
    queries.write_text("".join(json.dumps({"query": r["query"], "answer": r["answer"], "group": r["kind"]},
                                          ensure_ascii=False) + "\n" for r in rows))  # fmt: skip
    return base / "kb", queries


@pytest.fixture
def server(indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    root, _ = indexed
    with FakeOpenAI(dim=32, mode="words") as srv:
        cfg = write_api_config(root.parent / f"ragd-{srv.port}.toml", srv)
        monkeypatch.setenv("RAGD_CONFIG", str(cfg))
        monkeypatch.setenv("RAGD_DATA_DIR", str(root.parent / "data"))
        ragd("run", "--once", str(root))  # a second test finds the sidecars done: the index only
        yield srv


def test_eval_json_scores_are_the_metric_module_on_the_search_results(
    indexed: tuple[Path, Path], server: FakeOpenAI
) -> None:
    root, queries = indexed
    got = ragd_json("eval", str(queries), "--base", str(root))
    rows = json.loads((BILINGUAL / "queries.json").read_text())
    assert got["queries"] == len(rows) and got["top_k"] == K
    assert list(got["modes"]) == ["vector", "keyword", "hybrid"]
    for rep in got["modes"].values():
        outcomes = []
        for row, res in zip(rows, rep["results"], strict=True):
            assert res["query"] == row["query"] and res["answers"] == [str(root / row["answer"])]
            outcomes.append(Outcome(res["query"], res["group"], tuple(res["answers"]), tuple(res["ranking"]),
                                    Scores.of(res["ranking"], res["answers"], K)))  # fmt: skip
        expected = {g: s.to_json(K) for g, s in by_group(outcomes).items()}
        assert {
            g: {m: v for m, v in s.items() if m != "queries"} for g, s in rep["groups"].items()
        } == expected
        assert rep["groups"][ALL]["queries"] == len(rows)
        assert set(rep["groups"]) == {ALL, "en", "zh", "cross", "identifier", "zh_keyword"}
    # the rankings are what `ragd search` answers (one result per file, the best first)
    for i in (0, 12, 30):
        for mode in ("keyword", "hybrid"):
            found = ragd_json("search", rows[i]["query"], "--mode", mode, "-k", str(K), "--one-per-file")
            assert got["modes"][mode]["results"][i]["ranking"] == documents(
                r["path"] for r in found["results"]
            )
    keyword = got["modes"]["keyword"]["groups"]
    assert keyword["identifier"]["recall@1"] > 0.5  # the exact identifiers are found by their words


def test_eval_table_prints_the_json_figures(indexed: tuple[Path, Path], server: FakeOpenAI) -> None:
    root, queries = indexed
    data = ragd_json("eval", str(queries), "--base", str(root), "--mode", "hybrid", "--worst", "3")
    out = ragd("eval", str(queries), "--base", str(root), "--mode", "hybrid", "--worst", "3").stdout
    lines = out.splitlines()
    header = next(n for n, ln in enumerate(lines) if ln.startswith("mode"))
    assert lines[header].split() == [
        "mode",
        "group",
        "queries",
        "recall@1",
        "recall@5",
        "hit@5",
        "MRR@10",
        "nDCG@10",
    ]
    table = [ln.split() for ln in lines[header + 1 : header + 1 + len(data["modes"]["hybrid"]["groups"])]]
    for cells, (group, s) in zip(table, data["modes"]["hybrid"]["groups"].items(), strict=True):
        assert cells[:3] == ["hybrid", group, str(s["queries"])]
        assert [float(c) for c in cells[3:]] == [
            round(s[m], 3) for m in ("recall@1", "recall@5", "hit@5", "mrr@10", "ndcg@10")
        ]
    hybrid = data["modes"]["hybrid"]
    assert re.search(r"median query time: hybrid \d+\.\d ms \(p95 \d+\.\d\)", out), (
        out
    )  # times of another run
    assert 0 < hybrid["median_ms"] <= hybrid["p95_ms"]
    worst = data["modes"]["hybrid"]["worst"]
    assert len(worst) <= 3
    for w in worst:
        assert w["query"] in out
        top = str(Path(w["top"]).relative_to(root)) if w["top"] else "(nothing found)"
        assert f"; top {top}" in out


def test_eval_says_what_is_wrong_with_the_queries_file(
    indexed: tuple[Path, Path], server: FakeOpenAI
) -> None:
    root, queries = indexed
    bad = queries.parent / "bad.jsonl"
    bad.write_text('{"query": "x", "answer": "ops/nope.md"}\n')
    err = ragd("eval", str(bad), "--base", str(root), check=2).stderr
    assert "line 1: answer ops/nope.md is not a file" in err and "--base" in err
    bad.write_text('{"query": "x"}\n')
    assert "give 'answers'" in ragd("eval", str(bad), "--base", str(root), check=2).stderr
    relative = ragd("eval", str(queries), check=2).stderr  # no roots configured, no --base
    assert "is not a file (looked at: no root to look under)" in relative
