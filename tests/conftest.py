"""Shared fixtures: every test runs with isolated XDG and RAGD_* environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.isolation import apply, isolation

DATA = Path(__file__).parent / "data"
pytest_plugins = ["tests.support.fake_openai"]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    apply(isolation(home), monkeypatch)
    yield home
