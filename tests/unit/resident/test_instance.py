"""Instance lock, control socket set-up and peer checks, with real processes and real sockets."""

from __future__ import annotations

import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragctl.protocol import discovery
from ragd.resident.instance import (
    SUN_PATH_MAX,
    AlreadyRunning,
    ControlSocketError,
    InstanceLock,
    SocketInUse,
    bind_control_socket,
    remove_discovery_record,
    write_discovery_record,
)
from ragd.resident.peer import peer_allowed, peer_credentials, uid_allowed
from tests.support.users import as_nobody, nobody_peer

HOLDER = """
import sys
from pathlib import Path
from ragd.resident.instance import InstanceLock
InstanceLock(Path(sys.argv[1])).acquire()
print("locked", flush=True)
sys.stdin.read()
"""
CLIENT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
print("connected", flush=True)
sys.stdin.read()
"""
is_root = os.geteuid() == 0
needs_root = pytest.mark.skipif(not is_root, reason="needs root to act as another uid")


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the instance lock of tmp_path."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "locked\n"
    yield proc
    proc.kill()
    proc.wait()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- instance lock ----------------------------------------------------------------------------------------------
def test_lock_acquire_writes_pid_and_release_frees(tmp_path: Path) -> None:
    lock = InstanceLock(tmp_path / "data")
    assert lock.pid_of_holder() is None
    lock.acquire()
    assert (tmp_path / "data" / "agent.lock").read_text() == f"{os.getpid()}\n"
    assert lock.pid_of_holder() == os.getpid()
    assert InstanceLock(tmp_path / "data").pid_of_holder() == os.getpid()
    with pytest.raises(
        AlreadyRunning
    ):  # flock is per open file: a second lock in this process is refused too
        InstanceLock(tmp_path / "data").acquire()
    lock.release()
    assert InstanceLock(tmp_path / "data").pid_of_holder() is None
    with InstanceLock(tmp_path / "data") as again:
        assert again.pid_of_holder() == os.getpid()


def test_second_agent_is_refused_with_the_holders_pid(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    lock = InstanceLock(tmp_path)
    with pytest.raises(AlreadyRunning) as caught:
        lock.acquire()
    err = caught.value
    assert err.pid == holder.pid
    assert err.code == "running"
    assert err.message == f"already running (pid {holder.pid})"
    assert str(tmp_path / "agent.lock") in err.hint
    assert lock.pid_of_holder() == holder.pid


def test_lock_of_a_killed_agent_is_recovered(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (tmp_path / "agent.lock").read_text() == f"{holder.pid}\n"  # left behind, naming a dead pid
    lock = InstanceLock(tmp_path)
    assert lock.pid_of_holder() is None
    lock.acquire()
    assert (tmp_path / "agent.lock").read_text() == f"{os.getpid()}\n"
    lock.release()


# -- control socket ---------------------------------------------------------------------------------------------
def test_socket_is_0600_in_a_0700_dir(tmp_path: Path) -> None:
    path = tmp_path / "run" / "ragd" / "control.sock"
    umask = os.umask(0o022)
    try:
        with bind_control_socket(path) as srv:
            assert os.umask(0o022) == 0o022  # restored
            assert stat.S_ISSOCK(os.lstat(path).st_mode)
            assert mode(path) == 0o600
            assert mode(path.parent) == 0o700
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(str(path))
                conn, _ = srv.accept()
                conn.close()
    finally:
        os.umask(umask)


def test_existing_private_dir_of_ours_is_tightened(tmp_path: Path) -> None:
    d = tmp_path / "ragd"
    d.mkdir()
    d.chmod(0o755)
    bind_control_socket(d / "control.sock").close()
    assert mode(d) == 0o700


def test_shared_dir_of_ours_is_not_chmodded(tmp_path: Path) -> None:
    d = tmp_path / "home"
    d.mkdir()
    (d / "notes.txt").write_text("x")
    d.chmod(0o755)
    bind_control_socket(d / "ragd.sock").close()
    assert mode(d) == 0o755  # warned, left alone; the socket itself is private
    assert mode(d / "ragd.sock") == 0o600
    d.chmod(0o777)
    with pytest.raises(ControlSocketError, match="writable by others"):
        bind_control_socket(d / "ragd2.sock")


@needs_root
def test_dir_of_another_uid_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "ragd"
    d.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chown(d, nobody, -1)
    with pytest.raises(ControlSocketError, match=f"belongs to uid {nobody}") as caught:
        bind_control_socket(d / "control.sock")
    assert "RAGD_SOCKET" in caught.value.hint
    assert list(d.iterdir()) == []


def test_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # what a killed agent leaves: the file, and nobody listening
    path.chmod(0o644)
    with bind_control_socket(path) as srv:  # binding over the old file would fail with EADDRINUSE
        assert mode(path) == 0o600
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))
            srv.accept()[0].close()


def test_live_socket_is_refused_with_its_pid(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    with bind_control_socket(path), pytest.raises(SocketInUse) as caught:
        bind_control_socket(path)
    err = caught.value
    assert isinstance(err, AlreadyRunning)
    assert err.code == "running"
    assert err.pid == os.getpid()
    assert str(path) in err.message
    assert "RAGD_SOCKET" in err.hint


def test_a_file_that_is_not_a_socket_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    path.write_text("mine")
    with pytest.raises(ControlSocketError, match="not a socket"):
        bind_control_socket(path)
    assert path.read_text() == "mine"


def test_path_length_limit(tmp_path: Path) -> None:
    base = len(os.fsencode(tmp_path)) + 1
    fits = tmp_path / ("s" * (SUN_PATH_MAX - base))
    assert len(os.fsencode(fits)) == SUN_PATH_MAX
    bind_control_socket(fits).close()
    too_long = tmp_path / "sub" / ("s" * (SUN_PATH_MAX - base))
    with pytest.raises(ControlSocketError, match="at most 107") as caught:
        bind_control_socket(too_long)
    assert "RAGD_SOCKET" in caught.value.hint
    assert not too_long.parent.exists()


# -- peers ------------------------------------------------------------------------------------------------------
def test_peer_credentials_of_a_socketpair() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert peer_credentials(a) == (os.getpid(), os.getuid(), os.getgid())
        assert peer_allowed(a)
        assert peer_allowed(a, own_uid=os.geteuid())
        assert peer_allowed(a, own_uid=os.geteuid() + 4242) == is_root  # root peers are always allowed


def test_peer_credentials_of_another_process(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    with bind_control_socket(path) as srv:
        srv.settimeout(10)
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            conn, _ = srv.accept()
            with conn:
                assert peer_credentials(conn) == (proc.pid, os.getuid(), os.getgid())
                assert peer_allowed(conn)
        finally:
            proc.kill()
            proc.wait()


def test_uid_decision() -> None:
    assert uid_allowed(1000, own_uid=1000)
    assert not uid_allowed(1001, own_uid=1000)
    assert not uid_allowed(65534, own_uid=1000)
    assert uid_allowed(0, own_uid=1000)
    assert uid_allowed(os.geteuid())


def test_peer_allowed_is_false_when_credentials_cannot_be_read() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        assert not peer_allowed(tcp)


@needs_root
def test_a_peer_of_another_uid_is_refused() -> None:
    # An abstract socket has no file permissions, so `nobody` reaches accept() and only the peer check stands.
    with nobody_peer() as (conn, child):
        pid, uid, _gid = peer_credentials(conn)
        assert (pid, uid) == (child, pwd.getpwnam("nobody").pw_uid)
        assert not peer_allowed(conn)
        assert peer_allowed(conn, own_uid=uid)


@needs_root
def test_the_socket_file_itself_keeps_another_uid_out(tmp_path: Path) -> None:
    path = tmp_path / "ragd" / "control.sock"
    with bind_control_socket(path):
        tmp_path.chmod(0o755)  # let `nobody` reach the 0700 directory's door
        child = as_nobody(str(path))
        assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 13


# -- the discovery record ---------------------------------------------------------------------------------------
def test_the_discovery_record_names_the_socket_privately(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".local/state/ragd").mkdir(parents=True, mode=0o755)
    os.chmod(home / ".local/state/ragd", 0o755)
    sock_path = tmp_path / "run" / "ragd" / "control.sock"
    with bind_control_socket(sock_path):
        path = write_discovery_record(sock_path, {"HOME": str(home)})
        assert path == home / ".local/state/ragd/agent-socket"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        record = json.loads(path.read_text())
        assert record == {"socket": str(sock_path), "pid": os.getpid(), "host": os.uname().nodename}
        assert sorted(p.name for p in path.parent.iterdir()) == ["agent-socket"]  # no temp file left
        assert discovery.recorded_socket(path, os.getuid()) == sock_path


def test_the_record_is_removed_only_while_it_names_this_agent(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    sock_path = tmp_path / "a.sock"
    path = write_discovery_record(sock_path, env)
    assert path is not None
    path.write_text(discovery.record_text(tmp_path / "b.sock", os.getpid() + 1))  # another agent took it over
    remove_discovery_record(path, sock_path)
    assert path.exists()
    write_discovery_record(tmp_path / "b.sock", env)  # ours, for another socket
    remove_discovery_record(path, sock_path)
    assert path.exists()
    write_discovery_record(sock_path, env)
    remove_discovery_record(path, sock_path)
    assert not path.exists()
    remove_discovery_record(path, sock_path)  # already gone: nothing to do


def test_a_record_that_cannot_be_written_does_not_stop_the_agent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("HOME is a file here")
    assert write_discovery_record(tmp_path / "a.sock", {"HOME": str(home)}) is None
