"""The agent's data directory (index, roots.json, history, stat cache) deleted while the agent runs or while it is
stopped: the agent notices, rebuilds from the sidecars, keeps the roots it was told, and says so once (DESIGN §4.1).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragctl.protocol import Client, socket_path
from ragd.config import data_dir, load_config
from tests.e2e.agent import (
    RAGD_RUN,
    AgentProcess,
    files_in,
    keyword_hits,
    ragctl,
    ragctl_json,
    running_agent,
    write_doc,
)
from tests.support.poll import poll

WARNING = "deleted or replaced while the agent ran"  # the one warning's words


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    for name, token in [("a.md", "alpha"), ("docs/b.md", "bravo"), ("docs/deep/c.md", "charlie")]:
        write_doc(kb / name, token)
    return kb


@pytest.fixture
def added(tmp_path: Path) -> Path:
    """A root given by `ragctl roots add` (kept in roots.json only)."""
    other = tmp_path / "papers"
    write_doc(other / "p.md", "papaya")
    return other


@pytest.fixture
def home(config: Path) -> Path:
    """The agent's data directory (computed once: `data_dir()` creates it)."""
    return data_dir(load_config(config))


@pytest.fixture
def agent(tmp_path: Path, config: Path, tree: Path, added: Path) -> Iterator[AgentProcess]:
    with running_agent(tmp_path / "agent.log", str(tree), idle=True) as proc:
        ragctl("roots", "add", str(added))
        proc.wait_idle()
        yield proc


def _served(proc: AgentProcess, *roots: Path) -> None:
    """The index holds exactly the files of `roots`, and `ragctl verify` finds nothing to repair."""
    assert proc.sources() == sorted(f for r in roots for f in files_in(r))
    report = ragctl_json("verify")
    assert (report["repaired"], report["removed"]) == (0, 0), report


def _warnings(proc: AgentProcess) -> list[str]:
    return [line for line in proc.log().splitlines() if WARNING in line]


@pytest.mark.parametrize("part", ["all", "index", "roots.json"])
def test_deleted_while_running_is_rebuilt_and_keeps_the_added_roots(
    agent: AgentProcess, tmp_path: Path, tree: Path, added: Path, home: Path, part: str
) -> None:
    """Once, a new change after the data directory was deleted was silently not applied (a failed change note:
    FileNotFoundError on the keyword journal), `wait` said idle, verify said the index matched, and the roots added
    with `ragctl roots add` were gone at the next start."""
    target = home if part == "all" else home / part
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    write_doc(tree / "new.md", "november")
    agent.wait_idle()
    assert keyword_hits("november") == [str(tree / "new.md")]
    assert keyword_hits("papaya") == [str(added / "p.md")]
    assert keyword_hits("charlie") == [str(tree / "docs/deep/c.md")]
    _served(agent, tree, added)
    status = ragctl_json("status")
    assert status["index"]["failed_mushrooms"] == []
    event = status["agent"]["data_dir_rebuilt"]
    assert event is not None and event["done"] is True
    assert "data dir: " in ragctl("status").stdout
    assert len(_warnings(agent)) == 1, agent.log()
    assert [r["path"] for r in ragctl_json("roots")["roots"]] == [str(tree), str(added)]
    assert (home / "roots.json").is_file() and str(added) in (home / "roots.json").read_text()
    if part == "all":
        assert os.stat(home).st_mode & 0o777 == 0o700
    # and after a restart: the added root is still served, from what the agent wrote back
    assert agent.stop() == 0
    with running_agent(tmp_path / "agent2.log", str(tree), idle=True) as again:
        assert [r["path"] for r in ragctl_json("roots")["roots"]] == [str(tree), str(added)]
        _served(again, tree, added)
        assert WARNING not in again.log()


def test_history_deleted_while_running_goes_on(
    agent: AgentProcess, tree: Path, added: Path, home: Path
) -> None:
    """The history starts again, empty, in a new file: what happens after the agent noticed is recorded there."""
    (home / "history.sqlite3").unlink()
    for suffix in ("-wal", "-shm"):
        (home / f"history.sqlite3{suffix}").unlink(missing_ok=True)
    agent.wait_idle()
    poll(lambda: _warnings(agent), what="the agent to notice")
    write_doc(tree / "new.md", "november")
    agent.wait_idle()
    assert keyword_hits("november") == [str(tree / "new.md")]
    _served(agent, tree, added)
    assert (home / "history.sqlite3").is_file()
    doc = ragctl_json("changes", str(tree / "new.md"))["document"]  # recorded in the new history
    assert doc["state"] == "EMBEDDED"
    assert len(_warnings(agent)) == 1 and "history" in _warnings(agent)[0], agent.log()
    assert agent.proc.poll() is None


@pytest.mark.parametrize("part", ["all", "index", "served-roots.json"])
def test_deleted_while_stopped_is_rebuilt_from_the_sidecars(
    tmp_path: Path,
    config: Path,
    tree: Path,
    added: Path,
    home: Path,
    fake_openai_server: object,
    part: str,
) -> None:
    """At the next start the roots are those of the command line and the config file (roots.json went with the
    data directory); the index is filled from the sidecars, nothing embedded again."""
    with running_agent(tmp_path / "agent.log", str(tree), str(added), idle=True) as first:
        first_sources = first.sources()
        assert first.stop() == 0
    target = home if part == "all" else home / part
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    embedded = len(fake_openai_server.requests)  # type: ignore[attr-defined]
    with running_agent(tmp_path / "agent2.log", str(tree), str(added), idle=True) as again:
        assert again.sources() == first_sources
        _served(again, tree, added)
        assert keyword_hits("papaya") == [str(added / "p.md")]
    assert len(fake_openai_server.requests) == embedded  # type: ignore[attr-defined]


def test_a_second_agent_on_a_deleted_data_dir_is_refused_with_the_right_hint(
    agent: AgentProcess, tmp_path: Path, tree: Path, added: Path, home: Path
) -> None:
    """Once, a second `ragd run` after the data directory was deleted said the running agent "serves another data
    dir", and left an empty history.sqlite3 behind. The running agent is held still (SIGSTOP) so that the second
    one finds the data directory gone, as it would in the moment before the first notices."""
    agent.signal(signal.SIGSTOP)
    try:
        shutil.rmtree(home)
        second = subprocess.run([*RAGD_RUN, str(tree)], capture_output=True, text=True, timeout=60,
                                env=os.environ.copy())  # fmt: skip
        leftover = sorted(p.name for p in home.iterdir()) if home.is_dir() else []
    finally:
        agent.signal(signal.SIGCONT)
    assert second.returncode != 0
    assert "another data dir" not in second.stderr, second.stderr
    assert f"pid {agent.pid}" in second.stderr and "deleted" in second.stderr, second.stderr
    assert "history.sqlite3" not in leftover, leftover  # nothing made before the instance was known to be its
    # the first agent takes its data directory back, and a third start is refused by its instance lock
    write_doc(tree / "new.md", "november")
    agent.wait_idle()
    assert keyword_hits("november") == [str(tree / "new.md")]
    _served(agent, tree, added)
    third = subprocess.run([*RAGD_RUN, str(tree)], capture_output=True, text=True, timeout=60,
                           env=os.environ.copy())  # fmt: skip
    assert third.returncode != 0 and f"already running (pid {agent.pid})" in third.stderr, third.stderr


def test_a_verification_rebuilds_an_index_that_vanished_before_it_answers(
    agent: AgentProcess, tree: Path, added: Path, home: Path
) -> None:
    """Once, `ragctl verify` right after the data directory was deleted said the index matched the sidecars (it
    compared them with the deleted collection still open): a verification first looks that the index is there."""
    _rmtree(home)
    asked = ragctl("verify", "--json", check=None)
    if (
        asked.returncode != 0
    ):  # the main loop saw the deletion first (a tick on a loaded machine): its rebuild runs
        assert "the index is being rebuilt" in asked.stderr, asked.stderr
        agent.wait_idle()
        asked = ragctl("verify", "--json")
    report = json.loads(asked.stdout)
    assert (report["repaired"], report["removed"]) == (0, 0), report
    assert (home / "index").is_dir() and ragctl_json("status")["agent"]["data_dir_rebuilt"]["done"] is True
    agent.wait_idle()
    _served(agent, tree, added)


def test_a_rebuild_asked_for_after_the_index_vanished_makes_it_anew(
    agent: AgentProcess, tree: Path, added: Path, home: Path
) -> None:
    """Found by the model-based test: the index deleted while the agent was paused, then `ragctl index --rebuild`:
    it failed with "index close failed at …" (closing the collection whose files were gone)."""
    with Client(socket_path()) as client:  # connected first: the request follows the deletion at once
        shutil.rmtree(home / "index")
        client.call("index", {"rebuild": True})
    agent.wait_idle()
    _served(agent, tree, added)
    assert keyword_hits("charlie") == [str(tree / "docs/deep/c.md")]


def test_a_stop_right_after_the_data_directory_went_exits_0_and_the_next_start_fills_it(
    tmp_path: Path, config: Path, tree: Path, home: Path
) -> None:
    """Found by the model-based test: the data directory deleted and the agent stopped before it noticed: closing
    the index (whose files were gone) failed, and `ragd run` exited 1 on SIGTERM."""
    with running_agent(tmp_path / "agent.log", str(tree), idle=True) as proc:
        write_doc(
            tree / "late.md", "lima"
        )  # a write on its way: the index has something to flush at the stop
        shutil.rmtree(home)
        proc.signal(signal.SIGTERM)
        assert proc.proc.wait(60) == 0, proc.log()
    with running_agent(tmp_path / "again.log", str(tree), idle=True) as again:
        assert again.sources() == files_in(tree)
        assert keyword_hits("lima") == [str(tree / "late.md")]


def _rmtree(path: Path) -> None:
    """`rm -rf` of a folder the agent may be writing in at that moment (its history, a flush): run again if a file
    was made meanwhile, as a user would."""
    for attempt in range(50):  # under load the agent may be making it again all the while (it saw a part go)
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == 49:
                raise
            time.sleep(0.1)
