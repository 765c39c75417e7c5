"""The control server: newline-delimited JSON requests on the agent's unix socket (docs/protocol.md).

One thread accepts; each connection gets a thread that reads requests and answers them in order. A handler
returns a result value or raises; this module turns every exception into an error reply exactly once, so that no
exception ever reaches the socket and no request can stop the server. `identify` names the caller of a connection
(or refuses it); the connection's thread acts as that caller (ragd.access) for all its requests.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragctl import protocol as p

from .. import access
from ..errors import RagdError

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 60.0  # a connection that sends no request for this long is closed (a reply being streamed is
# not idle: the limit applies while the server waits for the client's next request, and to each send)
KNOWN_CODES = frozenset({p.BAD_REQUEST, p.UNKNOWN_VERB, p.NOT_FOUND, p.FAILED, p.TIMEOUT, p.UNAVAILABLE,
                         p.FORBIDDEN, p.TOO_LARGE, p.VERSION_MISMATCH})  # fmt: skip


class Stream:
    """What a handler uses to send progress lines before its final reply."""

    def __init__(self, conn: socket.socket, rid: Any) -> None:
        self._conn, self._rid = conn, rid
        self.closed = False

    def send(self, data: Any) -> bool:
        """Send one stream line; False once the client has gone (the handler should then stop)."""
        if self.closed:
            return False
        try:
            self._conn.sendall(p.encode(p.stream_line(self._rid, data)))
        except OSError:
            self.closed = True
        return not self.closed


Handler = Callable[[dict[str, Any], Stream], Any]


@dataclass(frozen=True)
class Takeover:
    """A handler's result that hands the connection over to another protocol (the verb `mcp_session`): the ok
    reply carries `result`, then `serve(conn, leftover)` owns the connection until it returns, and the connection
    is closed. `leftover`: bytes the client sent after the request, already read from the socket."""

    result: Any
    serve: Callable[[socket.socket, bytes], None]


def error_reply(rid: Any, err: BaseException) -> dict[str, Any]:
    if isinstance(err, p.ProtocolError):
        return p.reply_error(rid, err.code, err.message, err.hint)
    if isinstance(err, RagdError):
        code = err.code if err.code in KNOWN_CODES else (p.BAD_REQUEST if err.code == "usage" else p.FAILED)
        return p.reply_error(rid, code, err.message, err.hint)
    return p.reply_error(rid, p.INTERNAL, f"internal error: {type(err).__name__}: {err}",
                         "see the agent's log (journalctl --user -u ragd)")  # fmt: skip


class ControlServer:
    def __init__(
        self,
        sock: socket.socket,
        handlers: Mapping[str, Handler],
        identify: Callable[[socket.socket], access.Caller],
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        self._sock = sock
        self.idle_timeout = idle_timeout
        self._handlers = dict(handlers)
        self._identify = identify  # raises RagdError (forbidden) for a peer that may not connect
        self._closing = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, name="control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._closing.is_set():
                    return
                log.exception("control socket accept failed")
                continue
            threading.Thread(target=self._serve, args=(conn,), name="control-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.add(conn)
        conn.settimeout(self.idle_timeout)
        try:
            try:
                caller = self._identify(conn)
            except RagdError as err:
                log.warning("refused a control connection: %s", err.message)
                conn.sendall(p.encode(error_reply(None, err)))
                return
            access.bind(caller)  # this thread answers this connection only
            self._requests(conn)
        except TimeoutError:
            log.debug("closed a control connection idle for %.0f s", self.idle_timeout)
        except OSError:
            pass  # the client went away
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _requests(self, conn: socket.socket) -> None:
        reader = p.LineReader(conn)
        while not self._closing.is_set():
            try:
                line = reader.read_line()
                if line is None:
                    return
                msg = p.decode(line)
            except p.ProtocolError as err:  # framing broken: answer once, then close
                conn.sendall(p.encode(p.reply_error(None, err.code, err.message, err.hint)))
                return
            reply = self.handle(conn, msg)
            if isinstance(reply, Takeover):
                conn.sendall(p.encode(p.reply_ok(msg.get("id"), reply.result)))
                conn.settimeout(None)  # the new protocol has its own idea of idleness
                reply.serve(conn, reader.take_buffer())
                return
            if reply is not None:
                conn.sendall(p.encode(reply))

    def handle(self, conn: socket.socket, msg: dict[str, Any]) -> dict[str, Any] | Takeover | None:
        rid = msg.get("id")
        try:
            rid, verb, args = p.check_request(msg)
            handler = self._handlers.get(verb)
            if handler is None:
                raise p.ProtocolError(p.UNKNOWN_VERB, f"unknown verb {verb!r}",
                                      "known verbs: " + ", ".join(sorted(self._handlers)))  # fmt: skip
            stream = Stream(conn, rid)
            result = handler(args, stream)
            if stream.closed:
                return None
            return result if isinstance(result, Takeover) else p.reply_ok(rid, result)
        except (p.ProtocolError, RagdError) as err:
            return error_reply(rid, err)
        except Exception as err:  # the server loop's boundary: log it, answer, go on
            log.exception("internal error in control request %r", msg.get("verb"))
            return error_reply(rid, err)

    def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        self._thread.join(2.0)
