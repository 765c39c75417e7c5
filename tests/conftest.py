"""Shared fixtures: every test runs with isolated XDG and RAGD_* environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
pytest_plugins = ["tests.support.fake_openai"]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith("RAGD_") or key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "NOTIFY_SOCKET"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_RUNTIME_DIR", "run"),
    ):
        (home / sub).mkdir(mode=0o700)
        monkeypatch.setenv(var, str(home / sub))
    yield home
