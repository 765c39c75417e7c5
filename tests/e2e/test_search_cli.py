"""`ragd search` and index sync through the real command; SIGKILL during index sync converges."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

from ragd.config import data_dir, load_config
from ragd.index import open_index
from ragd.index.write.sync import BATCH, IndexSync
from ragd.pipeline import mushroom
from ragd.pipeline.scan import Ignore, walk_dirs
from tests.e2e.conftest import RAGD, ragd, ragd_json, write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


def _corpus(root: Path) -> None:
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "reset.md").write_text(
        "# ERR_CONN_RESET\n\nThe peer closed the socket; retry the request.\n"
    )
    (root / "phone.md").write_text("# 小米 15 Pro\n\n电池容量是 6100mAh，支持 90W 快充。\n")
    (root / "ml.txt").write_text("Backpropagation computes gradients layer by layer.\n")


def test_search_after_run_once(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "kb"
    _corpus(root)
    out = ragd("run", "--once", str(root))
    assert "index: 3 chunks; 2 change notes applied" in out.stdout
    got = ragd_json("search", "ERR_CONN_RESET", "--mode", "keyword", "-k", "2")
    assert got["results"][0]["path"] == str(root / "ops" / "reset.md")
    assert got["results"][0]["rel_path"] == "ops/reset.md"
    zh = ragd_json("search", "电池容量", "--mode", "keyword")
    assert zh["results"][0]["path"] == str(root / "phone.md")
    only = ragd_json("search", "socket gradients 电池", "--path-prefix", str(root / "ops"), "-k", "10")
    assert {r["path"] for r in only["results"]} == {str(root / "ops" / "reset.md")}
    human = ragd("search", "ERR_CONN_RESET", "--mode", "keyword").stdout
    assert "1. " + str(root / "ops" / "reset.md") + ":1-3  [ERR_CONN_RESET]  score " in human
    files = ragd_json("search", "ERR_CONN_RESET", "--mode", "keyword", "--files")["files"]
    assert [(f["path"], f["matches"]) for f in files] == [(str(root / "ops" / "reset.md"), 1)]
    listed = ragd("search", "ERR_CONN_RESET", "--mode", "keyword", "--files").stdout
    assert listed.startswith("1. " + str(root / "ops" / "reset.md")) and "1 passage matched" in listed


def test_search_says_what_to_do_when_the_index_is_held(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "kb"
    _corpus(root)
    assert "no index" in ragd("search", "anything", check=2).stderr
    ragd("run", "--once", str(root))
    cfg = load_config()
    holder = open_index(data_dir(cfg), cfg.identity, cfg.index)  # as a running agent would
    try:
        err = ragd("search", "socket", check=1).stderr
        assert "held by another process" in err
        run = ragd_json("run", "--once", str(root))  # sidecars are still written; the holder applies them
        assert run["index"]["held_by_agent"] is True
    finally:
        holder.close()
    assert ragd_json("search", "socket", "--mode", "keyword")["results"]


def _kill_during_sync(root: Path, env: dict[str, str], dirs: int) -> bool:
    """Start a run and SIGKILL it once the index sync has applied some, not all, change notes."""
    ignore = Ignore(load_config(Path(env["RAGD_CONFIG"])).ignore)
    notes = lambda: len(list(mushroom.walk_pending(walk_dirs(root, ignore))))  # noqa: E731
    proc = subprocess.Popen([*RAGD, "-q", "run", "--once", str(root)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    peak = 0

    def ended_or_killed() -> str:
        nonlocal peak
        if proc.poll() is not None:
            return "ended"
        n = notes()
        peak = max(peak, n)
        # the consumer is deleting applied notes, and more wait (the run applies them as its folders finish,
        # resident/ahead.py, and the rest at its end)
        if peak >= 2 and 0 < n < peak:
            proc.send_signal(signal.SIGKILL)
            return "killed"
        return ""

    try:  # polled every 2 ms: the window between the first and the last note applied is short
        outcome = poll(ended_or_killed, timeout=120, every=0.002, what="the run to end or a kill to land")
    except AssertionError:
        proc.kill()
        raise
    finally:
        proc.wait()
    return outcome == "killed" and notes() > 0


def test_sigkill_during_index_sync_then_restart_converges(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    dirs = BATCH + 44  # more than one batch of change notes: the kill lands while the second batch is applied
    with FakeOpenAI(dim=8) as server:
        cfg_file = write_api_config(tmp_path / "c.toml", server)
        env = {**os.environ, "RAGD_CONFIG": str(cfg_file), "RAGD_DATA_DIR": str(tmp_path / "data")}
        for attempt in range(6):
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(tmp_path / "data", ignore_errors=True)
            for d in range(dirs):
                (root / f"d{d:02d}").mkdir(parents=True)
                for i in range(1 + attempt):
                    (root / f"d{d:02d}" / f"f{i}.md").write_text(f"# {d}/{i}\n\n" + f"words {d} {i} " * 50)
            if _kill_during_sync(root, env, dirs):
                break
        else:
            raise AssertionError("could not land a kill during the index sync")
        out = json.loads(ragd("run", "--once", "--json", str(root), env=env).stdout)
    # the kill may land while folders are still embedded (their notes are applied as they finish): those are
    # embedded now, the others are unchanged
    files = sum(1 for _ in root.rglob("f*.md"))
    assert out["embedded"] + out["unchanged"] == files and out["failed"] == []
    assert out["index"]["mushrooms_failed"] == [] and out["index"]["repaired"] == 0
    cfg = load_config(cfg_file)
    idx = open_index(tmp_path / "data", cfg.identity, cfg.index)
    try:
        sync = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore))
        expected = sync.expected(walk_dirs(root, Ignore(cfg.ignore)))
        indexed = idx.sources(str(root))
        assert len(expected) == sum(1 for _ in root.rglob("f*.md")) and set(indexed) == set(expected)
        assert all(indexed[p].chunk_count == e.chunk_count for p, e in expected.items())
        assert not list(mushroom.walk_pending(walk_dirs(root, Ignore(cfg.ignore))))
    finally:
        idx.close()


def test_orphans_and_rebuild(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "kb"
    _corpus(root)
    ragd("run", "--once", str(root))
    assert ragd_json("orphans")["orphans"] == []
    (root / "ml.txt").unlink()  # gone behind ragd's back: the index still has it
    shutil.rmtree(root / "ops")
    got = ragd_json("orphans")
    assert sorted(got["orphans"]) == [str(root / "ml.txt"), str(root / "ops" / "reset.md")]
    assert ragd_json("orphans", str(root / "ops"))["orphans"] == [str(root / "ops" / "reset.md")]
    assert "2 orphans found" in ragd("orphans").stdout
    assert ragd_json("orphans", str(root / "ops"), "--clean")["removed"] == 1
    assert ragd_json("orphans")["orphans"] == [str(root / "ml.txt")]
    rebuilt = ragd_json("run", "--once", "--rebuild-index", str(root))
    assert rebuilt["index"]["filled"] == 1 and rebuilt["index"]["repaired"] == 0  # filled, not repairs
    assert rebuilt["index"]["chunks"] == 1  # only phone.md is left
    assert ragd_json("orphans")["orphans"] == []
