"""The per-file records' compaction (resident/memory.py) while the agent is idle: one skipped because the last was
too recent is made once its time has passed. The whole agent in-process, the fake embeddings API."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ragd.config import load_config
from ragd.resident import memory
from tests.e2e.conftest import api_config_text
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process, control
from tests.support.poll import poll


def test_a_compaction_skipped_at_an_idle_moment_is_made_once_its_time_has_passed(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big folder renamed just after its job: the job's idle moment compacts the records, the rename's (less than
    COMPACT_EVERY_S later) cannot, and the records of the new paths stayed uncompacted until the agent rested (two
    minutes) or a next job. The idle agent now makes it once COMPACT_EVERY_S has passed, with no event."""
    monkeypatch.setattr(memory, "COMPACT_AFTER", 1)
    monkeypatch.setattr(memory, "COMPACT_EVERY_S", 8.0)  # the rename's job ends well within it
    root = tmp_path / "kb"
    (root / "notes").mkdir(parents=True)
    for i in range(3):
        (root / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\nidle compaction {i}\n", encoding="utf-8")
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(
        f'roots = ["{root}"]\n' + api_config_text(fake_openai_server, watch={"quiet": 0.2, "ceiling": 1.0})
    )
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        poll(lambda: memory._compacted_at is not None and not memory.compact_due(), timeout=20,
             what="the first idle moment's compaction")  # fmt: skip
        first = memory._compacted_at
        (root / "notes").rename(root / "notes renamed")  # its job records the files again
        control(life, "wait", {"timeout": 60})
        assert memory._compacted_at == first, "compacted again within COMPACT_EVERY_S"
        assert memory._recorded >= 1
        started = time.monotonic()
        poll(lambda: memory._compacted_at != first, timeout=20, every=0.1,
             what="the compaction once COMPACT_EVERY_S has passed")  # fmt: skip
        assert memory._compacted_at is not None and first is not None
        assert memory._compacted_at - first >= 8.0 and time.monotonic() - started < 15
