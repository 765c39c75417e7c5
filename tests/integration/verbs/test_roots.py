"""`roots list|add|remove`: the watched roots, nested roots included."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ragctl import protocol as p
from ragd.config import load_config
from tests.integration.verbs.conftest import Running, config_text, write_tree
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process, control
from tests.support.rm import rm_r


def test_roots_list(running: Running) -> None:
    res = running.ctl("roots")
    assert [r["path"] for r in res["roots"]] == [str(running.root)] and res["notes"] == []
    assert res["roots"][0]["source"] == "config"


def test_add_and_remove_another_root(running: Running, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    write_tree(other)
    res = running.ctl("roots", {"action": "add", "path": str(other)})
    assert [r["path"] for r in res["roots"]] == [str(running.root), str(other)]
    assert res["roots"][1]["source"] == "ragctl"
    running.wait()
    assert len(running.ctl("index", {"sources": True})["sources"]) == 8  # both trees; the first one kept
    running.ctl("roots", {"action": "remove", "path": str(other)})
    running.wait()
    assert all(s.startswith(str(running.root)) for s in running.ctl("index", {"sources": True})["sources"])


def test_a_nested_root_adds_and_removes_nothing(running: Running) -> None:
    inner = running.root / "sub"
    before = running.ctl("index", {"sources": True})["sources"]
    res = running.ctl("roots", {"action": "add", "path": str(inner)})
    assert res["notes"] == [f"{inner} is inside the root {running.root}; its files are already indexed"]
    res = running.ctl("roots", {"action": "remove", "path": str(inner)})
    assert res["notes"] == [f"{inner} is inside the root {running.root}: its files stay indexed"]
    running.wait()
    assert running.ctl("index", {"sources": True})["sources"] == before


def test_roots_arguments_are_checked(running: Running) -> None:
    assert running.refused("roots", {"action": "add"}).code == p.BAD_REQUEST
    assert running.refused("roots", {"action": "drop", "path": "/x"}).code == p.BAD_REQUEST
    assert running.refused("roots", {"action": "add", "path": "/no/such/dir"}).code == p.NOT_FOUND
    assert running.refused("roots", {"action": "remove", "path": "/tmp"}).code == p.NOT_FOUND


def test_a_root_from_the_command_line_says_so(
    kb: Path, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """`ragd run DIR` (and `make run ROOT=DIR`): the root is not in the config file, and `roots list` says so."""
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(config_text(fake_openai_server, []))
    with agent_in_process(load_config(config_file), [kb], config_path=config_file) as life:
        listed = control(life, "roots")["roots"]
    assert [(r["path"], r["source"]) for r in listed] == [(str(kb), "command line")]


def test_a_root_added_is_recorded_before_anything_of_it_is_written(running: Running, tmp_path: Path) -> None:
    """Found by the soak: an agent killed after a new root's first sources reached the index, but before the root
    was recorded as served, started without that root and left those sources in search for good. A new root is now
    recorded as entering before its fill and its jobs write anything; once filled, as served."""
    other = tmp_path / "other"
    other.mkdir()
    write_tree(other)
    agent = running.life.agent
    record = agent.data_dir / "served-roots.json"
    gate = threading.Event()
    agent.indexer.call(
        lambda _sync: gate.wait(60)
    )  # the index writer busy: nothing of the new root written yet
    try:
        running.ctl("roots", {"action": "add", "path": str(other)})
        served = json.loads(record.read_text(encoding="utf-8"))
        assert str(other) in served["entering"] and str(other) not in served["roots"], served
    finally:
        gate.set()
    running.wait()
    served = json.loads(record.read_text(encoding="utf-8"))
    assert served["roots"] == [str(running.root), str(other)] and served["entering"] == [], served


def test_a_root_left_entering_by_a_kill_leaves_the_index_at_a_start_without_it(
    kb: Path, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The record an agent killed while a root entered leaves (it held some of that root's sources): started
    without the root, the agent drops them; started with it, it fills it."""
    other = tmp_path / "other"
    other.mkdir()
    write_tree(other)
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(config_text(fake_openai_server, [kb, other]))
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        record = life.agent.data_dir / "served-roots.json"
    served = json.loads(record.read_text(encoding="utf-8"))
    record.write_text(json.dumps({**served, "roots": [str(kb)], "entering": [str(other)]}), encoding="utf-8")
    config_file.write_text(config_text(fake_openai_server, [kb]))
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        sources = control(life, "index", {"sources": True})["sources"]
    assert sources and all(s.startswith(str(kb) + "/") for s in sources), sources
    served = json.loads(record.read_text(encoding="utf-8"))
    assert served["roots"] == [str(kb)] and served["entering"] == [], served


def test_the_roots_added_survive_the_data_directory_deleted_just_before_a_stop(
    kb: Path, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Found by the model-based test (seed 748550650): the data directory deleted, then the agent stopped before its
    check saw the loss; roots.json was gone, and the next start had forgotten the roots added with ragctl."""
    other = tmp_path / "other"
    other.mkdir()
    write_tree(other)
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(config_text(fake_openai_server, [kb]))
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "roots", {"action": "add", "path": str(other)})
        home = life.agent.data_dir
        rm_r(home)  # the agent may be writing a file in it meanwhile
    assert json.loads((home / "roots.json").read_text(encoding="utf-8"))["added"] == [str(other)]
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        listed = [r["path"] for r in control(life, "roots")["roots"]]
    assert listed == [str(kb), str(other)]
