"""systemd service notifications (sd_notify) for `ragd run`; every call is a no-op without NOTIFY_SOCKET.

`READY=1` once the control socket is bound and the index open, `STATUS=` with progress (rate-limited: the latest
text is kept and sent on a later call or tick, never lost), `WATCHDOG=1` from the main loop while it is healthy,
`RELOADING=1` / `READY=1` around a config reload and `STOPPING=1` at shutdown.

The datagrams go out through the `sdnotify` package. Two of its habits are worked around here: it reads
NOTIFY_SOCKET only from `os.environ` at construction (we connect to the address we were given, with the same
`@` → abstract-namespace rule) and it encodes with Latin-1, silently dropping any other text (we hand it UTF-8
bytes spelled as Latin-1 code points, so systemd receives UTF-8). Send errors are swallowed, as sdnotify does by
default, but logged at debug level. A send waits at most SEND_TIMEOUT_S: the main loop sends, and a receiver that
does not read (a datagram queue holds ~10 messages) must never stop it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

import sdnotify

log = logging.getLogger(__name__)

STATUS_MIN_INTERVAL = 0.5  # seconds between two STATUS= datagrams unless forced
STATUS_MAX_CHARS = 1000  # systemd reads at most a few KiB per datagram
SEND_TIMEOUT_S = 1.0  # a receiver's queue is full: the datagram is dropped (logged), not waited for

Clock = Callable[[], float]


class _Sender(sdnotify.SystemdNotifier):
    """sdnotify's notifier, connected to an explicit address instead of `os.environ["NOTIFY_SOCKET"]`."""

    def __init__(self, address: str) -> None:
        self.debug = True  # notify() raises; Notifier._send logs and swallows
        if address.startswith("@"):
            address = "\0" + address[1:]  # abstract namespace, as sdnotify and sd_notify(3) do
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.settimeout(SEND_TIMEOUT_S)
        try:
            self.socket.connect(address)
        except OSError:
            self.socket.close()
            raise


class Notifier:
    """systemd notifications; a no-op without NOTIFY_SOCKET.

    Thread-safe: `status()` may be called from worker threads while the main loop calls `tick()`.
    """

    def __init__(self, environ: Mapping[str, str] | None = None, clock: Clock = time.monotonic) -> None:
        env = os.environ if environ is None else environ
        self._clock = clock
        self._lock = threading.Lock()
        self._sender = _connect(env.get("NOTIFY_SOCKET", ""))
        self.enabled: bool = self._sender is not None
        self.watchdog_interval: float | None = watchdog_interval(env) if self.enabled else None
        self._last_ping = clock()
        self._sent_status: str | None = None
        self._pending_status: str | None = None
        self._status_at = float("-inf")

    def ready(self, status: str = "") -> None:
        """READY=1 with MAINPID= (and STATUS= when given)."""
        self._send_with_status(["READY=1", f"MAINPID={os.getpid()}"], status)

    def status(self, text: str, force: bool = False) -> None:
        """STATUS=text when it changed; at most once per STATUS_MIN_INTERVAL unless forced (then kept for later)."""
        if not self.enabled:
            return
        text = _one_line(text)
        with self._lock:
            if text == self._sent_status:
                self._pending_status = None
                return
            now = self._clock()
            if force or now - self._status_at >= STATUS_MIN_INTERVAL:
                self._send_status_locked(text, now)
            else:
                self._pending_status = text

    def tick(self, healthy: bool | Callable[[], bool] = True) -> None:
        """Call often from the main loop: flushes a held-back STATUS, and pings the watchdog when it is due and the
        agent is `healthy` (a callable is asked only then: outside systemd, or between pings, never)."""
        if not self.enabled:
            return
        with self._lock:
            now = self._clock()
            pending = self._pending_status
            if pending is not None and now - self._status_at >= STATUS_MIN_INTERVAL:
                self._send_status_locked(pending, now)
            interval = self.watchdog_interval
            due = interval is not None and now - self._last_ping >= interval
            if due and (healthy() if callable(healthy) else healthy):
                self._last_ping = now
                self._send(["WATCHDOG=1"])

    def reloading(self) -> None:
        """RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC, which systemd >= 253 requires for Type=notify-reload)."""
        self._send(["RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}"])

    def reloaded(self) -> None:
        self._send(["READY=1"])

    def stopping(self, status: str = "") -> None:
        self._send_with_status(["STOPPING=1"], status)

    # -- internals ---------------------------------------------------------------------------------------------
    def _send_with_status(self, fields: list[str], status: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            if status:
                self._pending_status = None
                self._sent_status = _one_line(status)
                self._status_at = self._clock()
                fields = [*fields, f"STATUS={self._sent_status}"]
            self._send(fields)

    def _send_status_locked(self, text: str, now: float) -> None:
        self._pending_status = None
        self._sent_status = text
        self._status_at = now
        self._send([f"STATUS={text}"])

    def _send(self, fields: list[str]) -> None:
        if self._sender is None:
            return
        data = "\n".join(fields).encode("utf-8", "replace")
        try:
            self._sender.notify(data.decode("latin-1"))  # sdnotify re-encodes as Latin-1: the same bytes
        except OSError as err:
            log.debug("sd_notify %r failed: %s", fields[0], err)


def watchdog_interval(environ: Mapping[str, str]) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None when the watchdog is not ours."""
    raw_usec, raw_pid = environ.get("WATCHDOG_USEC", ""), environ.get("WATCHDOG_PID", "")
    if not raw_usec:
        return None
    try:
        usec = int(raw_usec)
        pid = int(raw_pid) if raw_pid else os.getpid()
    except ValueError:
        log.debug("ignoring malformed WATCHDOG_USEC=%r WATCHDOG_PID=%r", raw_usec, raw_pid)
        return None
    if usec <= 0 or pid != os.getpid():
        return None
    return usec / 2 / 1_000_000


def progress_text(done: int, total: int, failed: int, phase: str) -> str:
    """The STATUS= line: "indexing 120/3400 files, 2 failed", "idle: 3400 files, 2 failed"."""
    files = f"{total} file" if total == 1 else f"{total} files"
    text = f"idle: {files}" if phase == "idle" else f"{phase} {done}/{files}"
    return f"{text}, {failed} failed" if failed else text


def _connect(address: str) -> _Sender | None:
    if not address:
        return None
    try:
        return _Sender(address)
    except OSError as err:
        log.debug("NOTIFY_SOCKET=%r: cannot connect (%s); systemd notifications are off", address, err)
        return None


def _one_line(text: str) -> str:
    """A STATUS= value: newlines would start new fields; systemd caps the datagram size."""
    return " ".join(text.split("\n"))[:STATUS_MAX_CHARS]
