"""`sync`: run a root's, a folder's or a file's directory jobs now (with `wait`, until the agent is idle)."""

from __future__ import annotations

from ragctl import protocol as p
from tests.integration.verbs.conftest import Running


def test_sync_of_a_file_schedules_its_directory_and_waits(running: Running) -> None:
    res = running.ctl("sync", {"path": str(running.root / "sub" / "gamma.md"), "wait": True, "timeout": 60})
    assert res["scheduled"] == 1 and res["waited_s"] >= 0


def test_sync_of_everything_schedules_every_directory(running: Running) -> None:
    streamed: list = []
    res = running.ctl("sync", {"wait": True, "force": True}, streamed)
    assert res["scheduled"] == 3  # kb, kb/sub, kb/sub/deep
    hits = running.ctl("search", {"query": "zyxbeta", "mode": "keyword", "top_k": 1})["results"]
    assert hits and hits[0]["path"].endswith("beta.txt")  # re-processed, still indexed


def test_sync_outside_every_root_is_not_found(running: Running) -> None:
    err = running.refused("sync", {"path": "/etc"})
    assert err.code == p.NOT_FOUND and "not under any root" in err.message
    err = running.refused("sync", {"path": "relative/dir"})
    assert err.code == p.BAD_REQUEST and "absolute" in err.message
