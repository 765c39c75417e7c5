"""bench/ and tests/ stand apart: no benchmark imports tests/ (bench/fake_api.py is the benchmarks' own
embeddings server), and no test imports bench/, so either can change without breaking the other."""

from __future__ import annotations

import ast
from pathlib import Path

TOP = Path(__file__).resolve().parents[3]


def imported(path: Path) -> set[str]:
    """The top-level packages `path` imports (absolute imports only; relative ones stay in their package)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_benchmark_imports_tests() -> None:
    offenders = {p.name for p in (TOP / "bench").glob("*.py") if "tests" in imported(p)}
    assert not offenders, sorted(offenders)


def test_no_test_imports_bench() -> None:
    offenders = [str(p.relative_to(TOP)) for p in (TOP / "tests").rglob("*.py") if "bench" in imported(p)]
    assert offenders == []
