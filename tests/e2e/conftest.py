"""e2e helpers: run the real `ragd` command in a subprocess with the test's isolated environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import FakeOpenAI

RAGD = [sys.executable, "-m", "ragd"]


def ragd(
    *args: str, check: int | None = 0, timeout: float = 120, **kw: Any
) -> subprocess.CompletedProcess[str]:
    kw.setdefault("env", os.environ.copy())
    proc = subprocess.run([*RAGD, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check is not None:
        assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def ragd_json(*args: str, check: int | None = 0) -> Any:
    return json.loads(ragd(*args, "--json", check=check).stdout)


@pytest.fixture
def own_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR set to a directory of the test's, for children started with a minimal environment (which then get it
    too): the socket such a client computes first, <temp dir>/ragd-<uid>, is then never one that an agent elsewhere
    on the machine made, live or left behind by a kill."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


FAST_WATCH = {"quiet": 0.1, "ceiling": 1.0}  # tests need not wait the default 0.3 s quiet period


def write_api_config(
    path: Path, server: FakeOpenAI, *, watch: dict[str, float] | None = None, **extra: object
) -> Path:
    path.write_text(api_config_text(server, watch=watch, **extra))
    return path


def milvus_config(
    path: Path, api: FakeOpenAI, root: Path, uri: str, *, backend: str = "milvus", prefix: str | None = None
) -> Path:
    """A config file at `path` for the fake embeddings API, one root, and an index on the Milvus server at `uri` (or
    `backend`, with the same settings), in collections named with `prefix` (default: ragd's)."""
    named = f"collection_prefix = {json.dumps(prefix)}\n" if prefix is not None else ""
    index = f"\n[index]\nbackend = {json.dumps(backend)}\nuri = {json.dumps(uri)}\n{named}timeout = 20\n"
    path.write_text(f"roots = [{json.dumps(str(root))}]\n" + api_config_text(api) + index)
    return path


def api_config_text(server: FakeOpenAI, *, watch: dict[str, float] | None = None, **extra: object) -> str:
    """A config file's text for the fake embeddings API (`extra` keys go into [embedding])."""
    lines = [
        "[embedding]",
        'provider = "openai"',
        'model = "fake-embed-8"',
        f"dimension = {server.dim}",
        f'base_url = "{server.base_url}"',
        'api_key = "sk-e2e-secret-key-0001"',
        "retries = 2",
        "max_backoff = 0.2",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    lines += ["", "[mcp]", "port = 0  # an ephemeral port: tests never clash with each other or a real agent"]
    if watch:
        lines += ["", "[watch]", *(f"{k} = {v}" for k, v in watch.items())]
    return "\n".join(lines) + "\n"


@pytest.fixture
def api_config_file(tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server)
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    return cfg


@pytest.fixture
def config(tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake embeddings API and a short debounce, in `RAGD_CONFIG`: what most agent tests run with."""
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server, watch=FAST_WATCH)
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    return cfg
