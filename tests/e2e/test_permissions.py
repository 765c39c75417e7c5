"""Folders the agent cannot read or write (DESIGN §4.1 "Permissions"), with the real agent run as an ordinary user:
the test process is root, which reads everything, so `ragd run` is started as a throwaway user who owns the data
directory, the runtime directory and the tree. `ragctl` runs as root (an agent answers its own user and root).

The tree (a marker word per file, found by keyword search):
    kb/top.md              zqtop      always searchable
    kb/sub/a.md            zqsuba     out of search while sub/ cannot be read
    kb/sub/inner/b.md      zqinner    likewise: it is below sub/
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from ragd.pipeline import sidecar
from tests.e2e.agent import AgentProcess, keyword_hits, ragctl, ragctl_json, write_doc
from tests.e2e.conftest import FAST_WATCH, write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll
from tests.support.users import User, python_for, require_root, throwaway_users, world_dir

MARKERS = {"top.md": "zqtop", "sub/a.md": "zqsuba", "sub/inner/b.md": "zqinner"}


def user_agent(log_path: Path, python: str, user: User, *args: str, env: dict[str, str]) -> AgentProcess:
    """`ragd run ARGS` as `user`, with `python` (an interpreter that user may run)."""
    return AgentProcess(log_path, *args, env=env, user=user, python=python)


@dataclass
class Setup:
    agent: AgentProcess
    kb: Path
    api: FakeOpenAI
    as_user: AsUser

    def finds(self, marker: str) -> bool:
        return bool(keyword_hits(marker))


def _owned(path: Path, user: User, mode: int = 0o700) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, user.uid, user.gid)
    path.chmod(mode)
    return path


def _give(tree: Path, user: User) -> None:
    for dirpath, _dirs, files in os.walk(tree):
        os.chown(dirpath, user.uid, user.gid)
        for f in files:
            os.chown(os.path.join(dirpath, f), user.uid, user.gid)


@pytest.fixture
def user() -> Iterator[User]:
    require_root()
    with throwaway_users("perm") as (made, _team):
        yield made["perm"]


@pytest.fixture
def base() -> Iterator[Path]:
    path = world_dir("ragd-perms-e2e-")
    try:
        yield path
    finally:
        for dirpath, dirs, _files in os.walk(path):  # the folders the test closed, opened for the removal
            for d in dirs:
                os.chmod(os.path.join(dirpath, d), 0o755)
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class AsUser:
    """What running ragd as the test's user takes: an interpreter it may run, and its environment."""

    user: User
    python: str
    env: dict[str, str]
    kb: Path

    def ragd(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.python, "-m", "ragd", *args], capture_output=True, text=True, timeout=300,
                              env=self.env, cwd=self.env["HOME"], user=self.user.uid, group=self.user.gid,
                              extra_groups=[])  # fmt: skip


@pytest.fixture
def as_user(
    base: Path, user: User, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> AsUser:
    kb = base / "kb"
    for rel, marker in MARKERS.items():
        write_doc(kb / rel, marker)
    (kb / "ro").mkdir()
    write_doc(kb / "ro" / "never.md", "zqnever")
    _give(kb, user)
    (kb / "ro").chmod(0o555)  # its files were never indexed, and no .rag/ can be made there
    python = python_for(user, base / "py")
    home = _owned(base / "home", user)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": str(_owned(home / "tmp", user)),
           "RAGD_CONFIG": str(write_api_config(base / "ragd.toml", fake_openai_server, watch=FAST_WATCH)),
           "RAGD_SOCKET": str(home / "run" / "ragd" / "control.sock")}  # fmt: skip
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"),
                     ("XDG_STATE_HOME", "state"), ("XDG_RUNTIME_DIR", "run")):  # fmt: skip
        env[var] = str(_owned(home / sub, user))
    (base / "ragd.toml").chmod(0o644)
    monkeypatch.setenv("RAGD_SOCKET", env["RAGD_SOCKET"])  # root's ragctl asks that agent
    return AsUser(user, python, env, kb)


@pytest.fixture
def setup(base: Path, as_user: AsUser, fake_openai_server: FakeOpenAI) -> Iterator[Setup]:
    agent = user_agent(base / "agent.log", as_user.python, as_user.user, str(as_user.kb), env=as_user.env)
    try:
        agent.wait_ready()
        agent.wait_idle()
        yield Setup(agent, as_user.kb, fake_openai_server, as_user)
    finally:
        agent.kill()


def _dir_errors(kb: Path) -> list[dict[str, str]]:
    [root] = ragctl_json("status")["roots"]
    return list(root.get("dir_errors") or [])


def _entry_stats(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (folder / sidecar.RAG_DIR).glob("*.ragjson")}


@pytest.mark.parametrize("mode", [0o000, 0o644], ids=["unreadable", "not-searchable"])
def test_a_folder_the_agent_cannot_read_is_out_of_search_until_it_can(setup: Setup, mode: int) -> None:
    """chmod 000 (or 0644: names listed, nothing reachable) on an indexed folder with an indexed folder below it:
    both leave search, status names the folder with "permission denied", `ragctl verify` neither dies nor repairs;
    a chmod back brings both back from their sidecars, with nothing embedded again."""
    kb, sub = setup.kb, setup.kb / "sub"
    assert all(setup.finds(m) for m in MARKERS.values())
    entries = {d: _entry_stats(d) for d in (sub, sub / "inner")}
    texts = len(setup.api.texts)

    sub.chmod(mode)
    poll(lambda: not setup.finds("zqsuba") and not setup.finds("zqinner"), what="sub/ to leave search")
    ragctl("wait")
    assert setup.finds("zqtop")
    [denied] = [e for e in _dir_errors(kb) if e["path"] == str(sub)]
    assert denied["reason"] == "permission denied" and denied["since"]
    plain = ragctl("status").stdout
    assert f"{sub}: permission denied" in plain, plain
    url = urlsplit(ragctl_json("status")["mcp"]["ui_url"])
    page = httpx.get(f"{url.scheme}://{url.netloc}/ui/failures").text  # the web page's failures
    assert f'<span class="path">{sub}</span>: <span class="reason">permission denied</span>' in page, page
    assert f"(since {denied['since']}: its files are out of search)" in page
    verify = ragctl("verify", "--json")
    assert verify.returncode == 0, verify.stderr
    report = json.loads(verify.stdout)
    assert (report["repaired"], report["removed"]) == (0, 0), report
    assert report["unreadable"] == [str(sub)]
    log = setup.agent.log()
    assert "Traceback" not in log and "internal error" not in log, log
    for path in (kb, sub / "a.md"):  # `ragd status PATH`, offline, as the agent's user
        offline = setup.as_user.ragd("status", "-r", "--json", str(path))
        assert offline.returncode == 0, offline.stderr
        rows = json.loads(offline.stdout)["entries"]
        [row] = [e for e in rows if e["path"].startswith(str(sub)) and e["state"] != "TRACKED"]
        assert (row["state"], row["reason"]) == ("FAILED", "permission denied: its files are out of search")

    sub.chmod(0o755)
    poll(lambda: setup.finds("zqsuba") and setup.finds("zqinner"), what="sub/ to come back")
    ragctl("wait")
    assert [e for e in _dir_errors(kb) if e["path"] == str(sub)] == []
    assert f"{sub}:" not in ragctl("status").stdout
    assert len(setup.api.texts) == texts  # nothing embedded again ...
    assert {d: _entry_stats(d) for d in entries} == entries  # ... nor any entry rewritten
    again = ragctl_json("verify")
    assert (again["repaired"], again["removed"], again["unreadable"]) == (0, 0, [])
    assert "Traceback" not in setup.agent.log()


def test_a_folder_deleted_below_a_folder_made_unreadable_is_no_error(setup: Setup) -> None:
    """sub/ closed (chmod 000), then a folder two levels below it deleted (by root, who may): the agent's reaction
    to the folder gone asked pathlib whether its parent was still a folder, which raised PermissionError there, and
    logged a traceback (found by the soak, seed 3617360202). Nothing is an error: once sub/ is opened again, its
    files are back and the deleted folder's are not."""
    sub = setup.kb / "sub"
    deep = sub / "inner" / "deep"
    write_doc(deep / "d.md", "zqdeep")
    _give(deep, setup.as_user.user)
    poll(lambda: setup.finds("zqdeep"), what="the deep note to be searchable")
    sub.chmod(0o000)
    shutil.rmtree(deep)  # at once, as the soak did
    (sub / "inner" / "b.md").unlink()  # ... and a file replaced by a folder, which then goes
    (sub / "inner" / "b.md").mkdir()
    time.sleep(0.3)
    (sub / "inner" / "b.md").rmdir()
    poll(lambda: not setup.finds("zqsuba") and not setup.finds("zqdeep"), what="sub/ to leave search")
    ragctl("wait")
    sub.chmod(0o755)
    poll(lambda: setup.finds("zqsuba"), what="sub/ to come back")
    ragctl("wait")
    assert not setup.finds("zqdeep") and not setup.finds("zqinner") and setup.finds("zqtop")
    report = ragctl_json("verify")
    assert (report["repaired"], report["removed"], report["unreadable"]) == (0, 0, [])
    log = setup.agent.log()
    assert "Traceback" not in log and "internal error" not in log, log


def test_a_folder_the_agent_cannot_write_in_is_named_in_status(setup: Setup) -> None:
    """A folder (0555) whose files were never indexed: no `.rag/` can be made there. Status names that folder
    (plain text too) and says it cannot be written, not a lock file that does not exist."""
    ro = setup.kb / "ro"
    [err] = [e for e in _dir_errors(setup.kb) if e["path"] == str(ro)]
    assert err["reason"].startswith(f"cannot write in {ro}: Permission denied"), err
    assert ".rag/tmp" not in err["reason"]
    plain = ragctl("status").stdout
    assert f"{ro}: cannot write in {ro}" in plain, plain
    assert not setup.finds("zqnever")
    assert "Traceback" not in setup.agent.log()


def test_run_once_over_a_folder_it_cannot_read(as_user: AsUser, fake_openai_server: FakeOpenAI) -> None:
    """`ragd run --once`: the closed folder is a failed folder ("permission denied", exit 1, no traceback) and its
    files leave the index; opened again, the next run serves them from their sidecars, nothing embedded again."""
    kb, sub = as_user.kb, as_user.kb / "sub"
    (kb / "ro").chmod(0o755)
    first = as_user.ragd("run", "--once", "--json", str(kb))
    assert first.returncode == 0, first.stderr
    texts = len(fake_openai_server.texts)
    sub.chmod(0)
    closed = as_user.ragd("run", "--once", "--json", str(kb))
    assert closed.returncode == 1 and "Traceback" not in closed.stderr, closed.stderr
    summary = json.loads(closed.stdout)
    assert summary["failed_dirs"] == [{"path": str(sub), "reason": "permission denied"}]
    assert summary["index"]["chunks"] == 2  # top.md and ro/never.md
    sub.chmod(0o755)
    opened = as_user.ragd("run", "--once", "--json", str(kb))
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["index"]["chunks"] == 4
    assert len(fake_openai_server.texts) == texts


def test_a_root_inside_a_folder_it_cannot_enter_is_a_root_it_cannot_reach(
    base: Path, as_user: AsUser, fake_openai_server: FakeOpenAI
) -> None:
    """A root (here nested in another) inside a folder the agent may not enter: asking pathlib whether it was a
    folder raised PermissionError, and the agent died at its start (found by the soak, seed 380112397). It is a
    root that cannot be reached now, said in status, while the other root serves the rest; `ragd run --once` and
    `ragctl roots add` on such a folder say the same, with no traceback."""
    kb, sub = as_user.kb, as_user.kb / "sub"
    inner = sub / "inner"
    sub.chmod(0)
    agent = user_agent(base / "agent.log", as_user.python, as_user.user, str(kb), str(inner), env=as_user.env)
    try:
        agent.wait_ready()
        agent.wait_idle()
        roots = ragctl_json("status")["roots"]
        [closed] = [r for r in roots if r["path"] == str(inner)]
        assert closed["error"] == f"{inner} cannot be reached: permission denied", roots
        assert keyword_hits("zqtop") and not keyword_hits("zqinner")
        added = ragctl("roots", "add", str(inner / "deeper"), check=None)
        assert added.returncode != 0 and "cannot be reached: permission denied" in added.stderr, added.stderr
        log = agent.log()
        assert "Traceback" not in log and "internal error" not in log, log
    finally:
        agent.kill()
    once = as_user.ragd("run", "--once", str(inner))
    assert once.returncode == 2, once.stderr
    assert "cannot be reached: permission denied" in once.stderr and "Traceback" not in once.stderr


def test_without_a_watch_event_the_verification_finds_the_folder_and_brings_it_back(
    base: Path, as_user: AsUser, fake_openai_server: FakeOpenAI
) -> None:
    """A root watched by polling (a network file system's: a chmod changes no size nor mtime the poll compares):
    a verification pass finds the folder closed, and the agent holds it out; the next pass after it is opened
    hands it back to the agent, which serves it again; neither counts as a repair."""
    kb, sub = as_user.kb, as_user.kb / "sub"
    cfg = Path(as_user.env["RAGD_CONFIG"])
    cfg.write_text(
        cfg.read_text() + f"poll = [{json.dumps(str(kb))}]\npoll_interval = 3600\n"
    )  # [watch] is last
    agent = user_agent(base / "agent.log", as_user.python, as_user.user, str(kb), env=as_user.env)
    try:
        agent.wait_ready()
        agent.wait_idle()
        assert keyword_hits("zqsuba")
        sub.chmod(0)
        first = ragctl_json("verify")
        assert (first["repaired"], first["removed"], first["unreadable"]) == (0, 0, [str(sub)])
        ragctl("wait")
        assert not keyword_hits("zqsuba") and not keyword_hits("zqinner")
        [root] = ragctl_json("status")["roots"]
        assert [e["reason"] for e in root["dir_errors"] if e["path"] == str(sub)] == ["permission denied"]
        sub.chmod(0o755)
        second = ragctl_json("verify")
        assert (second["repaired"], second["removed"], second["unreadable"]) == (0, 0, [])
        ragctl("wait")
        assert keyword_hits("zqsuba") and keyword_hits("zqinner")
        assert "Traceback" not in agent.log()
    finally:
        agent.kill()


def test_a_folder_unreadable_when_watching_began_is_watched_once_it_can_be_read(
    base: Path, as_user: AsUser, fake_openai_server: FakeOpenAI
) -> None:
    """inotify watches only a folder its process may read: one closed when the agent started (or moved in closed)
    had no watch, and once opened its files were indexed but a file written in it later never was (found by the
    soak: a file made in such a folder missing from status). Opened again, it is watched, the folders below it
    too."""
    kb, sub = as_user.kb, as_user.kb / "sub"
    sub.chmod(0)
    agent = user_agent(base / "agent.log", as_user.python, as_user.user, str(kb), env=as_user.env)
    try:
        agent.wait_ready()
        agent.wait_idle()
        assert keyword_hits("zqtop") and not keyword_hits("zqsuba")
        sub.chmod(0o755)
        poll(lambda: keyword_hits("zqsuba") and keyword_hits("zqinner"), what="sub/ to be indexed")
        ragctl("wait")
        for path, marker in ((sub / "later.md", "zqlater"), (sub / "inner" / "deeper.md", "zqdeeper")):
            write_doc(path, marker)
            os.chown(path, as_user.user.uid, as_user.user.gid)
        poll(lambda: keyword_hits("zqlater") and keyword_hits("zqdeeper"), what="the files written later")
        assert "Traceback" not in agent.log()
    finally:
        agent.kill()
