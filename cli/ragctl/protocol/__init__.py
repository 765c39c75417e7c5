"""The control protocol between `ragd` and `ragctl` (standard library only; docs/protocol.md is the spec).

Newline-delimited JSON over a unix stream socket. A client sends one request per line:

    {"v": 1, "id": 7, "verb": "search", "args": {"query": "...", "top_k": 5}}

and the agent answers each with zero or more stream lines, then one final reply with the same id:

    {"v": 1, "id": 7, "stream": {...}}                                  (progress of a long operation)
    {"v": 1, "id": 7, "ok": true, "result": {...}}
    {"v": 1, "id": 7, "ok": false, "error": {"code": "...", "message": "...", "hint": "..."}}

This package is all the agent takes from `ragctl`: what both sides of the socket, and both command lines, must
agree on. Beside the wire (this module): `discovery` (where a running agent is found: its record and socket),
`search_flags` (the search flags of `ragctl search` and `ragd search`, and the request they make), `explain` and
`answer` (a search's answer as text, over `text`'s small pieces). Standard library only, as the rest of `ragctl`.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import discovery
from .discovery import APP_DIR, SOCKET_NAME

VERSION = 1
MAX_MESSAGE = 16 * 1024 * 1024  # bytes in one line, either way

# error codes (the "code" of an error reply)
BAD_REQUEST = "bad_request"  # malformed JSON, missing or mistyped fields
UNKNOWN_VERB = "unknown_verb"
VERSION_MISMATCH = "version"
TOO_LARGE = "too_large"
FORBIDDEN = "forbidden"  # peer uid differs from the agent's
NOT_FOUND = "not_found"  # a path outside the roots, an unknown root
FAILED = "failed"  # the operation ran and failed (details in message)
TIMEOUT = "timeout"
UNAVAILABLE = "unavailable"  # e.g. the index is being rebuilt; try again
INTERNAL = "internal"
USAGE_CODES = frozenset({BAD_REQUEST, UNKNOWN_VERB, VERSION_MISMATCH, TOO_LARGE})

TOP_K = 5  # results of a search when none is asked for, on every surface (verb, MCP, web page, both command lines)

# The names on the wire of a file's states (`status`'s counts, a file's `state`) and of the kinds of change
# (`changes`): the values of the agent's FileState and ChangeKind (ragd/vocabulary.py, in the same order; a test
# holds the two together).
EMBEDDED, SKIPPED, FAILED_STATE = "EMBEDDED", "SKIPPED", "FAILED"
SETTLED = (EMBEDDED, SKIPPED, FAILED_STATE)  # what a file's job ends with, in this order in `ragctl status`
FILE_STATES = ("INITIAL", "CHUNKING", "CHUNKED", "EMBEDDING", *SETTLED, "UNCHANGED", "TOUCHED", "RELABELED",
               "ABANDONED", "NEW", "CHANGED", "STALE", "PENDING", "DELETED", "TRACKED")  # fmt: skip
CHANGE_KINDS = (
    "created",
    "changed",
    "moved",
    "deleted",
    "restored",
    "failed",
    "recovered",
    "skipped",
    "relabeled",
)


class ProtocolError(Exception):
    """A message that breaks the protocol (either side)."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


DENIED = "permission denied: this agent does not serve your user"  # the socket's own mode kept us out
DENIED_HINT = "its [access] settings say who may use it; ask its administrator (docs/access.md)"


class Unreachable(Exception):
    """No agent answers on the socket."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"no agent is listening on {path} ({reason})")
        self.path, self.reason = path, reason


class RemoteError(Exception):
    """The agent answered with an error reply."""

    def __init__(self, code: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint

    def __str__(self) -> str:
        return self.message


SYSTEM_SOCKET = Path("/run/ragd") / SOCKET_NAME  # the system service's (RuntimeDirectory=ragd)


def socket_path(
    environ: Mapping[str, str] | None = None, *, client: bool = False, run_user: Path | None = None
) -> Path:
    """$RAGD_SOCKET, else <runtime dir>/control.sock (the runtime dir as the agent resolves it).

    For a client, when no agent listens on that socket (it does not exist, or a killed agent left it behind): the
    user's agent found from HOME and the uid (discovery.py; `run_user` stands for /run/user), else the system
    service's socket when it exists, else that socket."""
    env = os.environ if environ is None else environ
    if env.get("RAGD_SOCKET"):
        return Path(env["RAGD_SOCKET"]).expanduser()
    own = runtime_dir(env) / SOCKET_NAME
    if not client or listening(own):
        return own
    found = discovery.discover(env, run_user=run_user or discovery.RUN_USER)
    if found is not None:
        return found
    return SYSTEM_SOCKET if os.path.exists(SYSTEM_SOCKET) else own


def listening(path: Path) -> bool:
    """Whether something accepts connections on the unix socket at `path` (a full backlog counts as listening)."""
    if not os.path.exists(path):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.setblocking(False)
        return probe.connect_ex(os.fspath(path)) in (0, errno.EAGAIN, errno.EINPROGRESS)
    except OSError:
        return False  # a name too long for a socket address: no agent can listen on it either
    finally:
        probe.close()


def runtime_dir(env: Mapping[str, str]) -> Path:
    """$RAGD_RUNTIME_DIR, else $XDG_RUNTIME_DIR/ragd, else a per-user directory in the temp dir."""
    if env.get("RAGD_RUNTIME_DIR"):
        return Path(env["RAGD_RUNTIME_DIR"]).expanduser()
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / APP_DIR
    import tempfile  # only here: it costs start-up time that `ragctl status` should not pay

    return Path(tempfile.gettempdir()) / f"{APP_DIR}-{os.getuid()}"


# -- encoding ---------------------------------------------------------------------------------------------------
def encode(message: Mapping[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(TOO_LARGE, f"message of {len(data)} bytes exceeds the limit of {MAX_MESSAGE}")
    return data


def decode(line: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError) as err:
        raise ProtocolError(BAD_REQUEST, f"not a JSON line: {err}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(BAD_REQUEST, "a message must be a JSON object")
    return obj


def request(rid: int, verb: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"v": VERSION, "id": rid, "verb": verb, "args": dict(args or {})}


def reply_ok(rid: Any, result: Any) -> dict[str, Any]:
    return {"v": VERSION, "id": rid, "ok": True, "result": result}


def reply_error(rid: Any, code: str, message: str, hint: str = "") -> dict[str, Any]:
    return {"v": VERSION, "id": rid, "ok": False, "error": {"code": code, "message": message, "hint": hint}}


def stream_line(rid: Any, data: Any) -> dict[str, Any]:
    return {"v": VERSION, "id": rid, "stream": data}


def check_request(msg: Mapping[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    """(id, verb, args) of a valid request; ProtocolError otherwise."""
    rid = msg.get("id")
    if msg.get("v") != VERSION:
        raise ProtocolError(
            VERSION_MISMATCH,
            f"protocol version {msg.get('v')!r} is not supported (this agent speaks {VERSION})",
            "use the ragctl that came with this agent",
        )
    verb, args = msg.get("verb"), msg.get("args", {})
    if not isinstance(verb, str) or not verb:
        raise ProtocolError(BAD_REQUEST, "a request needs a 'verb' string")
    if not isinstance(args, dict):
        raise ProtocolError(BAD_REQUEST, "'args' must be an object")
    if not isinstance(rid, (int, str)) or isinstance(rid, bool):
        raise ProtocolError(BAD_REQUEST, "a request needs an 'id' (integer or string)")
    return rid, verb, args


class LineReader:
    """Reads newline-terminated messages from a socket, refusing lines longer than MAX_MESSAGE."""

    def __init__(self, sock: socket.socket, received: bytes = b"") -> None:
        self._sock = sock
        self._buf = bytearray(received)  # `received`: bytes already read from `sock`

    def read_line(self) -> bytes | None:
        """The next line (without its newline), or None at end of stream."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            if len(self._buf) > MAX_MESSAGE:
                raise ProtocolError(TOO_LARGE, f"message exceeds the limit of {MAX_MESSAGE} bytes")
            chunk = self._sock.recv(65536)
            if not chunk:
                if self._buf:
                    raise ProtocolError(BAD_REQUEST, "connection closed in the middle of a message")
                return None
            self._buf += chunk

    def take_buffer(self) -> bytes:
        """What was received past the last line returned (the reader is not to be used afterwards)."""
        data, self._buf = bytes(self._buf), bytearray()
        return data


# -- client -----------------------------------------------------------------------------------------------------
class Client:
    """One connection to the agent. Requests are answered in order."""

    def __init__(self, path: Path | None = None, timeout: float | None = 30.0) -> None:
        self.path = path or socket_path(client=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(os.fspath(self.path))
        except FileNotFoundError:
            self._sock.close()
            raise Unreachable(self.path, "no socket") from None
        except ConnectionRefusedError:
            self._sock.close()
            raise Unreachable(self.path, "connection refused: the agent is not running") from None
        except PermissionError:
            self._sock.close()
            raise Unreachable(self.path, DENIED) from None
        except OSError as err:
            self._sock.close()
            raise Unreachable(self.path, err.strerror or str(err)) from None
        self._reader = LineReader(self._sock)
        self._next_id = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def detach(self) -> tuple[socket.socket, bytes]:
        """The connection and the bytes received past the last reply, for another protocol (`mcp_session`);
        this client is not to be used afterwards."""
        return self._sock, self._reader.take_buffer()

    def call(
        self,
        verb: str,
        args: Mapping[str, Any] | None = None,
        on_stream: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send a request; feed stream lines to `on_stream`; return the result or raise RemoteError."""
        final: dict[str, Any] | None = None
        for msg in self.stream(verb, args):
            if "stream" in msg:
                if on_stream is not None:
                    on_stream(msg["stream"])
            else:
                final = msg
        assert final is not None
        if final.get("ok"):
            return final.get("result")
        err = final.get("error") or {}
        raise RemoteError(
            str(err.get("code", INTERNAL)), str(err.get("message", "")), str(err.get("hint", ""))
        )

    def stream(self, verb: str, args: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Send a request and yield every message of its answer, the final reply last."""
        self._next_id += 1
        rid = self._next_id
        try:
            self._sock.sendall(encode(request(rid, verb, args)))
        except OSError as err:
            raise Unreachable(self.path, f"send failed: {err.strerror or err}") from None
        while True:
            try:
                line = self._reader.read_line()
            except TimeoutError:
                raise Unreachable(self.path, "the agent did not answer in time") from None
            except OSError as err:
                raise Unreachable(self.path, f"receive failed: {err.strerror or err}") from None
            if line is None:
                raise Unreachable(self.path, "the agent closed the connection")
            msg = decode(line)
            if msg.get("id") != rid:
                raise ProtocolError(BAD_REQUEST, f"reply for request {msg.get('id')!r}, expected {rid}")
            yield msg
            if "stream" not in msg:
                return
