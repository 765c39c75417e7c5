"""`verify`: the index checked against the sidecars of every root, and repaired."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.config import load_config
from ragd.pipeline import sidecar
from ragd.resident.once import run_once
from tests.integration.verbs.conftest import DOCS, Running, config_text
from tests.support.fake_openai import FakeOpenAI
from tests.support.held import held_meanwhile
from tests.support.inproc import agent_in_process, control
from tests.support.poll import poll


def test_a_clean_index_needs_no_repair(running: Running) -> None:
    report = running.ctl("verify")
    assert report["trigger"] == "request" and report["repaired"] == 0 and report["removed"] == 0
    assert report["sources"] == len(DOCS) == report["indexed"]


def test_a_source_missing_from_the_index_is_put_back(running: Running) -> None:
    source = str(running.root / "sub" / "gamma.md")

    def drop(sync):  # type: ignore[no-untyped-def]
        n = sync.index.delete_source(source)
        sync.index.flush()
        return n

    assert running.life.agent.write(drop).result() > 0  # damage, through the writer as any write goes
    report = running.ctl("verify")
    assert report["repaired"] == 1 and report["repaired_paths"] == [source]
    assert source in running.ctl("index", {"sources": True})["sources"]
    assert running.ctl("status")["index"]["verify"]["repaired_total"] >= 1


def test_a_folder_moved_while_its_parent_waits_for_its_job_is_not_repaired(running: Running) -> None:
    """The parent's job records a move (and updates the index); a pass that runs before it must leave the moved
    folder's old sources alone rather than "repair" them away with a warning (found using the agent: a folder
    renamed right after `roots add`/`remove` logged 491 removals, each a false alarm of a bug)."""
    agent = running.life.agent
    running.ctl("pause")  # the parent's job waits in the queue
    (running.root / "sub").rename(running.root / "moved")
    poll(lambda: agent.dir_busy(running.root), timeout=10, what="the root's job queued")
    report = running.ctl("verify")
    assert report["removed"] == 0 and report["repaired"] == 0, report
    running.ctl("resume")
    running.wait()
    sources = running.ctl("index", {"sources": True})["sources"]
    assert sorted(sources) == sorted(str(running.root / rel.replace("sub/", "moved/", 1)) for rel in DOCS)
    again = running.ctl("verify")
    assert again["removed"] == 0 and again["repaired"] == 0, again


def test_sidecars_made_with_another_index_fill_a_new_one_without_repairs(
    kb: Path, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A tree indexed by `ragd run --once` with another data directory (or on another machine, or before the data
    directory was deleted): its sidecars are EMBEDDED and unchanged, so no job announces them; the new index is
    filled from them at start-up, and the first verification repairs nothing (it "repaired" every file, with a
    warning each, found using the agent on /usr/share/doc)."""
    first = tmp_path / "first.toml"
    first.write_text(f'data_dir = "{tmp_path / "elsewhere"}"\n' + config_text(fake_openai_server, [kb]))
    summary = run_once(load_config(first))
    assert summary.embedded == len(DOCS)
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(config_text(fake_openai_server, [kb]))
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        st = control(life, "status")
        sources = control(life, "index", {"sources": True})["sources"]
    assert sources == sorted(str(kb / rel) for rel in DOCS)
    assert st["index"]["verify"]["repaired_total"] == 0, st["index"]["verify"]


def test_a_folder_left_busy_is_checked_again_once_the_agent_is_idle(running: Running) -> None:
    """A verification leaves a folder where work is under way; once the agent is idle that folder alone is checked
    again, and what differs there repaired, instead of at the next periodic pass (`watch.verify_interval`, ten
    minutes: found by the model-based test, a root's files out of search that long)."""
    agent = running.life.agent
    sub = running.root / "sub"
    source = str(sub / "gamma.md")

    def drop(sync):  # type: ignore[no-untyped-def]
        n = sync.index.delete_source(source)
        sync.index.flush()
        return n

    assert agent.write(drop).result() > 0  # damage, through the writer as any write goes
    running.ctl("pause")
    (sub / "epsilon.md").write_text("Epsilon: echidnas. Token: zyxepsilon.\n", encoding="utf-8")
    poll(lambda: agent.dir_busy(sub), timeout=10, what="the folder's job queued")
    report = running.ctl("verify")
    assert report["busy_dirs"] >= 1 and report["repaired"] == 0, report
    assert sub in agent.verifier.skipped
    running.ctl("resume")  # the job indexes epsilon.md; gamma.md, unchanged, is not its business

    def rechecked() -> dict | None:
        last = running.ctl("status")["index"]["verify"]["last"]
        return last if last["trigger"] == "recheck" else None

    last = poll(rechecked, timeout=60, what="a recheck of the folder")
    assert last["repaired_paths"] == [source] and last["dirs"] < 3, last  # not every folder: those left
    assert source in running.ctl("index", {"sources": True})["sources"]
    assert not agent.verifier.skipped
    assert str(sub / "epsilon.md") in running.ctl("index", {"sources": True})["sources"]


def test_a_file_and_its_entry_deleted_while_stopped_leave_the_index_at_the_next_start(
    kb: Path, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Another tool deletes a document and its entry while no agent runs: the folder's next job sees neither, so only
    the verification after the start-up rescan can tell that the index still holds it (a source in the index that
    its folder no longer lists), and removes it."""
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(config_text(fake_openai_server, [kb]))
    gone = kb / "sub" / "gamma.md"
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        assert str(gone) in control(life, "index", {"sources": True})["sources"]
    gone.unlink()
    sidecar.entry_path(gone.parent, gone.name).unlink()
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        last = poll(
            lambda: control(life, "status")["index"]["verify"]["last"], timeout=60, what="a verification"
        )
        sources = control(life, "index", {"sources": True})["sources"]
    assert last["removed_paths"] == [str(gone)] and last["repaired"] == 0, last
    assert sources == sorted(str(kb / rel) for rel in DOCS if rel != "sub/gamma.md")


@pytest.mark.slow
def test_a_pass_over_a_big_folder_holds_none_of_its_listing(running: Running) -> None:
    """A folder of 3,000 files compared file by file as it is read: the pass holds nothing of its listing (a
    stat and a name, ~360 bytes a file: 100,000 notes held ~34 MiB at the verification after their job). Files of
    a type ragd skips, so that the index's listing, which the pass holds too, is not what is measured."""
    n = 3000
    big = running.root / "big"
    big.mkdir()
    for i in range(n):
        (big / f"data-{i:05d}.bin").write_bytes(b"\x00\x01" * 8)
    running.ctl("wait", {"timeout": 240})
    # run twice, the first untraced: the verifier's records of the folder's entries are made once
    report, meanwhile = held_meanwhile(lambda: running.ctl("verify"))
    assert report["repaired"] == 0 and report["removed"] == 0 and report["sources"] == len(DOCS), report
    assert meanwhile / n < 150, f"{meanwhile / n:.0f} bytes a file held for a while by the pass"
