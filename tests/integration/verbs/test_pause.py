"""`pause` / `resume`: no directory job starts while paused; changes are kept for after."""

from __future__ import annotations

from tests.integration.verbs.conftest import Running


def test_pause_holds_jobs_and_resume_runs_them(running: Running) -> None:
    assert running.ctl("pause") == {"paused": True}
    assert running.ctl("status")["agent"]["state"] == "paused"
    (running.root / "held.md").write_text("held while paused: zyxheld\n")
    running.ctl("status")  # the watcher has the event; no job may run
    assert running.ctl("search", {"query": "zyxheld", "mode": "keyword", "top_k": 1})["results"] == []
    assert running.ctl("resume") == {"paused": False}
    running.wait()
    hits = running.ctl("search", {"query": "zyxheld", "mode": "keyword", "top_k": 1})["results"]
    assert hits and hits[0]["path"].endswith("held.md")


def test_pause_takes_no_arguments(running: Running) -> None:
    assert "unknown argument 'now'" in running.refused("pause", {"now": True}).message
