"""ragctl's socket resolution: explicit settings first, then the user's agent found from HOME and the uid alone.

Real unix sockets bound in temp dirs, real discovery records, explicit environ mappings; /run/user is stood in for
by a temp dir passed as `run_user`, and the temp dir (where a client without XDG_RUNTIME_DIR computes its own
socket, /tmp/ragd-<uid>) by one of the test's: a socket another run left in the machine's /tmp never counts here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ragctl import protocol
from ragctl.protocol import discovery

Bind = Callable[[Path], Path]  # a listening unix socket bound at the path (its directories made)


@pytest.fixture(autouse=True)
def own_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    yield held
    for s in held:
        s.close()


@pytest.fixture
def bind(sockets: list[socket.socket]) -> Bind:
    def bind(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        s.listen()
        sockets.append(s)
        return path

    return bind


def write_record(home: Path, sock: Path, agent_pid: int | None = None, **fields: object) -> Path:
    path = home / ".local/state/ragd/agent-socket"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = json.loads(discovery.record_text(sock, os.getpid() if agent_pid is None else agent_pid))
    path.write_text(json.dumps({**record, **fields}))
    path.chmod(0o600)
    return path


def fallback(own: Path) -> Path:
    """What a client gets when nothing is found: the system service's socket if there is one, else its own."""
    return protocol.SYSTEM_SOCKET if protocol.SYSTEM_SOCKET.exists() else own


def dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(proc.stdout)


def minimal(home: Path) -> dict[str, str]:
    """The environment the MCP SDKs give a server they start (no XDG_*, no RAGD_*)."""
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "USER": "u", "LOGNAME": "u", "SHELL": "/bin/sh"}


def run_user_socket(base: Path) -> Path:
    return base / str(os.getuid()) / "ragd" / "control.sock"


# -- precedence --------------------------------------------------------------------------------------------------
def test_explicit_settings_win_over_everything_found(tmp_path: Path, bind: Bind) -> None:
    home, base = tmp_path / "home", tmp_path / "run-user"
    write_record(home, bind(tmp_path / "hand/ragd.sock"))
    bind(run_user_socket(base))
    env = minimal(home)
    assert protocol.socket_path({**env, "RAGD_SOCKET": "/x/s"}, client=True, run_user=base) == Path("/x/s")
    own = bind(tmp_path / "xdg/ragd/control.sock")
    assert protocol.socket_path({**env, "XDG_RUNTIME_DIR": str(tmp_path / "xdg")}, client=True,
                                run_user=base) == own  # fmt: skip
    rt = bind(tmp_path / "rt/control.sock")
    assert protocol.socket_path({**env, "RAGD_RUNTIME_DIR": str(tmp_path / "rt")}, client=True,
                                run_user=base) == rt  # fmt: skip


def test_the_agent_itself_never_discovers(tmp_path: Path, bind: Bind) -> None:
    home = tmp_path / "home"
    write_record(home, bind(tmp_path / "hand/ragd.sock"))
    env = {**minimal(home), "XDG_RUNTIME_DIR": str(tmp_path / "xdg")}
    assert protocol.socket_path(env, run_user=tmp_path) == tmp_path / "xdg/ragd/control.sock"


# -- (a) the systemd user service ---------------------------------------------------------------------------------
def test_without_xdg_runtime_dir_the_user_service_socket_is_found(tmp_path: Path, bind: Bind) -> None:
    base = tmp_path / "run-user"
    env = minimal(tmp_path / "home")
    own = protocol.runtime_dir(env) / "control.sock"
    assert protocol.socket_path(env, client=True, run_user=base) == fallback(own)
    service = bind(run_user_socket(base))
    assert protocol.socket_path(env, client=True, run_user=base) == service


def test_a_socket_a_killed_agent_left_behind_is_passed_over(tmp_path: Path, bind: Bind) -> None:
    env = minimal(tmp_path / "home")
    own = protocol.runtime_dir(env) / "control.sock"
    bind(own)
    assert protocol.socket_path(env, client=True, run_user=tmp_path / "none") == own  # a live agent: its own
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(own.with_name("left.sock")))
    left.close()  # the file stays, nobody listens: what SIGKILL leaves
    os.replace(own.with_name("left.sock"), own)
    assert own.exists() and not protocol.listening(own)
    assert protocol.socket_path(env, client=True, run_user=tmp_path / "none") == fallback(own)
    service = bind(run_user_socket(tmp_path / "run-user"))
    assert protocol.socket_path(env, client=True, run_user=tmp_path / "run-user") == service


def test_with_xdg_runtime_dir_set_run_user_is_not_looked_at(tmp_path: Path, bind: Bind) -> None:
    base = tmp_path / "run-user"
    bind(run_user_socket(base))
    env = {**minimal(tmp_path / "home"), "XDG_RUNTIME_DIR": str(tmp_path / "xdg")}
    assert protocol.socket_path(env, client=True, run_user=base) == fallback(
        tmp_path / "xdg/ragd/control.sock"
    )


def test_a_user_service_path_that_is_not_a_socket_is_ignored(tmp_path: Path) -> None:
    base = tmp_path / "run-user"
    fake = run_user_socket(base)
    fake.parent.mkdir(parents=True)
    fake.touch()
    env = minimal(tmp_path / "home")
    assert protocol.socket_path(env, client=True, run_user=base) == fallback(
        protocol.runtime_dir(env) / "control.sock"
    )


# -- (b) the discovery record -------------------------------------------------------------------------------------
def test_the_record_of_a_live_agent_is_found(tmp_path: Path, bind: Bind) -> None:
    home = tmp_path / "home"
    sock = bind(tmp_path / "hand/ragd/control.sock")
    write_record(home, sock)
    assert protocol.socket_path(minimal(home), client=True, run_user=tmp_path / "none") == sock
    env = {
        **minimal(home),
        "XDG_RUNTIME_DIR": str(tmp_path / "other"),
    }  # a computed socket that does not exist
    assert protocol.socket_path(env, client=True, run_user=tmp_path / "none") == sock


def test_the_user_service_comes_before_the_record(tmp_path: Path, bind: Bind) -> None:
    home, base = tmp_path / "home", tmp_path / "run-user"
    write_record(home, bind(tmp_path / "hand/ragd.sock"))
    service = bind(run_user_socket(base))
    assert protocol.socket_path(minimal(home), client=True, run_user=base) == service


@pytest.mark.parametrize(
    "spoil",
    [
        "dead pid",
        "other host",
        "group writable",
        "symlink",
        "not json",
        "no socket",
        "relative socket",
        "bool pid",
    ],
)
def test_a_record_that_cannot_be_trusted_is_ignored(tmp_path: Path, bind: Bind, spoil: str) -> None:
    home = tmp_path / "home"
    sock = bind(tmp_path / "hand/ragd.sock")
    fields: dict[str, object] = {
        "other host": {"host": "elsewhere.invalid"},
        "no socket": {"socket": str(tmp_path / "gone.sock")},
        "relative socket": {"socket": "hand/ragd.sock"},
        "bool pid": {"pid": True},
    }.get(spoil, {})
    path = write_record(home, sock, dead_pid() if spoil == "dead pid" else None, **fields)
    if spoil == "group writable":
        path.chmod(0o620)
    elif spoil == "symlink":
        real = tmp_path / "elsewhere.json"
        path.rename(real)
        path.symlink_to(real)
    elif spoil == "not json":
        path.write_text("{not json")
    env = minimal(home)
    own = protocol.runtime_dir(env) / "control.sock"
    assert protocol.socket_path(env, client=True, run_user=tmp_path / "none") == fallback(own)


@pytest.mark.skipif(os.getuid() != 0, reason="giving files to another uid needs root")
def test_files_of_another_user_are_ignored(tmp_path: Path, bind: Bind) -> None:
    home, base = tmp_path / "home", tmp_path / "run-user"
    sock = bind(tmp_path / "hand/ragd.sock")
    record = write_record(home, sock)
    os.chown(record, 4242, -1)
    env = minimal(home)
    own = protocol.runtime_dir(env) / "control.sock"
    assert protocol.socket_path(env, client=True, run_user=base) == fallback(own)
    os.chown(record, 0, -1)
    os.chown(sock, 4242, -1)  # the record is ours, the socket it names is not
    service = bind(run_user_socket(base))
    os.chown(service, 4242, -1)
    assert protocol.socket_path(env, client=True, run_user=base) == fallback(own)


def test_without_home_the_password_database_gives_it(tmp_path: Path) -> None:
    import pwd

    assert (
        discovery.record_path({}) == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".local/state/ragd/agent-socket"
    )
    assert discovery.record_path({"HOME": str(tmp_path)}) == tmp_path / ".local/state/ragd/agent-socket"


def test_a_zombie_is_not_alive() -> None:
    """A process that exited and was not reaped yet (an orphan under a PID 1 that does not reap) is gone: its
    temp directories and records may be removed."""
    from ragctl.protocol.discovery import pid_alive
    from tests.support.poll import poll

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert pid_alive(child.pid)
    finally:
        child.kill()

    def zombie() -> bool:
        return Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"

    poll(
        zombie, timeout=10, what="the child to be a zombie"
    )  # killed, not reaped: Popen reaps only in wait()
    assert not pid_alive(child.pid)
    child.wait()
    assert not pid_alive(child.pid)
