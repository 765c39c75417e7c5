"""The environment every test runs in: its own HOME and XDG_* directories, none of the project's variables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

XDG_DIRS = (
    ("XDG_CONFIG_HOME", "config"),
    ("XDG_DATA_HOME", "data"),
    ("XDG_CACHE_HOME", "cache"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_RUNTIME_DIR", "run"),
)
UNSET = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "NOTIFY_SOCKET")  # and every RAGD_* variable


def isolation(home: Path) -> dict[str, str | None]:
    """The changes to the environment that isolate a test under `home` (an existing directory): HOME and the XDG_*
    directories beneath it (created, mode 0700); the project's variables unset (None)."""
    changes: dict[str, str | None] = {k: None for k in os.environ if k.startswith("RAGD_") or k in UNSET}
    changes["HOME"] = str(home)
    for var, sub in XDG_DIRS:
        (home / sub).mkdir(mode=0o700)
        changes[var] = str(home / sub)
    return changes


def apply(changes: dict[str, str | None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `changes` in os.environ, undone at the end of the test."""
    for key, value in changes.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)


def environ(changes: dict[str, str | None]) -> dict[str, str]:
    """The whole environment of a child process started with `changes` (for fixtures wider than one test)."""
    merged = {**os.environ, **changes}
    return {k: v for k, v in merged.items() if v is not None}
