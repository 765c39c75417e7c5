"""Real local users for access-scope tests: throwaway accounts (useradd/groupadd, removed afterwards), and
`ragctl` run as one of them.

The test process runs as root. `ragctl` as a user is started by root and drops to the user (setgroups, setgid,
setuid) after importing itself, so it works even where the interpreter lives in a directory that user cannot
read (a Python under /root); from then on it is that user's process, and the agent sees that user's uid as the
control socket's peer (SO_PEERCRED), exactly as for a `ragctl` the user started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import socket

# Imports every module of ragctl (it imports some lazily) and what they load on demand, then becomes the user.
BOOTSTRAP = """
import importlib, os, pkgutil, sys
import ragctl
for m in pkgutil.walk_packages(ragctl.__path__, "ragctl."):
    importlib.import_module(m.name)
import argparse, gettext, gzip, json, locale, logging, pwd, queue, selectors, tarfile, tempfile, threading, zlib  # noqa
import ragctl.main
ragctl.main.build_parser()  # argparse reads its translations on first use
uid, gid, groups = int(sys.argv[1]), int(sys.argv[2]), [int(g) for g in sys.argv[3].split(",") if g]
os.setgroups(groups)
os.setgid(gid)
os.setuid(uid)
from ragctl.main import main
sys.exit(main(sys.argv[4:]))
"""


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]

    def command(self, *args: str) -> list[str]:
        """The command line of `ragctl ARGS` run as this user."""
        groups = ",".join(str(g) for g in self.groups)
        return [sys.executable, "-c", BOOTSTRAP, str(self.uid), str(self.gid), groups, *args]


USER_TOOLS = ("useradd", "groupadd", "userdel", "groupdel")


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates throwaway users and runs ragctl as them")
    for tool in USER_TOOLS:
        if _tool(tool) is None:
            pytest.skip(f"needs {tool} to create throwaway users")


def can_make_users() -> bool:
    """Whether this process may create throwaway users (root, with the tools)."""
    return os.geteuid() == 0 and all(_tool(t) is not None for t in USER_TOOLS)


SBIN = os.pathsep.join(("/usr/local/sbin", "/usr/sbin", "/sbin"))  # a minimal PATH (CI's) may leave them out


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SBIN)


def _run(*cmd: str) -> None:
    cmd = (_tool(cmd[0]) or cmd[0], *cmd[1:])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (cmd, proc.stdout, proc.stderr)


@contextmanager
def throwaway_users(
    *names: str, group_members: tuple[str, ...] = ()
) -> Iterator[tuple[dict[str, User], int]]:
    """Users `names` (each with its own group) and one more group whose members are `group_members`; yields the
    users by their short name and that group's gid. All are removed at the end."""
    import grp
    import pwd

    tag = uuid.uuid4().hex[:6]
    team = f"rgt{tag}"
    made: list[str] = []
    _run("groupadd", team)
    try:
        for short in names:
            name = f"rg{short[:4]}{tag}"
            extra = ["-G", team] if short in group_members else []
            _run("useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", *extra, name)
            made.append(name)
        users = {}
        for short, name in zip(names, made, strict=True):
            pw = pwd.getpwnam(name)
            users[short] = User(name, pw.pw_uid, pw.pw_gid, tuple(os.getgrouplist(name, pw.pw_gid)))
        yield users, grp.getgrnam(team).gr_gid
    finally:
        for name in made:
            _remove_user(name)
        subprocess.run([_tool("groupdel") or "groupdel", team], capture_output=True, timeout=60)


def _remove_user(name: str) -> None:
    """Remove a throwaway user; `userdel` refuses while the user still runs a process (an agent a failed test
    left behind, a child being reaped), so those are killed first and the removal retried for a while."""
    from tests.support.poll import poll

    def removed() -> bool:
        if pkill := _tool("pkill"):
            subprocess.run([pkill, "-KILL", "-u", name], capture_output=True, timeout=60)
        done = subprocess.run([_tool("userdel") or "userdel", name], capture_output=True, timeout=60)
        return done.returncode in (0, 6)  # 6: no such user (already gone)

    # A process that will not die is left for the machine's owner: it must not fail the test that made the user.
    with contextlib.suppress(AssertionError):
        poll(removed, timeout=15, every=0.2, what=f"user {name} removed")


def ragctl_as(
    user: User, *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`ragctl ARGS` run as `user`, in the directory `env["HOME"]` (one the user may enter)."""
    return subprocess.run(user.command(*args), capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=env["HOME"])  # fmt: skip


def world_dir(prefix: str) -> Path:
    """A fresh directory under the system's temp dir that every user can pass through and list (the caller
    removes it)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


def as_nobody(connect_to: str | bytes) -> int:
    """Fork a child that becomes `nobody` and connects to `connect_to`; return its pid.

    Exit status: 0 connected (then it waits for the peer to close), 13 permission denied, 1 anything else.
    """
    import pwd
    import socket

    nobody = pwd.getpwnam("nobody")
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(connect_to)
            code = 0
            s.recv(1)
    except PermissionError:
        code = 13
    finally:
        os._exit(code)


@contextmanager
def nobody_peer() -> Iterator[tuple[socket.socket, int]]:
    """(the server's end of a connection from a forked `nobody`, that child's pid), on an abstract socket, which
    has no file permissions: only the accepting side's own checks stand. At the end the child has exited, connected."""
    import socket

    name = f"\0ragd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(name)
        srv.listen(1)
        srv.settimeout(10)
        child = as_nobody(name)
        conn, _ = srv.accept()
        with conn:
            yield conn, child
    assert os.waitpid(child, 0)[1] == 0, "the `nobody` child did not connect"


def python_for(user: User, where: Path) -> str:
    """An interpreter `user` may run, seeing this project's packages: the test's own if the user can execute it,
    else a venv at `where` (a directory every user may pass through) over a system Python of the same minor version, whose
    `.pth` adds this environment's site-packages. ragd's worker processes are started by executing it again, so
    importing everything before dropping to the user (as `ragctl` does above) is not enough for the agent."""
    import site
    import sysconfig

    if _runs_as(user, sys.executable):
        return sys.executable
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = next((p for p in (f"/usr/bin/{minor}", f"/usr/local/bin/{minor}") if _runs_as(user, p)), None)
    if system is None:
        pytest.skip(f"needs a {minor} that an ordinary user may run (this one is {sys.executable})")
    subprocess.run([system, "-m", "venv", "--without-pip", str(where)], check=True, timeout=60)
    purelib = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})["purelib"])
    dirs = [*site.getsitepackages()]
    (purelib / "project.pth").write_text("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs))
    return str(where / "bin" / "python")


def _runs_as(user: User, program: str) -> bool:
    """Whether `user` may execute `program` (every directory on its path passable, the file executable)."""
    try:
        proc = subprocess.run([program, "-c", "pass"], user=user.uid, group=user.gid, extra_groups=[],
                              capture_output=True, timeout=60)  # fmt: skip
    except OSError:
        return False
    return proc.returncode == 0
