"""Shared fixtures: every test runs with isolated XDG and RAGD_* environment."""

from __future__ import annotations

import os

# before any test imports grpc (pymilvus): fork without gRPC's handler, as the agent does (ragd/index/milvus/__init__)
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.isolation import apply, isolation

DATA = Path(__file__).parent / "data"
pytest_plugins = ["tests.support.fake_openai"]

# The fast lane, `make check` (-m "not slow", docs/testing.md), is every test not marked slow. Marked here, by where
# a test is, so that a new test lands in a lane without a thought: all of tests/e2e (real `ragd` and `ragctl`
# processes, real servers) and tests/integration/verbs (the whole agent in-process), and the files or tests named in
# SLOW: those measured at over about 2 s a test (docs/testing.md has the figures). A new slow test: add it here.
SLOW_DIRS = ("tests/e2e/", "tests/integration/verbs/")
SLOW = frozenset({
    "tests/integration/test_dirjob.py",
    "tests/integration/test_dirjob_odd.py",
    "tests/integration/test_index_sync.py",
    "tests/integration/test_index_sync_batch.py",
    "tests/integration/test_mcp_http.py",
    "tests/integration/test_mcp_session.py",
    "tests/integration/test_memory_idle.py",
    "tests/unit/pipeline/test_embed_pooled.py",
    "tests/unit/pipeline/test_embed_shared.py",
    "tests/unit/index/test_index_compact.py",
    "tests/unit/index/test_index_damage.py",
    "tests/unit/index/test_index_keyword_fresh.py",
    "tests/unit/index/test_index_rest.py",
    "tests/unit/index/test_index_write_sources.py",
    "tests/unit/index/test_keywords.py",
    "tests/unit/index/test_lexicon.py",
    "tests/unit/pipeline/test_ocr.py",
    "tests/unit/pipeline/test_parse_ocr.py",
    "tests/unit/pipeline/test_workers.py",
    "tests/unit/index/test_index_zvec.py::test_auto_builds_an_hnsw_graph_past_a_size_while_searches_go_on",
    "tests/unit/index/test_index_zvec.py::test_incompatible_or_corrupt_collection_is_rebuilt",
    "tests/unit/index/test_index_zvec.py::test_optimize_with_concurrent_queries_and_writes",
    "tests/unit/index/test_index_zvec.py::test_vector_query_finds_similar_text",
})  # fmt: skip


# `make test` hands each of its processes one test file at a time (pytest-xdist, `--dist loadfile`), in the order
# collected (`--no-loadscope-reorder`, pyproject.toml; xdist's own order puts the files with the fewest tests last,
# and those are the longest: the model-based test alone ran its minutes after the other processes had finished).
# So the files that take longest start first, heaviest first (measured: docs/testing.md), then the other slow
# files, then the fast ones; a short file is what finishes last.
FIRST = (
    "tests/e2e/test_access.py",
    "tests/e2e/test_model_sync.py",
    "tests/e2e/test_agent.py",
    "tests/e2e/test_run_once.py",
    "tests/e2e/test_agent_sync.py",
    "tests/integration/test_mcp_session.py",
    "tests/e2e/test_data_dir.py",
    "tests/e2e/test_stat_cache.py",
    "tests/e2e/test_odd_files.py",
    "tests/e2e/test_bigfolder.py",
    "tests/unit/index/test_lexicon.py",
    "tests/integration/verbs/test_search.py",
    "tests/unit/index/test_index_zvec.py",
    "tests/e2e/test_ocr.py",
    "tests/e2e/test_search_cli.py",
    "tests/e2e/test_index_migrate.py",
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        test = item.nodeid.split("[")[0]
        if test.startswith(SLOW_DIRS) or test in SLOW or test.split("::")[0] in SLOW:
            item.add_marker(pytest.mark.slow)
    items.sort(key=_start_order)  # stable: a file's tests keep their order


def _start_order(item: pytest.Item) -> tuple[int, int]:
    file = item.nodeid.split("::")[0]
    if file in FIRST:
        return 0, FIRST.index(file)
    return (1 if item.get_closest_marker("slow") else 2), 0


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    apply(isolation(home), monkeypatch)
    yield home
