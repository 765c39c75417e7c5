"""Helpers for in-process integration tests: configs pointed at the fake embeddings server, tree inspection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ragd.config import Config
from ragd.pipeline import mushroom, sidecar
from ragd.pipeline.dirjob import JobContext
from ragd.pipeline.embed import LazyEmbedQueue
from ragd.pipeline.scan import Ignore
from ragd.resident.jobs import job_context
from ragd.resident.once import RunSummary, run_once
from tests.conftest import DATA
from tests.support.fake_openai import FakeOpenAI


def api_config(server: FakeOpenAI, roots: list[Path], **embedding: object) -> Config:
    emb = {
        "provider": "openai",
        "model": "fake-embed-8",
        "dimension": server.dim,
        "base_url": server.base_url,
        "api_key": "sk-test-key-123456",
        "retries": 2,
        "max_backoff": 0.2,
        "timeout": 5,
        **embedding,
    }
    return Config.model_validate({"roots": [str(r) for r in roots], "embedding": emb})


def run(config: Config, **kw: object) -> RunSummary:
    return run_once(config, **kw)  # type: ignore[arg-type]


def context(config: Config) -> tuple[JobContext, LazyEmbedQueue]:
    queue = LazyEmbedQueue(config.embedding)
    return job_context(config, queue.submit, Ignore(config.ignore)), queue


def entry(directory: Path, name: str) -> sidecar.FileEntry:
    e = sidecar.read_entry(sidecar.entry_path(directory, name))
    assert e is not None
    return e


def all_events(directory: Path) -> list[mushroom.Event]:
    return [ev for p in mushroom.pending(directory) for ev in mushroom.read(p).events]


def clear_mushrooms(root: Path) -> None:
    for p in root.rglob("*.mushroom"):
        p.unlink()


def copy_fixture(dest: Path) -> Path:
    shutil.copytree(DATA / "ragjson-0.5.1" / "tree", dest / "tree")
    for p in (dest / "tree").rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest / "tree"


def all_json_valid(root: Path) -> None:
    for p in root.rglob("*.ragjson*"):
        if p.parent.name != sidecar.TMP_DIR:  # staging debris is not part of the store
            json.loads(p.read_bytes())
    for p in root.rglob("*.mushroom"):
        mushroom.read(p)
