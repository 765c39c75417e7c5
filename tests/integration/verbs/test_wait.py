"""`wait`: returns once the agent is idle and settled; says so when paused with work to do."""

from __future__ import annotations

from ragctl import protocol as p
from tests.integration.verbs.conftest import Running
from tests.support.fake_openai import FakeOpenAI


def test_wait_returns_after_a_change_is_indexed(running: Running) -> None:
    (running.root / "new.md").write_text("A new note about echidnas: zyxnew.\n")
    res = running.ctl("wait", {"timeout": 60})
    assert res["waited_s"] >= 0.6  # at least the settle time: the change just made is seen
    hits = running.ctl("search", {"query": "zyxnew", "mode": "keyword", "top_k": 1})["results"]
    assert hits and hits[0]["path"].endswith("new.md")


def test_wait_while_paused_with_work_to_do_says_so(running: Running) -> None:
    running.ctl("pause")
    (running.root / "later.md").write_text("written while paused\n")
    err = running.refused("wait", {"timeout": 30})
    assert err.code == p.UNAVAILABLE and "paused" in err.message and "ragctl resume" in err.hint
    running.ctl("resume")
    running.wait()


def test_wait_times_out_while_the_api_is_slow(running: Running, fake_openai_server: FakeOpenAI) -> None:
    fake_openai_server.delay = 3.0
    try:
        (running.root / "slow.md").write_text("embedding this takes a while\n")
        err = running.refused("wait", {"timeout": 1.5})
        assert err.code == p.TIMEOUT and "still busy after 1.5 s" in err.message
    finally:
        fake_openai_server.delay = 0.0
    running.wait()
