"""The search service over a real zvec collection, plus the keyword-query builder and snippets it relies on."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragd.config import IndexConfig
from ragd.errors import RagdError
from ragd.index import IndexBackend, open_index
from ragd.index.keyword.fts import MAX_TERMS, query_string
from ragd.index.query.search import FILE_CANDIDATES, FileResult, SearchResult, SearchService, snippet
from ragd.index.query.searchquery import SearchQuery
from ragd.verbs.arguments import parse
from tests.unit.index.test_index_zvec import CORPUS, IDENTITY, embed, load_corpus

Env = tuple[IndexBackend, Path, Path]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("search")
    root, other = base / "kb", base / "other"
    index = open_index(base / "data", IDENTITY, IndexConfig())
    load_corpus(index, root)
    load_corpus(index, other, {"x/readme.md": ["Another root, about tomato soup and ERR_CONN_RESET."]})
    load_corpus(index, base / "gone", {"old.md": ["tomato soup from a root that is no longer configured"]})
    yield index, root, other
    index.close()


class CountingEmbedder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> np.ndarray:
        self.calls.append(text)
        return embed(text)


def service(env: Env, embedder: CountingEmbedder | None = None) -> SearchService:
    index, root, other = env
    return SearchService(index, embedder or CountingEmbedder(), [root, other])


def search(svc: SearchService, query: Any, *, roots: Sequence[str] = (), **asked: Any) -> list[SearchResult]:
    """`svc.search` of the query the edges would build from these arguments (a bad one: RagdError)."""
    return svc.search(parse(SearchQuery, {"query": query, **asked}), roots=roots)


def search_files(svc: SearchService, query: str, **asked: Any) -> list[FileResult]:
    return svc.search_files(parse(SearchQuery, {"query": query, **asked}))


def rels(results: list) -> list[str]:
    return [r.rel_path for r in results]


def test_results_carry_location_and_snippet(env: Env) -> None:
    _, root, _ = env
    best = search(service(env), "tomato soup recipe", top_k=3)[0]
    assert (best.path, best.rel_path, best.root) == (
        str(root / "notes/cooking.md"),
        "notes/cooking.md",
        str(root),
    )
    assert best.content == CORPUS["notes/cooking.md"][0] and best.chunk_index == 0
    assert (best.heading_path, best.page, best.start_line, best.end_line) == (("cooking.md",), None, 1, 9)
    assert "tomato soup" in best.snippet and best.score > 0
    data = json.loads(json.dumps(best.to_dict()))
    assert data["heading_path"] == ["cooking.md"] and data["rel_path"] == "notes/cooking.md"


def test_modes(env: Env) -> None:
    svc = service(env)
    assert set(rels(search(svc, "ERR_CONN_RESET", mode="keyword", top_k=10))) == {
        "docs/network.md",
        "mixed/errors.md",
        "x/readme.md",
    }
    assert rels(search(svc, "piano scales arpeggios", mode="vector", top_k=1)) == ["notes/music.md"]
    # the Chinese page by its words, the English one by their glosses (piano, scale)
    assert set(rels(search(svc, "钢琴 音阶", mode="hybrid", top_k=2))) == {"中文/音乐.md", "notes/music.md"}
    # and the reverse: the English page by its words, the Chinese one by its words' Chinese glosses (钢琴, 数据库)
    assert set(rels(search(svc, "piano", mode="hybrid", top_k=2))) == {"中文/音乐.md", "notes/music.md"}
    assert "中文/数据库.md" in rels(search(svc, "the database", mode="hybrid", top_k=3))
    assert search(svc, "?!", mode="keyword") == []


def test_sources_outside_the_configured_roots_are_never_returned(env: Env) -> None:
    results = search(service(env), "tomato soup", top_k=20)
    assert results and all("gone" not in r.path for r in results)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": ""},
        {"query": "   \n"},
        {"query": "x" * 5000},
        {"query": None},
        {"query": "x", "top_k": 0},
        {"query": "x", "top_k": 101},
        {"query": "x", "top_k": True},
        {"query": "x", "top_k": "5"},
        {"query": "x", "mode": "fuzzy"},
        {"query": "x", "roots": ["/not/a/root"]},
        {"query": "x", "path_prefix": [""]},
        {"query": "x", "ext": "md"},
        {"query": "x", "ext": [3]},
        {"query": "x", "where": ["no filter"]},
        {"query": "x", "reach": "everywhere"},
    ],
)
def test_invalid_requests_are_usage_errors(env: Env, kwargs: dict) -> None:
    with pytest.raises(RagdError) as err:
        search(service(env), **kwargs)
    assert err.value.code in ("usage", "bad_request") and err.value.hint


def test_path_prefixes_and_roots(env: Env) -> None:
    _, root, other = env
    svc = service(env)
    found = search(svc, "file text", top_k=20, path_prefix=["中文"])
    assert found and all(r.path.startswith(str(root / "中文") + "/") for r in found)
    found = search(svc, "tomato", top_k=20, path_prefix=[str(root / "notes")])
    assert found and all(r.rel_path.startswith("notes/") for r in found)
    assert {r.root for r in search(svc, "tomato soup", top_k=20, roots=[str(other)])} == {str(other)}
    assert rels(search(svc, "soup", top_k=5, roots=[str(other)], path_prefix=["x"])) == ["x/readme.md"]
    assert search(svc, "soup", top_k=5, roots=[str(other)], path_prefix=[str(root / "notes")]) == []
    assert search(svc, "soup", top_k=5, path_prefix=["/elsewhere"]) == []
    assert rels(search(svc, "tomatoes", top_k=5, ext=["txt"])) == ["notes/garden.txt"]


def test_one_per_file_keeps_the_best_chunk_of_each_file(env: Env) -> None:
    svc = service(env)
    query = "revenue report costs fell quarterly growth north"
    every = search(svc, query, top_k=10, mode="vector")
    assert rels(every).count("docs/report.pdf") == 2
    best = search(svc, query, top_k=10, mode="vector", one_per_file=True)
    assert rels(best).count("docs/report.pdf") == 1 and len(set(rels(best))) == len(best)
    assert best[0] == every[0] and [r.score for r in best] == sorted((r.score for r in best), reverse=True)


def test_file_mode_ranks_documents_by_their_best_chunk_and_counts_their_matches(env: Env) -> None:
    svc = service(env)
    query = "revenue report costs fell quarterly growth north"
    every = search(svc, query, top_k=3 * FILE_CANDIDATES, mode="vector")  # the candidates of 3 documents
    files = search_files(svc, query, top_k=3, mode="vector")
    firsts = list(dict.fromkeys(r.rel_path for r in every))[:3]
    assert [f.rel_path for f in files] == firsts
    for f in files:
        mine = [r for r in every if r.rel_path == f.rel_path]
        assert f.chunks == tuple(mine[:3]) and f.score == mine[0].score
        assert f.matches == len(mine)
    assert (
        rels(list(next(f for f in files if f.rel_path == "docs/report.pdf").chunks))
        == ["docs/report.pdf"] * 2
    )
    assert search_files(svc, query, top_k=1, mode="keyword", ext=["txt"]) == []
    assert search_files(svc, "soup", top_k=5, path_prefix=["/elsewhere"]) == []


def test_query_embeddings_are_cached(env: Env) -> None:
    embedder = CountingEmbedder()
    svc = service(env, embedder)
    first = search(svc, "tomato soup", top_k=2)
    assert search(svc, "tomato soup", top_k=5)[:2] == first
    search(svc, "  tomato soup  ", top_k=2, mode="vector")
    search(svc, "tomato", top_k=2, mode="keyword")
    assert embedder.calls == ["tomato soup"]
    search(svc, "garden", top_k=2)
    assert embedder.calls == ["tomato soup", "garden"]


@pytest.mark.parametrize(
    "query",
    [
        'He said "hello',
        "(parentheses)",
        "key: value",
        "AND",
        "a OR b NOT c",
        "中文 AND (english)",
        "\\",
        "-x +y",
        "title:rocket^2",
        "'single'",
        "💥 🚀",
        "%_%",
        "x'; DROP TABLE",
    ],
)
def test_any_user_text_is_a_valid_query(env: Env, query: str) -> None:
    search(service(env), query, top_k=3)


# -- keyword query builder -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("parse_config()", '"parse_config"'),
        (
            "How do I fix ERR_CONN_RESET?",
            'fix "ERR_CONN_RESET"',
        ),  # a plain word is bare: one token either way
        ('"exact phrase" rest', '"exact phrase" rest'),
        ("title:rocket^2 -x", '"title:rocket^2" x'),
        ("C:\\Users\\bob", "C Users bob"),
        ('x"y', "x y"),
        ("１２３ ｶﾀｶﾅ café", "123 カタカナ cafe"),
        ("数字123和字母", "数字 123 和字母"),
        ("cats and dogs or NOT mice", 'cats dogs "NOT" mice'),  # and/or are stopwords; an operator is quoted
        ("привет мир", '"привет" "мир"'),  # other scripts stay phrases
        ("e2e x86_64 utf-8 E1042", '"e2e" "x86_64" "utf-8" "E1042"'),  # mixed: a sequence of tokens
        ("会议记录", "会议记录"),  # a single-character stopword (会) inside a word is kept
        ("如何配置代理", "配置代理"),
        ("the", "the"),  # only stopwords: search for them after all
        ("to", '"to"'),  # ... and an operator word stays quoted
        ("???", None),
        ("", None),
    ],
)
def test_keyword_query_string(text: str, expected: str | None) -> None:
    assert query_string(text) == expected


def test_keyword_query_is_bounded() -> None:
    built = query_string(" ".join(f"word-{i}" for i in range(100)))
    assert built is not None and built.count('"') == 2 * MAX_TERMS


# -- snippets ----------------------------------------------------------------------------------------------------
def test_snippet_centres_on_the_longest_matching_term() -> None:
    text = ("lorem ipsum " * 40) + "the ERR_CONN_RESET error appears here " + ("dolor sit amet " * 40)
    cut = snippet(text, "what is ERR_CONN_RESET", width=120)
    assert "ERR_CONN_RESET" in cut and cut.startswith("…") and cut.endswith("…") and len(cut) <= 122


def test_snippet_defaults_to_the_start_and_collapses_space() -> None:
    assert snippet("first\n\n   line " + "x " * 300, "absent", width=40).startswith("first line x")
    assert snippet("short text", "absent") == "short text"


def test_snippet_finds_chinese_and_unaccented_terms() -> None:
    zh = "无关的内容。" * 30 + "安装数据库的步骤如下。" + "其他内容。" * 30
    assert "数据库" in snippet(zh, "如何安装数据库", width=40)
    assert "café" in snippet("x " * 200 + "a naïve café " + "y " * 200, "cafe", width=40)
