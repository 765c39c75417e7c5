"""One agent per data dir; the control socket's place on disk.

- `InstanceLock`: flock(2) on `<data_dir>/agent.lock`, the holder's pid written inside. The kernel drops the lock
  when its holder dies, so a lock file left by a killed agent is simply locked again. The file is never unlinked
  (unlinking a flock file lets two processes lock two different inodes of the same name).
- `bind_control_socket`: a private directory (0700), a stale socket from a killed agent removed, a live one
  refused, the socket created 0600 from the start.
- `write_discovery_record` / `remove_discovery_record`: `$HOME/.local/state/ragd/agent-socket` names the socket
  and the pid, so that a client started with a minimal environment (an AI tool's `ragctl mcp`) finds this agent
  (ragctl/protocol/discovery.py reads it). Written atomically, 0600 in a 0700 directory; removed only while it names us.
- `bind_control_socket(path, admission)`: the modes of the socket and its directory follow `admission.py` (who else
  may connect: docs/access.md); who is on the other end of a connection: `peer.py` (SO_PEERCRED), which
  `admission.py` uses too.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ragctl.protocol import discovery
from ragd.atomic import atomic_write
from ragd.errors import RagdError, StorageError

from .peer import peer_credentials

if TYPE_CHECKING:
    from .admission import Admission

log = logging.getLogger(__name__)

LOCK_NAME = "agent.lock"
SUN_PATH_MAX = 107  # bytes in a socket path: sun_path[108] less the terminating NUL
LISTEN_BACKLOG = 1024  # connections waiting to be accepted (the kernel caps it at net.core.somaxconn)
PROBE_TIMEOUT = 1.0  # seconds to wait for an existing socket to accept
_SOCKET_HINT = "set RAGD_SOCKET to a socket path of your own, e.g. $XDG_RUNTIME_DIR/ragd-2.sock"


class AlreadyRunning(RagdError):
    """Another agent holds this data dir (or this socket)."""

    code = "running"

    def __init__(self, pid: int | None, hint: str = "", *, message: str = "") -> None:
        super().__init__(message or f"already running ({_who(pid)})", hint)
        self.pid = pid


class SocketInUse(AlreadyRunning):
    """A live agent answers on the control socket although we hold our data dir: it serves another data dir, or
    this one, deleted or replaced while it ran (its lock went with it; it makes the directory again itself)."""

    def __init__(self, path: Path, pid: int | None, lock: Path | None = None) -> None:
        if pid and lock is not None and holds_deleted(pid, lock):
            data_dir = lock.parent
            super().__init__(
                pid,
                f"{data_dir} was deleted or replaced while that agent ran; it makes it again and rebuilds it "
                "from the sidecars by itself: talk to it with `ragctl`, or stop it first",
                message=f"another agent ({_who(pid)}) already serves the data dir {data_dir} (on {path})",
            )
        else:
            super().__init__(
                pid,
                f"that agent serves another data dir; {_SOCKET_HINT}",
                message=f"another agent ({_who(pid)}) already listens on {path}",
            )
        self.path = path


def holds_deleted(pid: int, path: Path) -> bool:
    """Whether process `pid` holds `path` open although the file was deleted (or replaced) since: the instance
    lock of a data dir removed while its agent ran (Linux: /proc/PID/fd; False when that cannot be read)."""
    gone = f"{os.path.abspath(path)} (deleted)"
    fds = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(fds / name) == gone:
                return True
        except OSError:
            continue
    return False


class ControlSocketError(RagdError):
    """The control socket cannot be set up safely where it was asked for."""

    code = "socket"


# -- the instance lock ------------------------------------------------------------------------------------------
class InstanceLock:
    """flock on <data_dir>/agent.lock (pid written inside).

    `acquire()` raises AlreadyRunning(pid) when a live process holds it. A lock file left by a killed agent is
    simply re-locked (flock dies with the process). The descriptor is close-on-exec, so programs the agent starts
    do not inherit the lock; a *forked* child that outlives the agent does keep it.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = self._open(os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            hint = f"it holds {self.path}; stop it first, or give this agent another data dir"
            raise AlreadyRunning(pid, hint) from None
        except OSError as err:
            os.close(fd)
            raise StorageError(
                f"cannot lock {self.path}: {err.strerror}", "the data dir must be on a local file system"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        log.debug("instance lock %s taken (pid %d)", self.path, os.getpid())

    def renew(self) -> bool:
        """Lock the file now at our path if it is no longer the one we hold (deleted or replaced with the data dir
        while we ran), so that a second agent is refused again; the old one is let go. False when another process
        holds the new one already."""
        if self._fd is None:
            return False
        held = os.fstat(self._fd)
        try:
            now = os.stat(self.path)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return True
        except FileNotFoundError:
            pass
        fd = self._open(os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.close(self._fd)
        self._fd = fd
        log.debug("instance lock %s taken again (pid %d)", self.path, os.getpid())
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)  # no pid in the file once nobody holds it
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def pid_of_holder(self) -> int | None:
        """The pid of the process holding the lock (ours included), or None when it is free."""
        if self._fd is not None:
            return os.getpid()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(
                fd, fcntl.LOCK_SH | fcntl.LOCK_NB
            )  # a brief shared lock: held only if nobody else has it
        except BlockingIOError:
            return _read_pid(fd)
        else:
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _open(self, flags: int) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, flags | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise StorageError(
                f"cannot open the lock file {self.path}: {err.strerror}", "check the data dir's permissions"
            ) from None


def _read_pid(fd: int, wait: float = 0.5) -> int | None:
    """The pid in the lock file; a holder that has just locked may not have written it yet, so wait a little."""
    deadline = time.monotonic() + wait
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _who(pid: int | None) -> str:
    return f"pid {pid}" if pid else "pid unknown"


# -- the control socket -----------------------------------------------------------------------------------------
def bind_control_socket(
    path: Path, admission: Admission | None = None, lock: Path | None = None
) -> socket.socket:
    """A listening unix stream socket at `path`: mode 0600 in a 0700 directory (others: see `Admission`); a stale
    socket file replaced.

    Take the InstanceLock (at `lock`) first: a socket that still answers then belongs to an agent of another data
    dir, or of this one deleted while it ran (SocketInUse says which). Sets the process umask for a moment: call it before starting threads that create files.
    """
    path = Path(os.path.abspath(path))
    _check_length(path)
    _prepare_dir(path.parent, path.name, admission.dir_mode if admission is not None else 0o700)
    _remove_stale(path, lock)
    sock = _bind(path)
    if admission is not None:
        admission.open_socket(path)
    return sock


def _check_length(path: Path) -> None:
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ControlSocketError(
            f"the control socket path {path} is {size} bytes long; a unix socket path may have at most {SUN_PATH_MAX}",
            f"set RAGD_SOCKET (or RAGD_RUNTIME_DIR) to a shorter path, e.g. /run/user/{os.getuid()}/ragd.sock",
        )


def _prepare_dir(d: Path, sock_name: str, want: int = 0o700) -> None:
    """Create `d` with mode `want`; accept an existing one only when it is ours (setting its mode if it is there
    for the socket alone)."""
    try:
        d.mkdir(mode=want, parents=True)
        os.chmod(d, want)  # mkdir's mode is filtered by the umask
        return
    except FileExistsError:
        pass
    except OSError as err:
        raise ControlSocketError(
            f"cannot create the socket directory {d}: {err.strerror}", _SOCKET_HINT
        ) from None
    link, st = os.lstat(d), os.stat(d)
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise ControlSocketError(f"{d} should hold the control socket but is not a directory", _SOCKET_HINT)
    for owner in (link.st_uid, st.st_uid):
        if owner not in (me, 0):
            raise ControlSocketError(
                f"the socket directory {d} belongs to uid {owner}, not to you (uid {me})",
                f"another user could intercept the socket: remove {d}, or {_SOCKET_HINT}",
            )
    if st.st_uid != me and st.st_mode & 0o022:
        raise ControlSocketError(f"the socket directory {d} is writable by other users", _SOCKET_HINT)
    if st.st_uid == me and st.st_mode & 0o077 != want & 0o077:
        _adjust(d, stat.S_IMODE(st.st_mode), want, sock_name)


def _adjust(d: Path, mode: int, want: int, sock_name: str) -> None:
    """Give our directory the mode `want` if it is there only for the socket; never chmod a directory with other
    files."""
    if not set(os.listdir(d)) - {sock_name}:
        os.chmod(d, want)
        log.info("socket directory %s: mode %o set to %o", d, mode, want)
    elif mode & 0o022:
        raise ControlSocketError(
            f"the socket directory {d} is writable by others (mode {mode:o}) and holds other files",
            f"make it private (chmod {want:o} {d}), or {_SOCKET_HINT}",
        )
    else:
        log.warning("socket directory %s has mode %o, not %o", d, mode, want)


def _remove_stale(path: Path, lock: Path | None = None) -> None:
    """Unlink a socket file nobody answers on; refuse a live one or a file that is not a socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlSocketError(f"{path} exists and is not a socket", f"remove it, or {_SOCKET_HINT}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            log.info("removing the stale control socket %s (nobody answers)", path)
            path.unlink(missing_ok=True)
            return
        except FileNotFoundError:
            return
        except (BlockingIOError, TimeoutError):  # a full backlog: alive, but too busy to accept
            raise SocketInUse(path, None) from None
        except OSError as err:
            raise ControlSocketError(
                f"cannot check the existing socket {path}: {err.strerror}", _SOCKET_HINT
            ) from None
        raise SocketInUse(path, peer_credentials(probe)[0], lock)


def _bind(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket file is 0600 from its creation
    try:
        sock.bind(str(path))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:  # another agent bound it between our probe and now
            raise SocketInUse(path, None) from None
        raise ControlSocketError(
            f"cannot bind the control socket {path}: {err.strerror}", _SOCKET_HINT
        ) from None
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(LISTEN_BACKLOG)
    return sock


# -- the discovery record ---------------------------------------------------------------------------------------
def write_discovery_record(sock: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """Name `sock` and our pid in the discovery record (atomically); its path, or None (logged) when it cannot be.

    A convenience for clients that lack our runtime directory: failing to write it never stops the agent."""
    path = discovery.record_path(os.environ if environ is None else environ)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(path.parent.stat().st_mode) & 0o077:
            os.chmod(path.parent, 0o700)
        atomic_write(
            path, discovery.record_text(Path(os.path.abspath(sock)), os.getpid()).encode(), mode=0o600
        )
    except OSError as err:
        log.info("cannot write the discovery record %s (%s): clients without the agent's runtime directory "
                 "in their environment will not find it; set RAGD_SOCKET for them", path, err.strerror or err)  # fmt: skip
        return None
    return path


def remove_discovery_record(path: Path, sock: Path) -> None:
    """Remove the record at `path` if it still names `sock` and this process (another agent may have replaced it)."""
    record = discovery.read_record(path, os.getuid())
    if record is None or record.get("pid") != os.getpid():
        return
    if record.get("socket") != os.path.abspath(sock):
        return
    try:
        path.unlink()
    except OSError as err:
        log.warning("cannot remove the discovery record %s: %s", path, err.strerror or err)
