"""`search`: one verb behind `ragctl search`, the MCP `search` and `query` tools, and `ragd search`."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from ragctl import protocol as p
from tests.integration.verbs.conftest import Running


def test_a_unique_token_is_found_first(running: Running) -> None:
    for token, name in (("zyxgamma", "gamma.md"), ("zyxdelta", "delta.md")):
        res = running.ctl("search", {"query": token, "top_k": 3, "mode": "keyword"})
        assert res["results"][0]["path"].endswith(name), res


def test_path_prefix_limits_the_search(running: Running) -> None:
    sub = str(running.root / "sub")
    res = running.ctl("search", {"query": "token", "top_k": 10, "path_prefix": [sub]})
    assert res["results"] and all(r["path"].startswith(sub + "/") for r in res["results"])
    one = running.ctl(
        "search", {"query": "token", "top_k": 10, "path_prefix": sub}
    )  # one string is a list of one
    assert [r["path"] for r in one["results"]] == [r["path"] for r in res["results"]]


def test_the_earlier_argument_names_are_accepted_with_a_warning(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    new = {
        "query": "zyxalpha",
        "top_k": 1,
        "path_prefix": [str(running.root)],
        "reach": "agent",
        "mode": "keyword",
    }
    with caplog.at_level(logging.WARNING, "ragd.index.query.searchquery"):
        old = running.ctl("search", {"query": "zyxalpha", "k": 1, "path": [str(running.root)], "scope": "agent",
                                     "mode": "keyword"})  # fmt: skip
    assert len(old["results"]) == 1 and old["results"][0]["path"].endswith("alpha.md")
    assert old == running.ctl("search", new)
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name, now in (("k", "top_k"), ("path", "path_prefix"), ("scope", "reach")):
        assert f"search argument {name!r} is deprecated" in warned and repr(now) in warned, warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, "ragd.index.query.searchquery"):
        again = running.ctl("search", {"query": "zyxalpha", "k": 1, "mode": "keyword"})
    assert again["results"] and not caplog.records  # said once per process and name
    both = running.refused("search", {"query": "x", "k": 1, "top_k": 2})
    assert both.code == p.BAD_REQUEST and "give only 'top_k'" in both.message
    mcp = running.tool("search", {"query": "zyxalpha", "top_k": 1, "scope": "agent", "mode": "keyword"})
    assert not mcp.get("isError") and mcp["structuredContent"]["results"][0]["path"].endswith("alpha.md")
    several = running.tool("search", {"query": "token", "top_k": 10, "path_prefix": ["sub/deep", "sub"]})
    assert several["structuredContent"]["results"], (
        several
    )  # MCP takes a list of prefixes too, as the wire does


# The refusals below are each asked in turn of one agent (an agent started for each cost its start-up every time).
BAD_ARGUMENTS = [
    ({"query": "x", "top_k": 0}, "'top_k' must be greater than or equal to 1"),
    ({"query": "x", "top_k": 1000}, "'top_k' must be less than or equal to 100"),
    ({"query": "x", "top_k": "5"}, "'top_k' must be a valid integer"),
    ({"query": "x", "mode": "fuzzy"}, "'mode' must be 'hybrid', 'vector' or 'keyword'"),
    ({"query": "x", "topk": 3}, "unknown argument 'topk'"),
    ({}, "argument 'query' is required"),
]


def test_bad_arguments_name_the_argument(running: Running) -> None:
    for args, says in BAD_ARGUMENTS:
        err = running.refused("search", args)
        assert err.code == p.BAD_REQUEST and says in err.message, (args, err.message)


def test_mcp_search_and_query_answer_as_the_control_verb(running: Running) -> None:
    ctl = running.ctl("search", {"query": "quokka", "top_k": 3})["results"]
    mcp = running.tool("search", {"query": "quokka", "top_k": 3})
    assert not mcp.get("isError")
    assert [r["path"] for r in mcp["structuredContent"]["results"]] == [r["path"] for r in ctl]
    query = running.tool("query", {"q": "quokka", "topn": 3})["structuredContent"]["result"]
    assert [h["source"] for h in query] == [r["path"] for r in ctl]


def test_a_scope_outside_the_roots_is_a_usage_error_naming_them(running: Running) -> None:
    """It answered "no results" (ragctl, exit 0) or unfiltered results (MCP, for `..`)."""
    for prefix in ("/etc", "../..", "sub/../../x"):
        err = running.refused("search", {"query": "token", "path_prefix": [prefix]})
        assert err.code == p.BAD_REQUEST and str(running.root) in err.hint, (prefix, err.message, err.hint)
        mcp = running.tool("search", {"query": "token", "path_prefix": prefix})
        assert mcp.get("isError") and "path_prefix" in mcp["content"][0]["text"], (prefix, mcp)
    ragctl = subprocess.run([sys.executable, "-m", "ragctl", "search", "token", "--path-prefix", "/etc"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ragctl.returncode == 2 and "not under any root" in ragctl.stderr, ragctl


MCP_BAD_ARGUMENTS = [
    ("search", {"query": "x", "top_k": 100000}, "argument 'top_k' must be less than or equal to 100"),
    ("search", {"query": "x", "mode": "fuzzy"}, "argument 'mode' must be 'hybrid', 'vector' or 'keyword'"),
    ("read_chunk", {"path": "alpha.md", "chunk_index": 0, "neighbors": 50},
     "argument 'neighbors' must be less than or equal to 20"),
]  # fmt: skip


def test_mcp_argument_errors_read_like_the_others(running: Running) -> None:
    """Not pydantic's report ("1 validation error for searchArguments ... visit https://errors.pydantic.dev")."""
    for tool, arguments, says in MCP_BAD_ARGUMENTS:
        result = running.tool(tool, arguments)
        text = result["content"][0]["text"]
        assert result.get("isError") and says in text and "pydantic" not in text and "\n" not in text, text


def test_file_mode_answers_documents_with_their_best_passages_everywhere(running: Running) -> None:
    """`files`: "which documents mention ..." over the control verb, `ragctl search --files` and MCP."""
    filler = "The island rangers count the animals along the coastal trail every morning. " * 12
    long = "\n\n".join(f"## Part {i}\n\nQuokka sightings, part {i}. {filler}" for i in range(12))
    (running.root / "sub" / "long.md").write_text("# Quokka log\n\n" + long + "\n")
    running.wait()
    found = running.ctl("search", {"query": "quokka", "top_k": 3, "mode": "keyword", "files": True})
    files = found["files"]
    paths = [f["path"] for f in files]
    assert len(paths) == len(set(paths)) and str(running.root / "sub" / "long.md") in paths
    log = next(f for f in files if f["path"].endswith("long.md"))
    assert log["matches"] > 3 and len(log["chunks"]) == 3 and log["score"] == log["chunks"][0]["score"]
    assert [r["path"] for r in found["results"]] == paths  # each document's best passage
    shown = subprocess.run([sys.executable, "-m", "ragctl", "search", "quokka", "--files", "-k", "3", "--mode",
                            "keyword"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"{log['matches']} passages matched" in shown.stdout and "long.md" in shown.stdout
    mcp = running.tool("search", {"query": "quokka", "top_k": 3, "mode": "keyword", "files": True})
    assert not mcp.get("isError") and mcp["structuredContent"]["files"] == files
    plain = running.tool("search", {"query": "quokka", "top_k": 3})
    assert "files" not in plain["structuredContent"]


def test_where_filters_on_metadata_and_files_carry_it(running: Running) -> None:
    (running.root / "sub" / ".ragd-meta.toml").write_text('product = "Q-1"\n')
    running.wait()
    res = running.ctl("search", {"query": "token", "top_k": 10, "where": "product=q-1", "files": True})
    assert {f["rel_path"] for f in res["files"]} == {"sub/gamma.md", "sub/deep/delta.md"}
    assert all(f["metadata"] == {"product": "Q-1"} for f in res["files"])
    assert all(r["metadata"] == {"product": "Q-1"} for r in res["results"])
    plain = running.ctl("search", {"query": "zyxalpha", "top_k": 1, "mode": "keyword"})["results"][0]
    assert "metadata" not in plain  # a document without metadata: no key
    none = running.ctl("search", {"query": "token", "where": ["product^=q", "product=q-2"]})
    assert none["results"] == []
    for where, says in ((["product"], "not a metadata filter"), (["bad!key=1"], "is not a metadata key"),
                        ([3], "'where.0' must be a valid string")):  # fmt: skip
        err = running.refused("search", {"query": "x", "where": where})
        assert err.code == p.BAD_REQUEST and says in err.message, err.message
    mcp = running.tool("query", {"q": "token", "topn": 10, "where": ["product=Q-1"]})
    assert {h["source"] for h in mcp["structuredContent"]["result"]} == {
        str(running.root / "sub" / "gamma.md"),
        str(running.root / "sub" / "deep" / "delta.md"),
    }
