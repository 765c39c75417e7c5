"""A big folder (DESIGN §4.1): searchable as its job goes, with progress in `status`, and a SIGKILL in the middle of
its job leaves nothing that a restart does not converge from (the index equals the sidecars, nothing repaired)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ragd.pipeline import mushroom
from tests.e2e.agent import AgentProcess, files_in, keyword_hits, ragctl_json, running_agent, write_doc
from tests.e2e.conftest import FAST_WATCH, write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

FILES = 400  # rounds of 64 files: seven steps, each seen by the polls below


@pytest.fixture
def slow_config(tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Small batches and a slow embeddings API: the folder's one job takes many seconds."""
    fake_openai_server.delay = 0.1
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server, watch=FAST_WATCH, batch_size=4,
                           concurrency=2)  # fmt: skip
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    return cfg


def _big_folder(where: Path) -> Path:
    folder = where / "notes"
    for i in range(FILES):
        write_doc(folder / f"n{i:04d}.md", "bignote", f" note {i}")
    return folder


def _watch_job(agent: AgentProcess, root: Path) -> list[dict[str, Any]]:
    """Status samples (with whether the folder's files were searchable then) until the folder's job ends."""
    seen: list[dict[str, Any]] = []

    def job_over() -> bool:
        st = agent.call("status")
        found = len(agent.sources())
        searchable = bool(keyword_hits("bignote"))
        running = st["roots"][0]["running_dirs"] + st["roots"][0]["pending_dirs"]
        seen.append({"progress": st["progress"], "found": found, "searchable": searchable, "running": running,
                     "embedded": st["roots"][0]["files"].get("EMBEDDED", 0)})  # fmt: skip
        return bool(running == 0 and found == FILES)

    poll(job_over, timeout=180, every=0.3, what="the big folder's job to end")
    return seen


def test_a_rescan_during_a_big_folders_job_holds_back_none_of_its_rounds(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rescan (every 2 s here; hourly, or after a watch queue overflow, as an export unpacks) applies the notes it
    finds: the index writer waited for the running job's planned note, and no round's note was applied meanwhile."""
    fake_openai_server.delay = 0.1
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server, watch={**FAST_WATCH,
                           "reconcile_interval": 2}, batch_size=4, concurrency=2)  # fmt: skip
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    root = tmp_path / "kb"
    root.mkdir()
    folder = _big_folder(tmp_path / "outside")
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:
        shutil.move(folder, root / "notes")
        seen = _watch_job(agent, root)
        counts = {s["found"] for s in seen if s["running"] and 0 < s["found"] < FILES}
        assert len(counts) >= 3, seen  # the index grew, round by round, while the job ran
        agent.wait_idle()
        assert agent.sources() == files_in(root)


def test_a_big_folder_is_searchable_and_shows_progress_while_its_job_runs(
    tmp_path: Path, slow_config: Path
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    folder = _big_folder(tmp_path / "outside")
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:
        shutil.move(folder, root / "notes")
        seen = _watch_job(agent, root)
        during = [s for s in seen if s["running"] and s["searchable"] and 0 < s["found"] < FILES]
        assert during, "no file of the folder was searchable before its job ended"
        moving = [s["progress"] for s in seen if s["running"] and s["progress"]["files_done"] > 0]
        assert moving, "the status showed no progress while the folder's job ran"
        assert all(p["files_done"] <= p["files_total"] == FILES for p in moving), moving
        assert any(p["eta_s"] is not None for p in moving), moving
        assert any(0 < s["embedded"] < FILES for s in seen if s["running"]), seen
        agent.wait_idle()
        assert agent.sources() == files_in(root)
        assert ragctl_json("verify")["repaired"] == 0


def test_a_kill_in_the_middle_of_a_big_folders_job_converges_after_a_restart(
    tmp_path: Path, slow_config: Path
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    folder = _big_folder(tmp_path / "outside")
    agent = AgentProcess(tmp_path / "agent.log", str(root))
    try:
        agent.wait_ready()
        agent.wait_idle()
        shutil.move(folder, root / "notes")
        poll(lambda: len(agent.sources()) >= 100, timeout=120, what="100 files in the index")
        assert agent.call("status")["roots"][0]["running_dirs"] == 1
    finally:
        agent.kill()  # SIGKILL, in the middle of the job
    assert mushroom.pending(root / "notes"), "the job's notes are on disk"
    with running_agent(tmp_path / "agent2.log", str(root), idle=True) as again:
        assert again.sources() == files_in(root)
        assert again.call("status")["index"]["verify"]["repaired_total"] == 0
        assert ragctl_json("verify")["repaired"] == 0
        assert len(keyword_hits("bignote", k=100)) == 100
        assert not mushroom.pending(root / "notes")
