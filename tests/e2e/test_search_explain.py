"""`search --explain`: each result's rank and score on each side and how fusion combined them, through `ragd
search`, `ragctl search` and the MCP `search` tool, checked against the rankings each side gives alone."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.e2e.agent import AgentProcess, ragctl, ragctl_json, running_agent
from tests.e2e.conftest import FAST_WATCH, ragd, ragd_json, write_api_config
from tests.e2e.test_mcp_stdio import over_stdio, texts
from tests.support.fake_openai import FakeOpenAI

DOCS = 150  # more one-passage documents than the vector side returns (100): some are found by keyword alone


def _corpus(root: Path) -> None:
    root.mkdir(parents=True)
    for i in range(DOCS):
        (root / f"note{i:03}.md").write_text(f"# Note {i}\n\nThe common marker, and the word zqx{i} alone.\n")


def _documents(found: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["path"] for r in found["results"]))


def _check_consistent(found: dict[str, Any]) -> None:
    """The fused order is the order of the fused scores, and each score is what its parts add up to."""
    hits = found["results"]
    assert found["explain"]["method"] == "hybrid" and found["explain"]["fusion"] == "rrf"
    scores = [h["explain"]["fused"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    ranks = [h["explain"]["document"]["rank"] for h in hits]
    assert ranks == sorted(ranks)
    for h in hits:
        why = h["explain"]
        assert set(why) >= {"vector", "keyword", "glosses", "lead", "document", "passage", "fused"}
        assert math.isclose(why["fused"], h["score"], rel_tol=1e-5, abs_tol=1e-6)
        shares = sum(why[s]["share"] for s in ("vector", "keyword", "glosses", "lead") if why[s])
        assert math.isclose(shares, why["document"]["score"], rel_tol=1e-4, abs_tol=1e-6)
        assert math.isclose(why["document"]["score"] * why["passage"]["decay"], why["fused"], rel_tol=1e-4)


def test_explain_shows_each_side_as_it_ranked(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "kb"
    _corpus(root)
    ragd("run", "--once", str(root))
    vector = _documents(ragd_json("search", "zqx0", "--mode", "vector", "-k", "100"))
    assert len(vector) == 100
    alone = [i for i in range(DOCS) if str(root / f"note{i:03}.md") not in vector]
    # a document found by keyword alone: its word's only page, first, with no vector rank
    word = f"zqx{alone[0]}"
    found = ragd_json("search", word, "--explain", "-k", "5")
    _check_consistent(found)
    first = found["results"][0]
    assert first["path"] == str(root / f"note{alone[0]:03}.md")
    assert first["explain"]["vector"] is None and first["explain"]["keyword"]["rank"] == 1
    assert first["explain"]["keyword"]["score"] >= found["explain"]["keyword_floor"]
    # the vector side's ranks are those of the vector search (one passage per document: no size penalty)
    by_vector = _documents(ragd_json("search", word, "--mode", "vector", "-k", "100"))
    for h in found["results"][1:]:
        assert by_vector[h["explain"]["vector"]["rank"] - 1] == h["path"]
    # vector and keyword alone: one side each, ranked as it ranks
    alone_kw = ragd_json("search", word, "--mode", "keyword", "--explain")
    assert alone_kw["explain"] == {"method": "keyword"}
    bm25 = alone_kw["results"][0]["score"]
    assert alone_kw["results"][0]["explain"] == {
        "keyword": {"rank": 1, "score": bm25, "share": bm25},
        "fused": bm25,
    }
    # a word every document holds: the keyword side's BM25 is under the floor, so it does not count
    common = ragd_json("search", "marker", "--explain", "-k", "25")  # (100 keyword hits asked for)
    _check_consistent(common)
    matched = [h["explain"]["keyword"] for h in common["results"] if h["explain"]["keyword"]]
    assert matched and all(m["rank"] is None and m["dropped"] == "floor" and m["share"] == 0 for m in matched)
    assert all(0 < m["score"] < common["explain"]["keyword_floor"] for m in matched)
    # not asked: nothing of it
    plain = ragd_json("search", word, "-k", "5")
    assert "explain" not in plain and all("explain" not in h for h in plain["results"])
    assert [h["path"] for h in plain["results"]] == [h["path"] for h in found["results"]]
    human = ragd("search", word, "--explain", "-k", "2").stdout
    assert human.startswith("hybrid: rrf weight/(10+rank) per side")
    assert "   why: vector – · keyword #1 " in human and " · glosses – · " in human
    assert "keyword 0.0" not in human


def test_explain_in_files_mode_and_for_glosses(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "sgml.md").write_text("# SGML catalog\n\nThe catalog file maps public identifiers.\n")
    for i in range(20):  # (in two documents no word is rare enough for BM25 to pass the floor)
        (root / f"note{i}.md").write_text(f"# 笔记 {i}\n\n今天的天气很好。Other words.\n", encoding="utf-8")
    ragd("run", "--once", str(root))
    found = ragd_json("search", "目录", "--explain")
    assert "catalog" in found["explain"]["glosses"]
    [hit] = [h for h in found["results"] if h["path"] == str(root / "sgml.md")]
    assert hit["explain"]["glosses"]["rank"] == 1 and hit["explain"]["glosses"]["share"] > 0
    files = ragd_json("search", "目录", "--explain", "--files")
    assert files["explain"]["method"] == "hybrid"
    assert all("explain" in c for f in files["files"] for c in f["chunks"])


@pytest.fixture
def agent(tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Any:
    root = tmp_path / "kb"
    _corpus(root)
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server, watch=FAST_WATCH)
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as proc:
        yield proc


def test_explain_over_ragctl_and_mcp(agent: AgentProcess, tmp_path: Path) -> None:
    async def session(client: Client) -> Any:
        await client.list_tools()  # the client validates structured results against the tools' output schemas
        return await client.call_tool("search", {"query": "zqx7 marker", "top_k": 4, "explain": True})

    found = over_stdio(tmp_path / "bridge.log", session, mode="legacy")
    assert not found.is_error, texts(found)
    expected = ragctl_json("search", "zqx7 marker", "-k", "4", "--explain")
    _check_consistent(expected)
    assert found.structured_content is not None
    assert found.structured_content["results"] == expected["results"]
    assert found.structured_content["explain"] == expected["explain"]
    human = ragctl("search", "zqx7 marker", "-k", "4", "--explain").stdout
    assert human.count("   why: vector ") == 4 and "fused " in human
