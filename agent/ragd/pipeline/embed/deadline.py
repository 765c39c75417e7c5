"""A total deadline per HTTP request, on top of httpx's per-phase timeouts.

httpx (and httpx2, which newer `openai` releases use) time each phase and each socket read on its own: a server
that trickles its answer a byte a second never trips a 3 s read timeout and holds the caller for as long as it
likes. A `Watchdog` keeps the deadline instead: when it passes, it shuts the request's socket down, so the read
blocked on it returns at once, the request fails and its connection is dropped (never reused).

To know which socket a request uses, a watchdog belongs to one thread's HTTP client, which has one connection
(kept alive between requests) and sends one request at a time: httpcore's `trace` request extension reports
each connection the client opens (`connection.connect_tcp`, then `connection.start_tls` for https), and the
watchdog's request hook installs that trace on every request. A connection opened after the deadline passed
(the first request of a thread, slow to connect) is shut down as soon as it is reported.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

_OPENED = (
    ".connect_tcp.complete",
    ".start_tls.complete",
)  # trace events whose return value is the new stream


class Watchdog:
    """The deadline of one client's request in flight, and the network stream of its one connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: Any = None
        self._timer: threading.Timer | None = None
        self.expired = False  # the deadline of the last request passed (or `expire` cut it)

    def on_request(self, request: Any) -> None:
        """The client's httpx request event hook: report the connections this request opens."""
        request.extensions["trace"] = self._trace

    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Run one request (the body of the `with`) that must end within `seconds`, or be cut off."""
        timer = threading.Timer(seconds, self.expire)
        timer.daemon = True
        with self._lock:
            self.expired = False
            self._timer = timer
        timer.start()
        try:
            yield
        finally:
            with self._lock:
                self._timer = None
            timer.cancel()

    def expire(self) -> None:
        """Cut the request in flight now, if there is one (its deadline passed, or the embedder is closing)."""
        with self._lock:
            if self._timer is None:
                return
            self.expired = True
            self._cut()

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith(_OPENED):
            with self._lock:
                self._stream = info.get("return_value")
                if self.expired and self._timer is not None:
                    self._cut()

    def _cut(self) -> None:
        """Shut the connection's socket down (under the lock). A duplicate descriptor is shut down and closed,
        so the socket object the request thread is using (maybe TLS) is left to fail on its own."""
        sock = self._stream.get_extra_info("socket") if self._stream is not None else None
        if not isinstance(sock, socket.socket) or sock.fileno() < 0:
            return  # no connection yet (it is cut when reported), or it is closed already
        with contextlib.suppress(OSError), socket.fromfd(sock.fileno(), sock.family, sock.type) as dup:
            dup.shutdown(socket.SHUT_RDWR)
