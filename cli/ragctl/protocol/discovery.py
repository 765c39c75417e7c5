"""Finding the user's agent when the client's environment does not say where its socket is (stdlib only).

AI tools start `ragctl mcp` with a minimal environment (the MCP SDKs pass HOME, LOGNAME, PATH, SHELL, TERM and
USER), so the socket path the client computes may not be the agent's. When that socket does not exist, a client
looks, in this order, at:

1. `/run/user/<uid>/ragd/control.sock`, the socket of the systemd user service, when XDG_RUNTIME_DIR is unset
   (a login session sets it to that directory; tests set it, so they never reach a real user's agent);
2. the agent's discovery record, `$HOME/.local/state/ragd/agent-socket`: a small JSON file every agent writes at
   start-up naming its socket, its pid and its host, and removes at a clean shutdown.

The record's place uses HOME and nothing else: not XDG_STATE_HOME (the minimal environment lacks it), not the temp
dir (TMPDIR may differ between the two processes, /tmp is shared with other users who can squat names in it, a
service's PrivateTmp hides it, and tmp cleaners age files out under a long-running agent).

Everything read is checked: the record and the socket must belong to this uid, the record must not be writable by
group or others, its pid must be alive on this host. Anything else is ignored, and the caller falls back.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

APP_DIR = "ragd"  # the agent's directory name under the runtime, data and state directories
SOCKET_NAME = "control.sock"
RUN_USER = Path("/run/user")  # systemd-logind's per-user runtime directories
RECORD = Path(".local", "state", APP_DIR, "agent-socket")  # under HOME
MAX_RECORD = 4096  # bytes


def discover(env: Mapping[str, str], *, run_user: Path = RUN_USER) -> Path | None:
    """The socket of the user's agent found from HOME and the uid alone, or None."""
    uid = os.getuid()
    if not env.get("XDG_RUNTIME_DIR"):
        service = run_user / str(uid) / APP_DIR / SOCKET_NAME
        if own_socket(service, uid):
            return service
    return recorded_socket(record_path(env), uid)


def record_path(env: Mapping[str, str]) -> Path:
    """$HOME/.local/state/ragd/agent-socket (HOME from `env`, else the password database)."""
    home = env.get("HOME")
    if not home:
        import pwd  # only here: HOME is nearly always set

        home = pwd.getpwuid(os.getuid()).pw_dir
    return Path(home) / RECORD


def record_text(socket: Path, pid: int) -> str:
    """The discovery record of an agent listening on `socket`."""
    return json.dumps({"socket": os.fspath(socket), "pid": pid, "host": os.uname().nodename}) + "\n"


def read_record(path: Path, uid: int) -> dict[str, object] | None:
    """The record at `path` when it is a regular file of `uid`, not writable by others, holding a JSON object."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
            return None
        data = os.read(fd, MAX_RECORD)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def recorded_socket(path: Path, uid: int) -> Path | None:
    """The socket the record at `path` names, when its agent runs here and the socket is `uid`'s."""
    record = read_record(path, uid)
    if record is None:
        return None
    sock, pid = record.get("socket"), record.get("pid")
    if (
        not isinstance(sock, str)
        or not os.path.isabs(sock)
        or not isinstance(pid, int)
        or isinstance(pid, bool)
    ):
        return None
    if record.get("host") != os.uname().nodename or not pid_alive(pid):
        return None  # a HOME shared between machines, or an agent that was killed
    return Path(sock) if own_socket(Path(sock), uid) else None


def own_socket(path: Path, uid: int) -> bool:
    """Whether `path` is a unix socket owned by `uid` (no symbolic link followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == uid


def pid_alive(pid: int) -> bool:
    """Whether a process of this user has the id `pid`, and is not a zombie (dead, not yet reaped: an orphan under
    a PID 1 that does not reap, as in some containers)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: the pid was reused
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux), or gone just now: the signal said it was there
    state = status.rpartition(")")[2].split()[:1]
    return state not in (["Z"], ["X"])
