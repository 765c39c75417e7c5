"""`ragctl wait` as scripts use it: limited to their own folders, and started together with the agent."""

from __future__ import annotations

import time
from pathlib import Path

from tests.e2e.agent import AgentProcess, keyword_hits, ragctl, ragctl_json, running_agent, write_doc
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


def test_wait_for_a_folder_returns_while_another_root_is_busy(
    tmp_path: Path, config: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A script waiting for its own folder waited behind an unrelated big one (10 minutes). `ragctl wait PATH`
    returns once nothing is left to do under PATH, however busy the agent is elsewhere; `ragctl wait` still waits
    for everything."""
    big, small = tmp_path / "big", tmp_path / "small"
    write_doc(big / "old.md", "oldone")
    write_doc(small / "old.md", "olive")
    with running_agent(tmp_path / "agent.log", str(big), str(small), idle=True) as agent:
        fake_openai_server.hold_next(1)  # the big root's texts wait for their vectors until released
        write_doc(big / "b.md", "bigone")
        poll(
            lambda: any("bigone" in t for t in fake_openai_server.texts),
            timeout=30,
            what="the big root's request",
        )
        write_doc(small / "sub" / "s.md", "smallone")
        waited = ragctl_json("wait", str(small), "--timeout", "60")
        assert waited["paths"] == [str(small)] and "waited_s" in waited, waited
        assert keyword_hits("smallone") == [str(small / "sub" / "s.md")]
        (small / "sub" / "s.md").write_text("# smaller\n\nnow smaller\n")
        assert (
            "nothing left to do under"
            in ragctl("wait", str(small / "sub" / "s.md"), "--timeout", "60").stdout
        )
        assert keyword_hits("smaller") == [str(small / "sub" / "s.md")]
        still = ragctl(
            "wait", "--timeout", "1", check=1
        )  # the whole agent is not idle: the big root's file waits
        assert "still busy after 1 s" in still.stderr, still.stderr
        assert ragctl("wait", str(big), "--timeout", "1", check=1).returncode == 1
        assert keyword_hits("bigone") == []
        fake_openai_server.release()
        ragctl("wait", str(big), "--timeout", "60")
        assert keyword_hits("bigone") == [str(big / "b.md")]
        ragctl("wait", "--timeout", "60")
        _paths_outside_every_root_are_refused(agent, tmp_path)


def _paths_outside_every_root_are_refused(agent: AgentProcess, tmp_path: Path) -> None:
    outside = ragctl("wait", str(tmp_path / "elsewhere"), check=1)
    assert f"{tmp_path / 'elsewhere'} is not under any root of this agent" in outside.stderr, outside.stderr
    assert "ragctl roots" in outside.stderr


def test_wait_waits_for_an_agent_that_is_starting(tmp_path: Path, config: Path) -> None:
    """`ragd run … & ragctl wait` exited 3 (no agent) for the first seconds: wait now waits for an agent that is
    starting, within its timeout, then for it to be idle."""
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    agent = AgentProcess(tmp_path / "agent.log", str(root))
    try:
        ragctl("wait", "--timeout", "60")  # at once: the agent has not bound its socket yet
        assert keyword_hits("alpha") == [str(root / "a.md")]
    finally:
        agent.kill()


def test_wait_without_an_agent_gives_up_after_its_timeout(tmp_path: Path) -> None:
    """No agent at all: `wait` tries until its timeout runs out, then fails as any verb does (exit 3); the other
    verbs fail at once."""
    started = time.monotonic()
    gone = ragctl("wait", "--timeout", "1.5", check=3)
    assert time.monotonic() - started >= 1.5
    assert "the ragd agent is not running" in gone.stderr and "ragd run" in gone.stderr, gone.stderr
    assert ragctl("status", check=3).returncode == 3
