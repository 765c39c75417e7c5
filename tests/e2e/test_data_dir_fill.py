"""An index fill from the sidecars cut short by SIGKILL is finished at the next start (DESIGN §4.1, §9).

The data directory (or its `index/`) deleted while the agent was stopped: the next start fills a new index from the
sidecars. Killed during that fill, the start after it must fill the index again, before it says idle: every file
searchable with no repair by the verification. The same for the first index of a new data directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragd.config import data_dir, load_config
from tests.e2e.agent import AgentProcess, files_in, keyword_hits, ragctl_json, running_agent, write_doc
from tests.support.poll import poll

BIG = 600  # files of the second root: its fill from the sidecars outlasts the poll that catches it under way
FILLED = "the index was filled from the sidecars already there"  # the fill's last words in the log
REPAIRED = "from its sidecar"  # the words of a repair by the verification ("re-synced from its sidecar")


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The first root, filled (and flushed) first: seen in the index, it says the fill is under way."""
    root = tmp_path / "a"
    write_doc(root / "first.md", "alpha")
    return root


@pytest.fixture
def big(tmp_path: Path) -> Path:
    root = tmp_path / "b"
    for i in range(BIG):
        write_doc(root / f"d{i // 50}" / f"f{i}.md", f"word{i}x")
    return root


@pytest.fixture
def home(config: Path) -> Path:
    """The agent's data directory (computed once: `data_dir()` creates it)."""
    return data_dir(load_config(config))


def _complete(proc: AgentProcess, *roots: Path) -> None:
    """Every file of `roots` is in the index and searchable, `ragctl verify` finds nothing to repair, and the
    agent's own verification repaired nothing on its way to idle."""
    assert proc.sources() == sorted(f for r in roots for f in files_in(r))
    assert keyword_hits(f"word{BIG - 1}x") == [str(roots[-1] / f"d{(BIG - 1) // 50}" / f"f{BIG - 1}.md")]
    report = ragctl_json("verify")
    assert (report["repaired"], report["removed"]) == (0, 0), report
    assert REPAIRED not in proc.log(), proc.log()


def _kill_while_filling(proc: AgentProcess, small: Path) -> None:
    """SIGKILL the agent once the fill has put the first root in the index, before it has filled the second."""
    proc.wait_ready()
    poll(lambda: str(small / "first.md") in proc.sources(), timeout=120, what="the fill to be under way")
    proc.kill()
    assert FILLED not in proc.log(), "the fill ended before the agent was killed: make the second root bigger"


@pytest.mark.parametrize("part", ["all", "index"])
def test_a_fill_killed_after_the_data_directory_was_lost_is_finished_at_the_next_start(
    tmp_path: Path, config: Path, home: Path, small: Path, big: Path, part: str
) -> None:
    """Found by the model-based test: after the data directory was lost while the agent was stopped, a SIGKILL
    while the next start filled the new index left that fill unfinished at the start after it: files missing from
    search until the verification repaired them ("was missing from the index; re-synced")."""
    with running_agent(tmp_path / "first.log", str(small), str(big), idle=True) as first:
        assert first.stop() == 0
    shutil.rmtree(home if part == "all" else home / "index")
    _kill_while_filling(AgentProcess(tmp_path / "filling.log", str(small), str(big)), small)
    with running_agent(tmp_path / "again.log", str(small), str(big), idle=True) as again:
        _complete(again, small, big)


def test_a_first_index_killed_midway_is_finished_at_the_next_start(
    tmp_path: Path, config: Path, home: Path, small: Path, big: Path
) -> None:
    """The first index of a new data directory, killed while its files were being indexed."""
    proc = AgentProcess(tmp_path / "first.log", str(small), str(big))
    proc.wait_ready()
    poll(lambda: str(small / "first.md") in proc.sources(), timeout=120, what="the first files to be indexed")
    indexed = proc.sources()
    proc.kill()
    assert len(indexed) < 1 + BIG, "the first index ended before the kill: make the second root bigger"
    with running_agent(tmp_path / "again.log", str(small), str(big), idle=True) as again:
        _complete(again, small, big)
