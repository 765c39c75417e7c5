"""A stand-in for the agent's end of the control socket (the other process), for ragctl's unit tests.

Subclasses decide how a request is answered (`answer`); this class binds the unix socket, accepts connections
(a thread each), reads and checks the requests and records them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

from ragctl import protocol


class FakeAgentServer:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            reader = protocol.LineReader(conn)
            while (line := reader.read_line()) is not None:
                rid, verb, args = protocol.check_request(protocol.decode(line))
                self.requests.append((verb, args))
                try:
                    if not self.answer(conn, rid, verb, args):
                        return
                except OSError:  # the client went away mid-answer
                    return

    def answer(self, conn: socket.socket, rid: Any, verb: str, args: dict[str, Any]) -> bool:
        """Send the answer to one request; False closes the connection."""
        raise NotImplementedError

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
