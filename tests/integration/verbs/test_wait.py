"""`wait`: returns once the agent is idle and settled; says so when paused with work to do."""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ragctl import protocol as p
from tests.integration.verbs.conftest import DOCS, Running
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


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


def test_wait_while_paused_says_so_at_once_while_a_job_still_runs(
    running: Running, fake_openai_server: FakeOpenAI
) -> None:
    """Paused with a directory queued, the agent cannot become idle, whatever job started before the pause: `wait`
    says so at once instead of waiting for that job to end (a big folder's ran for minutes under load)."""
    fake_openai_server.hold_next(1)
    try:
        (running.root / "sub" / "held.md").write_text("held back by the API: zyxheld\n")
        poll(lambda: any("zyxheld" in t for t in fake_openai_server.texts), 30, what="the held request")
        running.ctl("pause")
        (running.root / "later.md").write_text("written while paused\n")
        poll(lambda: running.ctl("status")["roots"][0]["pending_dirs"] >= 1, 10, what="the folder queued")
        assert running.ctl("status")["roots"][0]["running_dirs"] == 1  # sub's job, waiting for its vectors
        for args in ({"timeout": 20}, {"timeout": 20, "paths": [str(running.root)]}):
            started = time.monotonic()
            err = running.refused("wait", args)
            assert err.code == p.UNAVAILABLE and "paused" in err.message, err
            assert time.monotonic() - started < 10, args
    finally:
        fake_openai_server.release()
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


def test_wait_for_paths_counts_only_the_work_there(running: Running, fake_openai_server: FakeOpenAI) -> None:
    """With `paths`, `wait` returns once nothing is left to do under them, while another folder's texts still
    wait for their vectors; MCP's `wait_until_indexed` takes the same `paths` (relative to a root too); a path
    outside every root is refused, naming it."""
    fake_openai_server.hold_next(1)
    try:
        (running.root / "sub" / "held.md").write_text("held back by the API: zyxheld\n")
        poll(lambda: any("zyxheld" in t for t in fake_openai_server.texts), 30, what="the held request")
        (running.root / "quick.md").write_text("indexed at once: zyxquick\n")
        done = running.ctl("wait", {"timeout": 60, "paths": [str(running.root / "quick.md")]})
        assert done["paths"] == [str(running.root / "quick.md")] and done["waited_s"] >= 0.6, done
        hits = running.ctl("search", {"query": "zyxquick", "mode": "keyword", "top_k": 1})["results"]
        assert [h["path"] for h in hits] == [str(running.root / "quick.md")]
        err = running.refused("wait", {"timeout": 1, "paths": [str(running.root / "sub")]})
        assert err.code == p.TIMEOUT and "still busy there after 1 s" in err.message, err
        tool = running.tool("wait_until_indexed", {"timeout_s": 60, "paths": ["quick.md", "sub/deep"]})
        assert not tool.get("isError") and tool["structuredContent"]["waited_s"] >= 0.6, tool
        outside = running.tool("wait_until_indexed", {"paths": ["/elsewhere"]})
        assert outside["isError"] and "path refused: '/elsewhere'" in outside["content"][0]["text"], outside
    finally:
        fake_openai_server.release()
    err = running.refused("wait", {"paths": ["/elsewhere"]})
    assert err.code == p.NOT_FOUND and "/elsewhere is not under any root" in err.message, err
    running.ctl("wait", {"timeout": 60, "paths": [str(running.root / "sub")]})
    hits = running.ctl("search", {"query": "zyxheld", "mode": "keyword", "top_k": 1})["results"]
    assert [h["path"] for h in hits] == [str(running.root / "sub" / "held.md")]


def test_wait_is_not_idle_while_a_vanished_index_is_not_rebuilt_yet(running: Running) -> None:
    """Found by the model-based test (seed 748550650): `ragctl index --rebuild` right after `wait` returned was
    refused with "the index is being rebuilt". The index had vanished just before, and `wait` said idle because the
    main loop's check (late on a loaded machine: held back here) had not seen it yet: `wait` returns once the index
    is made again, and what follows it finds the agent ready."""
    agent = running.life.agent
    with agent._recovery_lock:  # the main loop's check of the data directory held back (a late tick)
        shutil.rmtree(agent.data_dir / "index")
        err = running.refused("wait", {"timeout": 2})
        assert err.code == p.TIMEOUT, err
    running.wait()
    assert running.ctl("index", {"rebuild": True})["sources"] == len(DOCS)
    hits = running.ctl("search", {"query": "zyxdelta", "mode": "keyword", "top_k": 1})["results"]
    assert [h["path"] for h in hits] == [str(running.root / "sub" / "deep" / "delta.md")]


def test_a_rebuild_asked_for_while_the_agent_rebuilds_a_vanished_index_follows_it(running: Running) -> None:
    """Found by the model-based test (seed 748550650): `ragctl index --rebuild` while the agent was rebuilding
    the index it had seen vanish was refused ("the index is being rebuilt"): it waits for that rebuild (saying so
    in its progress), then makes the index anew."""
    agent = running.life.agent
    hold = threading.Event()
    agent.indexer.call(lambda sync: hold.wait(60))  # the writer busy: the agent's own rebuild waits behind it
    try:
        shutil.rmtree(agent.data_dir / "index")
        poll(lambda: agent.rebuilding, 30, what="the agent's rebuild of the vanished index")
        streamed: list[Any] = []
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(running.ctl, "index", {"rebuild": True}, streamed)
            poll(lambda: asked.done() or bool(streamed), 30, what="the rebuild answered, or waiting")
            hold.set()
            assert asked.result()["sources"] == len(DOCS)
    finally:
        hold.set()
    assert streamed[0]["phase"] == "waiting for the rebuild under way", streamed
    running.wait()
    hits = running.ctl("search", {"query": "zyxdelta", "mode": "keyword", "top_k": 1})["results"]
    assert [h["path"] for h in hits] == [str(running.root / "sub" / "deep" / "delta.md")]
