"""Folders the agent's user cannot write in, as a system service meets them (issue 37, items 5 and 7): the agent run
as a throwaway user (tests/e2e/test_permissions.py's fixtures), the tree owned by root.

- Before the documented `setfacl` step, the root cannot be written: plain `ragctl status` says so (health and the
  folder itself), and a verification is no "internal error" with a traceback.
- After it, a folder copied in later with `cp -r` gets an ACL mask `r-x`: status names that folder and the real
  cause, never a `.rag/tmp` that does not exist; the docs' remedy (the `setfacl` line again) brings it in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.agent import AgentProcess, keyword_hits, ragctl, ragctl_json, write_doc
from tests.e2e.test_permissions import AsUser, as_user, base, user  # noqa: F401 (fixtures)
from tests.support.poll import poll


def _root_owned(tree: Path) -> None:
    for dirpath, _dirs, files in os.walk(tree):
        os.chown(dirpath, 0, 0)
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chown(os.path.join(dirpath, f), 0, 0)
            os.chmod(os.path.join(dirpath, f), 0o644)


@pytest.fixture
def agent(base: Path, as_user: AsUser) -> Iterator[AgentProcess]:  # noqa: F811
    shutil.rmtree(as_user.kb / "ro")
    _root_owned(as_user.kb)  # as the installer leaves /srv/docs: readable, not writable, by the ragd account
    proc = AgentProcess(base / "agent.log", str(as_user.kb), env=as_user.env, user=as_user.user,
                        python=as_user.python)  # fmt: skip
    try:
        proc.wait_ready()
        proc.wait_idle()
        yield proc
    finally:
        proc.kill()


def _folders() -> dict[str, str]:
    return dict(ragctl_json("status")["health"]["folders"])


def _setfacl(*args: str) -> None:
    if shutil.which("setfacl") is None:
        pytest.skip("needs setfacl (the acl package)")
    subprocess.run(["setfacl", *args], check=True, capture_output=True, timeout=60)


def test_a_root_the_agent_cannot_write_in_is_shown_in_plain_status_and_verifies_quietly(
    agent: AgentProcess,
    as_user: AsUser,  # noqa: F811
) -> None:
    kb = as_user.kb
    folders = _folders()
    assert folders["state"] == "unavailable", folders  # its only root
    assert folders["detail"].startswith(f"{kb}: cannot write in {kb}: Permission denied"), folders
    plain = ragctl("status").stdout
    assert "health: 1 problem" in plain and "  folders: UNAVAILABLE" in plain, plain
    assert f"  folders with errors:\n    {kb}: cannot write in {kb}: Permission denied" in plain, plain
    verify = ragctl("verify", "--json")
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["repaired"] == 0
    log = agent.log()
    assert "Traceback" not in log and "internal error" not in log, log
    said = [ln for ln in log.splitlines() if "WARNING ragd.resident.capabilities: folders " in ln]
    # (degraded first if a folder below the root failed before the root itself: once per change of state)
    assert 1 <= len(said) <= 2 and "folders unavailable: " in said[-1] and " cannot be indexed" in said[-1], (
        log
    )


def test_a_folder_copied_in_after_setfacl_names_itself_and_the_recipe_brings_it_in(
    agent: AgentProcess,
    as_user: AsUser,  # noqa: F811
    base: Path,  # noqa: F811
) -> None:
    kb, name = as_user.kb, as_user.user.name
    recipe = ["-R", "-m", f"u:{name}:rwX", "-m", f"d:u:{name}:rwX", str(kb)]  # docs/operations.md
    _setfacl(*recipe)
    ragctl("sync", "--wait")
    poll(lambda: _folders()["state"] == "ok", what="the root to be writable")
    assert keyword_hits("zqtop")
    source = base / "elsewhere" / "manuals"
    write_doc(source / "m.md", "zqcopied")
    subprocess.run(["cp", "-r", str(source), str(kb / "manuals")], check=True, timeout=60)  # mask r-x
    copied = kb / "manuals"

    def named() -> list[dict[str, str]]:
        [root] = ragctl_json("status")["roots"]
        return [e for e in root.get("dir_errors") or [] if e["path"] == str(copied)]

    [err] = poll(named, what="the copied folder's error")
    assert err["reason"].startswith(f"cannot write in {copied}: Permission denied"), err
    assert ".rag/tmp" not in err["reason"]
    assert _folders()["state"] == "degraded"
    assert f"{copied}: cannot write in {copied}" in ragctl("status").stdout

    _setfacl(*recipe)  # the remedy the docs give: the same line again
    ragctl("sync", "--wait")
    poll(lambda: keyword_hits("zqcopied"), what="the copied folder to be indexed")
    assert named() == [] and _folders()["state"] == "ok"
    poll(lambda: "folders: working again" in agent.log(), what="the return in the log")


HOG = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while (fd := libc.inotify_init1(0)) >= 0:
    fds.append(fd)
print(len(fds), flush=True)
sys.stdin.read()
"""


def test_a_root_left_to_polling_by_the_inotify_limits_shows_file_watching_degraded(
    base: Path,  # noqa: F811
    as_user: AsUser,  # noqa: F811
) -> None:
    """Another program of the same user holds every inotify instance the user may have: the root is polled, and
    health says so with the limit to raise."""
    hog = subprocess.Popen([as_user.python, "-c", HOG], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           user=as_user.user.uid, group=as_user.user.gid, extra_groups=[], cwd=as_user.env["HOME"],
                           env=as_user.env)  # fmt: skip
    agent = None
    try:
        assert hog.stdout is not None and int(hog.stdout.readline()) > 0
        agent = AgentProcess(base / "agent.log", str(as_user.kb), env=as_user.env, user=as_user.user,
                             python=as_user.python)  # fmt: skip
        agent.wait_ready()
        watching = poll(lambda: ragctl_json("status")["health"]["watching"], what="the health")
        assert watching["state"] == "degraded", watching
        assert "max_user_instances" in watching["reason"] and watching["detail"] == str(as_user.kb), watching
        assert "  file watching: DEGRADED" in ragctl("status").stdout
        assert (
            "WARNING ragd.resident.capabilities: file watching degraded: polled instead of watched"
            in agent.log()
        )
    finally:
        if agent is not None:
            agent.kill()
        hog.kill()
        hog.wait(30)
