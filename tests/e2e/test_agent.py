"""The resident agent as users run it: `ragd run` in the background, steered and observed through `ragctl`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragd.edges.lifecycle import PAGES_UNUSED_S
from ragd.pipeline import sidecar
from tests.e2e.agent import (
    AgentProcess,
    files_in,
    keyword_hits,
    ragctl,
    ragctl_json,
    running_agent,
    write_doc,
)
from tests.e2e.conftest import FAST_WATCH, RAGD, write_api_config
from tests.integration.helpers import all_json_valid
from tests.support import smaps
from tests.support.fake_openai import FakeOpenAI
from tests.support.isolation import apply, environ, isolation
from tests.support.poll import poll


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    write_doc(root / "sub" / "b.md", "bravo")
    return root


@pytest.fixture
def agent(tmp_path: Path, config: Path, root: Path) -> Iterator[AgentProcess]:
    with running_agent(tmp_path / "agent.log", str(root)) as proc:
        yield proc


def test_tree_changes_reach_the_index_exactly(agent: AgentProcess, root: Path, tmp_path: Path) -> None:
    agent.wait_idle()
    assert agent.sources() == files_in(root)
    write_doc(root / "c.md", "charlie")  # create
    write_doc(root / "a.md", "alpha", "edited in place with delta")  # edit in place
    swap = root / "sub" / ".b.md.swp"  # editor-style save: write a temp file, rename it over the target
    write_doc(swap, "bravo", "saved by an editor with echo")
    swap.rename(root / "sub" / "b.md")
    (root / "sub" / "b.md").rename(root / "sub" / "b2.md")  # rename
    write_doc(root / "gone.md", "golf")
    agent.wait_idle()
    (root / "gone.md").unlink()  # delete
    write_doc(root / "new dir" / "deep" / "d.md", "deltax")  # a new directory tree
    outside = write_doc(tmp_path / "outside" / "inner" / "e.md", "echox").parent.parent
    shutil.move(outside, root / "moved-in")  # a directory moved in
    agent.wait_idle()
    assert agent.sources() == files_in(root)
    assert keyword_hits("delta") == [str(root / "a.md")]
    assert keyword_hits("echo") == [str(root / "sub" / "b2.md")]
    assert keyword_hits("echox") == [str(root / "moved-in" / "inner" / "e.md")]
    assert keyword_hits("golf") == []
    shutil.move(root / "moved-in", tmp_path / "away")  # a directory moved out
    shutil.rmtree(root / "new dir")  # a directory deleted
    agent.wait_idle()
    write_doc(
        tmp_path / "away" / "inner" / "late.md", "lateecho"
    )  # written in the moved-out dir: must not count
    agent.wait_idle()
    assert agent.sources() == files_in(root)
    assert keyword_hits("echox") == [] and keyword_hits("lateecho") == []
    st = ragctl_json("status")
    assert st["roots"][0]["files"]["EMBEDDED"] == len(files_in(root))
    assert st["agent"]["idle"] and st["agent"]["state"] == "idle"
    assert ragctl_json("orphans") == {"path": None, "orphans": [], "removed": 0}
    all_json_valid(root)


def test_burst_of_2000_files_loses_none(agent: AgentProcess, root: Path) -> None:
    burst = root / "burst"
    burst.mkdir()
    for i in range(2000):
        (burst / f"n{i:04d}.txt").write_text(f"burst note number {i} token{i}x\n")
    agent.wait_idle()
    assert agent.sources() == files_in(root)
    st = ragctl_json("status")
    assert st["roots"][0]["files"] == {"EMBEDDED": 2002, "SKIPPED": 0, "FAILED": 0}
    assert keyword_hits("token1999x") == [str(burst / "n1999.txt")]


def test_sighup_adds_and_removes_roots(tmp_path: Path, config: Path, root: Path) -> None:
    other = tmp_path / "other"
    write_doc(other / "o.md", "oscar")
    base = config.read_text()
    config.write_text(f'roots = ["{root}"]\n' + base)
    agent = AgentProcess(tmp_path / "agent.log")
    try:
        agent.wait_ready()
        agent.wait_idle()
        assert agent.sources() == files_in(root)
        config.write_text(f'roots = ["{other}"]\n' + base)
        agent.signal(signal.SIGHUP)
        poll(
            lambda: [r["path"] for r in ragctl_json("roots", "list")["roots"]] == [str(other)], what="reload"
        )
        agent.wait_idle()
        assert agent.sources() == files_in(other)
        assert keyword_hits("alpha") == []
        config.write_text("roots = [\n" + base)  # broken: the agent keeps running with what it has
        agent.signal(signal.SIGHUP)
        poll(lambda: ragctl_json("status")["agent"]["reload_error"], what="the reload error")
        assert agent.sources() == files_in(other)
        assert agent.stop() == 0
    finally:
        agent.kill()


def test_signals_in_quick_succession_neither_hang_nor_stop_the_agent_from_stopping(
    tmp_path: Path, config: Path, root: Path
) -> None:
    """A handler that took an Event's lock ran again, nested, when the next signal came while it held it, and waited
    for itself for ever: found in CI, where a test's two SIGTERMs left an agent that never stopped (`py-spy`: the main
    thread in `Event.set` inside `_on_stop` inside `Event.set` inside `_on_stop`). Bursts of SIGHUP and then of
    SIGTERM: it still answers between them, reloads, and stops with 0."""
    agent = AgentProcess(tmp_path / "agent.log", str(root))
    try:
        agent.wait_ready()
        _storm(agent, signal.SIGHUP, 2.0)
        assert ragctl_json("status")["agent"]["pid"] == agent.pid  # not stopped by them
        poll(lambda: "configuration reloaded" in agent.log(), what="a reload")
        # its main loop alive after the reloads: it stops. (Until it says so: the interpreter's own exit gives SIGTERM
        # its default action back, and one that came then would end it with -15.)
        _storm(agent, signal.SIGTERM, 2.0, until=lambda: "stopping" in agent.log())
        assert agent.proc.wait(60) == 0, agent.log()
    finally:
        agent.kill()


def _storm(agent: AgentProcess, sig: int, seconds: float, until: Callable[[], bool] = lambda: False) -> None:
    """`sig` sent to the agent as fast as one process can for `seconds`, while it runs and `until` (asked every
    hundred signals) is false."""
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end and agent.proc.poll() is None and (sent % 100 or not until()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent.pid, sig)
        sent += 1


def test_stop_restart_and_single_instance(tmp_path: Path, config: Path, root: Path) -> None:
    first = AgentProcess(tmp_path / "a1.log", str(root))
    try:
        first.wait_ready()
        second = AgentProcess(tmp_path / "a2.log", str(root))
        assert second.proc.wait(60) == 3
        assert f"already running (pid {first.pid})" in second.log()
        sock = Path(first.call("status")["agent"]["socket"])
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
        first.wait_idle()
        assert first.stop() == 0  # SIGTERM: clean exit
        assert not sock.exists()
        assert ragctl("status", check=3).stderr.startswith("ragctl: the ragd agent is not running")
        killed = AgentProcess(tmp_path / "a3.log", str(root))
        killed.wait_ready()
        for i in range(30):
            write_doc(root / "many" / f"k{i}.md", f"kilo{i}")
        poll(lambda: killed.call("status")["embedder"]["texts"] > 0, what="some embedding")
        killed.kill()  # SIGKILL mid-work: stale socket and lock stay behind
        again = AgentProcess(tmp_path / "a4.log", str(root))
        try:
            again.wait_ready()
            again.wait_idle()
            assert again.sources() == files_in(root)
            all_json_valid(root)
            assert (
                not list((root / "many" / ".rag" / "tmp").glob("*"))
                if (root / "many" / ".rag" / "tmp").exists()
                else True
            )
        finally:
            again.kill()
    finally:
        first.kill()


# -- one test per `ragctl` verb, against one agent shared by the class ---------------------------------------------
@dataclass(frozen=True)
class Shared:
    """An agent started once for the class (with its own fake API, HOME and XDG_* directories) on `root`."""

    agent: AgentProcess
    root: Path
    changes: dict[str, str | None]  # the environment that reaches it


@pytest.fixture(scope="class")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """`ragd run` on a tree of two files, ready, with the isolation every test has (tests/conftest.py)."""
    base = tmp_path_factory.mktemp("shared")
    (base / "home").mkdir()
    changes = isolation(base / "home")
    root = base / "kb"
    write_doc(root / "a.md", "alpha")
    write_doc(root / "sub" / "b.md", "bravo")
    with FakeOpenAI() as server:
        changes["RAGD_CONFIG"] = str(write_api_config(base / "ragd.toml", server, watch=FAST_WATCH))
        agent = AgentProcess(base / "agent.log", str(root), env=environ(changes))
        try:
            agent.wait_ready()
            yield Shared(agent, root, changes)
        finally:
            agent.kill()


@pytest.fixture
def steered(shared: Shared, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shared]:
    """The shared agent, reached by `ragctl` in this test, and left running, idle and on its one root after it."""
    apply(shared.changes, monkeypatch)
    yield shared
    agent = shared.agent
    agent.call("resume")
    roots = agent.call("roots", {"action": "list"})["roots"]
    for extra in (r["path"] for r in roots if r["path"] != str(shared.root)):
        agent.call("roots", {"action": "remove", "path": extra})
    agent.wait_idle()


def _paused_with_work_pending(root: Path, token: str) -> None:
    """The idle agent paused, and a new file waiting for it."""
    assert ragctl_json("pause") == {"paused": True}
    write_doc(root / f"{token}.md", token)
    poll(lambda: ragctl_json("status")["roots"][0]["pending_dirs"] >= 1, what="a pending directory")


class TestRagctlVerbs:
    """One test per verb. They share one agent (an agent each made them four times slower: about 38 s instead of
    10 s); `steered` puts it back as it was after each test (resumed, on its one root, idle), so the order does
    not matter."""

    def test_pause_holds_new_work(self, steered: Shared) -> None:
        steered.agent.wait_idle()
        _paused_with_work_pending(steered.root, "paused")
        assert ragctl_json("status")["agent"]["state"] == "paused"

    def test_wait_fails_while_paused_work_waits(self, steered: Shared) -> None:
        steered.agent.wait_idle()
        _paused_with_work_pending(steered.root, "waiting")
        assert ragctl("wait", "--timeout", "1", check=1).returncode == 1

    def test_resume_releases_paused_work(self, steered: Shared) -> None:
        steered.agent.wait_idle()
        _paused_with_work_pending(steered.root, "papa")
        assert ragctl_json("resume") == {"paused": False}
        ragctl("wait")
        assert keyword_hits("papa") == [str(steered.root / "papa.md")]

    def test_sync_forces_a_folder_and_refuses_a_path_outside_the_roots(
        self, steered: Shared, tmp_path: Path
    ) -> None:
        steered.agent.wait_idle()
        res = ragctl_json("sync", str(steered.root / "sub"), "--force", "--wait")
        assert res["scheduled"] == 1
        assert ragctl("sync", str(tmp_path), check=1).stderr.startswith("ragctl: ")

    def test_export_archives_the_sidecars(self, steered: Shared, tmp_path: Path) -> None:
        steered.agent.wait_idle()
        archive = tmp_path / "kb.tar.gz"
        ragctl("export", str(archive), str(steered.root), "-r")
        with tarfile.open(archive) as tar:
            names = sorted(tar.getnames())
        assert ".rag/a.md.ragjson" in names and "sub/.rag/b.md.ragjson" in names

    def test_roots_add_and_remove(self, steered: Shared, tmp_path: Path) -> None:
        steered.agent.wait_idle()
        other = tmp_path / "more"
        write_doc(other / "m.md", "mike")
        ragctl_json("roots", "add", str(other))
        ragctl("wait")
        assert keyword_hits("mike") == [str(other / "m.md")]
        assert (sidecar.entry_path(other, "m.md")).is_file()
        ragctl_json("roots", "remove", str(other))
        ragctl("wait")
        assert keyword_hits("mike") == []

    def test_search_under_a_path_that_does_not_exist(self, steered: Shared, tmp_path: Path) -> None:
        steered.agent.wait_idle()
        inside = ragctl("search", "x", "--path-prefix", str(steered.root / "nowhere"), check=None)
        assert inside.returncode == 0 and inside.stdout == "no results\n", inside
        outside = ragctl("search", "x", "--path-prefix", str(tmp_path / "nowhere"), check=None)
        assert outside.returncode == 2 and "is not under any root" in outside.stderr, outside
        assert str(steered.root) in outside.stderr  # the hint names the roots

    def test_index_rebuild_keeps_what_was_indexed(self, steered: Shared) -> None:
        steered.agent.wait_idle()
        write_doc(steered.root / "rebuilt.md", "rebuilt")
        poll(
            lambda: keyword_hits("rebuilt") == [str(steered.root / "rebuilt.md")],
            what="the file to be indexed",
        )
        out = ragctl_json("index", "--rebuild")
        assert out["chunks"] > 0
        assert keyword_hits("rebuilt") == [str(steered.root / "rebuilt.md")]


def test_other_producers_change_notes_are_applied(agent: AgentProcess, root: Path) -> None:
    """Sidecars and mushrooms written by another process (here `ragd run --once --no-index`, standing in for the
    ragjson tool) reach the index through the watcher, even while the agent's own jobs are paused."""
    agent.wait_idle()
    ragctl_json("pause")
    write_doc(root / "ext" / "x.md", "xrayext")
    done = subprocess.run([*RAGD, "run", "--once", "--no-index", "--json", str(root)], capture_output=True,
                          text=True, timeout=120, env=os.environ.copy())  # fmt: skip
    assert done.returncode == 0, done.stderr
    poll(
        lambda: keyword_hits("xrayext") == [str(root / "ext" / "x.md")],
        what="the external change note to be applied",
    )
    poll(  # searchable as soon as applied; deleted once flushed, right after (nothing else is on its way)
        lambda: not list((root / "ext" / ".rag").glob("*.mushroom")),
        timeout=10,
        what="the applied change note to be deleted",
    )
    ragctl_json("resume")
    agent.wait_idle()
    assert agent.sources() == files_in(root)


def test_interrupted_work_is_redone_after_a_forced_exit(
    tmp_path: Path, config: Path, root: Path, fake_openai_server: FakeOpenAI
) -> None:
    """SIGINT starts a graceful stop; a second SIGINT exits at once (130). Files caught mid-embedding are left
    pending, not FAILED, and the next start finishes them."""
    agent = AgentProcess(tmp_path / "a1.log", str(root))
    try:
        agent.wait_ready()
        agent.wait_idle()
        fake_openai_server.delay = 1.5  # every embedding request now takes 1.5 s
        for i in range(20):
            write_doc(root / "slow" / f"s{i}.md", f"sierra{i}")
        poll(lambda: agent.call("status")["embedder"]["in_flight"] > 0, what="a request in flight")
        agent.signal(signal.SIGINT)
        poll(lambda: "stopping" in agent.log(), what="the graceful stop to begin")
        agent.signal(signal.SIGINT)
        assert agent.proc.wait(30) == 130
    finally:
        agent.kill()
    fake_openai_server.delay = 0.0
    states = {sidecar.try_read(p).status for p in (root / "slow" / ".rag").glob("*.ragjson")}  # type: ignore[union-attr]
    assert "FAILED" not in states
    again = AgentProcess(tmp_path / "a2.log", str(root))
    try:
        again.wait_ready()
        again.wait_idle()
        assert again.sources() == files_in(root)
        assert again.call("status")["roots"][0]["files"]["EMBEDDED"] == len(files_in(root))
    finally:
        again.kill()


def test_a_failing_embeddings_api_is_reported_and_recovered(
    agent: AgentProcess, root: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The API answers 503 (more times than the retries): the file is FAILED with the reason and a retry time, the
    embedder's last error is shown, the agent goes on; once the API is back, a forced sync embeds it."""
    agent.wait_idle()
    fake_openai_server.fail_next(20, status=503, message="upstream overloaded")
    write_doc(root / "flaky.md", "foxtrot")
    agent.wait_idle()
    st = ragctl_json("status")
    failures = st["roots"][0]["failures"]
    assert [f["path"] for f in failures] == [str(root / "flaky.md")]
    assert "503" in failures[0]["reason"] and failures[0]["retry_at"]
    assert st["embedder"]["last_error"] and "sk-e2e-secret" not in str(st)
    assert "1 failed" in ragctl("status").stdout
    fake_openai_server.reset()  # the API is back
    ragctl("sync")  # held down after the outage (embedding.down_pause): a person's sync tries it now
    write_doc(root / "fine.md", "golfball")  # the agent still works for other files
    agent.wait_idle()
    assert keyword_hits("golfball") == [str(root / "fine.md")]
    ragctl_json("sync", str(root / "flaky.md"), "--force", "--wait")
    assert keyword_hits("foxtrot") == [str(root / "flaky.md")]
    assert ragctl_json("status")["roots"][0]["failures"] == []


def test_odd_names_and_bad_files_while_watching(agent: AgentProcess, root: Path) -> None:
    """Names with quotes, %, _, a newline, emoji and CJK are indexed like any other; a binary file and an empty
    one end FAILED / SKIPPED with their reasons in `status`; the agent carries on."""
    agent.wait_idle()
    names = ["q\"uote's.md", "50% off_a_b.md", "line\nbreak.md", "emoji 😀.md", "中文 笔记.md", "a\\b.md"]
    for i, name in enumerate(names):
        write_doc(root / "odd" / name, f"oddname{i}")
    (root / "odd" / "junk.txt").write_bytes(b"\x00\xff\x10binary" * 200)
    (root / "odd" / "empty.md").write_bytes(b"")
    agent.wait_idle()
    for i, name in enumerate(names):
        assert keyword_hits(f"oddname{i}") == [str(root / "odd" / name)], name
    st = ragctl_json("status")["roots"][0]
    assert [f["path"] for f in st["failures"]] == [str(root / "odd" / "junk.txt")]
    assert "binary" in st["failures"][0]["reason"]
    assert st["files"]["SKIPPED"] == 1 and st["files"]["FAILED"] == 1
    assert set(agent.sources()) == set(files_in(root)) - {
        str(root / "odd" / "junk.txt"),
        str(root / "odd" / "empty.md"),
    }
    human = ragctl("status").stdout
    assert "junk.txt" in human and "binary" in human


def test_the_pages_a_search_read_are_given_back_once_the_index_goes_unused(
    tmp_path: Path, config: Path, root: Path
) -> None:
    """A search reads the index through its mapped files, and the pages it read stayed in the agent's RSS until the
    index rested (`run.rest_after`: 120 s; never here): ~43 MiB after a search of 50 hits in a 30,000-chunk index.
    Once the index has gone unused for PAGES_UNUSED_S while the agent is idle, they are given back."""
    config.write_text(config.read_text() + "\n[run]\nrest_after = 0\n")
    data = Path(os.environ["XDG_DATA_HOME"])  # the agent's data directory is below it

    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:

        def resident() -> int:
            """KiB of the collection's files in the agent's RSS (not the keyword index's: small)."""
            return smaps.resident_kib(
                lambda name: name.startswith(f"{data}/") and "/index/" in name and ".keywords/" not in name,
                agent.pid,
            )

        assert keyword_hits("alpha") == [str(root / "a.md")]
        assert ragctl_json("search", "bravo", "-k", "5")["results"]
        assert resident() > 0
        poll(
            lambda: resident() == 0,
            timeout=PAGES_UNUSED_S + 30,
            what="the pages the searches read given back",
        )
        assert ragctl_json("search", "bravo", "-k", "5")["results"]  # read again: the index is still open
        assert resident() > 0
        poll(lambda: resident() == 0, timeout=PAGES_UNUSED_S + 30, what="given back once more")


def test_an_unused_index_rests_and_the_next_search_or_change_opens_it(
    tmp_path: Path, config: Path, root: Path
) -> None:
    config.write_text(config.read_text() + "\n[run]\nrest_after = 1\n")
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:
        poll(lambda: agent.call("status")["index"]["resting"], timeout=30, what="the index resting")
        poll(
            lambda: "resting after 1 s unused: index closed" in agent.log(),
            timeout=10,
            what="the rest logged",
        )
        status = ragctl("status").stdout
        assert "closed while unused" in status
        assert keyword_hits("alpha") == [str(root / "a.md")]  # a search opens it again
        assert not agent.call("status")["index"]["resting"]
        poll(lambda: agent.call("status")["index"]["resting"], timeout=30, what="resting again")
        write_doc(root / "c.md", "charlie")  # so does a change
        poll(lambda: keyword_hits("charlie") == [str(root / "c.md")], timeout=60, what="c.md indexed")
        agent.wait_idle()
        assert agent.sources() == files_in(root)
