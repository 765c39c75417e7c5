"""The bridge's connection to the agent (`ragctl mcp`): an MCP session opened over the control socket
(`AgentLink`), and one session's connection, whose thread hands each line the agent sends to the bridge
(`Session`)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from .protocol import Client, LineReader, ProtocolError, socket_path


class AgentLink:
    """Opens MCP sessions on the agent over its control socket."""

    def __init__(self, socket: Path | None, connect_timeout: float | None) -> None:
        self.socket = (
            socket  # None: found again at each attempt (the agent may start, or move, after the bridge)
        )
        self.connect_timeout = connect_timeout

    def open(self) -> tuple[socket.socket, bytes]:
        """A connection turned into an MCP session, and what the agent already sent on it; Unreachable,
        RemoteError or ProtocolError otherwise."""
        client = Client(self.socket or socket_path(client=True), self.connect_timeout)
        try:
            client.call("mcp_session", {})
        except BaseException:
            client.close()
            raise
        sock, leftover = client.detach()
        sock.settimeout(None)
        return sock, leftover


class Session:
    """One `mcp_session` connection: `send` writes to the agent; a thread hands each line the agent sends to
    `on_line`, and calls `on_end` once the agent's side has ended."""

    def __init__(self, sock: socket.socket, leftover: bytes, on_line: Callable[[Session, bytes], None],
                 on_end: Callable[[Session, str], None]) -> None:  # fmt: skip
        self._sock, self._on_line, self._on_end = sock, on_line, on_end
        self._reader = LineReader(sock, leftover)
        self.alive = True
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="mcp-agent", daemon=True)
        self._thread.start()

    def send(self, data: bytes) -> bool:
        with self._send_lock:
            try:
                self._sock.sendall(data if data.endswith(b"\n") else data + b"\n")
                return True
            except OSError:
                return False

    def end_input(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """End the session both ways now (the agent drops whatever it still runs for it)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _read(self) -> None:
        reason = "the agent closed the connection"
        try:
            while (line := self._reader.read_line()) is not None:
                self._on_line(self, line)
        except (OSError, ProtocolError) as err:
            reason = f"receive failed: {getattr(err, 'strerror', None) or err}"
        finally:
            self.alive = False
            with contextlib.suppress(OSError):
                self._sock.close()
            self._on_end(self, reason)
