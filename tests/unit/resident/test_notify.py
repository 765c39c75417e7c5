"""sd_notify through a real AF_UNIX datagram socket standing in for systemd's NOTIFY_SOCKET."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.resident.notify import Notifier, progress_text, watchdog_interval


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Systemd:
    """The receiving end of NOTIFY_SOCKET: datagrams parsed into dicts of their KEY=VALUE fields."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock, self.address = sock, address
        sock.setblocking(False)

    def messages(self) -> list[dict[str, str]]:
        """Every datagram received so far (sends are synchronous on AF_UNIX, so nothing is in flight)."""
        out: list[dict[str, str]] = []
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return out
            out.append(dict(line.split("=", 1) for line in data.decode("utf-8").split("\n")))

    def notifier(self, clock: FakeClock | None = None, **env: str) -> Notifier:
        return Notifier({"NOTIFY_SOCKET": self.address, **env}, clock=clock or FakeClock())


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[Systemd]:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        yield Systemd(sock, str(path))


def test_no_op_without_notify_socket() -> None:
    n = Notifier({"WATCHDOG_USEC": "1000000"})
    assert not n.enabled
    assert n.watchdog_interval is None
    n.ready("starting")
    n.status("x")
    n.tick()
    n.reloading()
    n.reloaded()
    n.stopping("bye")


def test_ready_sends_mainpid_and_status(systemd: Systemd) -> None:
    n = systemd.notifier()
    assert n.enabled
    n.ready("idle: 0 files")
    assert systemd.messages() == [{"READY": "1", "MAINPID": str(os.getpid()), "STATUS": "idle: 0 files"}]
    n.ready()
    assert systemd.messages() == [{"READY": "1", "MAINPID": str(os.getpid())}]


def test_abstract_namespace_socket() -> None:
    name = f"ragd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        systemd = Systemd(sock, "@" + name)
        systemd.notifier().ready()
        assert systemd.messages() == [{"READY": "1", "MAINPID": str(os.getpid())}]


def test_status_sent_only_when_changed(systemd: Systemd) -> None:
    clock = FakeClock()
    n = systemd.notifier(clock)
    n.status("indexing 1/10 files")
    clock.now += 1
    n.status("indexing 1/10 files")
    clock.now += 1
    n.status("indexing 2/10 files")
    assert [m["STATUS"] for m in systemd.messages()] == ["indexing 1/10 files", "indexing 2/10 files"]


def test_status_rate_limit_keeps_the_latest_text(systemd: Systemd) -> None:
    clock = FakeClock()
    n = systemd.notifier(clock)
    n.status("a")
    clock.now += 0.1
    n.status("b")
    clock.now += 0.1
    n.status("c")
    n.tick()
    assert [m["STATUS"] for m in systemd.messages()] == ["a"]
    clock.now += 0.3  # 0.5 s after "a"
    n.tick()
    assert systemd.messages() == [{"STATUS": "c"}]
    n.tick()
    assert systemd.messages() == []


def test_status_forced_and_pending_cancelled(systemd: Systemd) -> None:
    clock = FakeClock()
    n = systemd.notifier(clock)
    n.status("a")
    n.status("b", force=True)
    assert [m["STATUS"] for m in systemd.messages()] == ["a", "b"]
    n.status("c")  # held back ...
    n.status("b")  # ... and back to what systemd already shows: nothing left to send
    clock.now += 10
    n.tick()
    assert systemd.messages() == []


def test_status_is_one_utf8_line(systemd: Systemd) -> None:
    n = systemd.notifier()
    n.status("索引 3 files\nSTOPPING=1")
    assert systemd.messages() == [{"STATUS": "索引 3 files STOPPING=1"}]


def test_watchdog_cadence(systemd: Systemd) -> None:
    clock = FakeClock()
    n = systemd.notifier(clock, WATCHDOG_USEC="10000000")
    assert n.watchdog_interval == 5.0
    pings = []
    for step in (0, 4.9, 5.0, 6.0, 9.9, 10.0, 20.0):
        clock.now = 1000.0 + step
        n.tick()
        pings += [step for m in systemd.messages() if m == {"WATCHDOG": "1"}]
    assert pings == [5.0, 10.0, 20.0]


def test_no_watchdog_ping_while_unhealthy(systemd: Systemd) -> None:
    clock = FakeClock()
    n = systemd.notifier(clock, WATCHDOG_USEC="2000000")
    clock.now += 30
    n.tick(healthy=False)
    assert systemd.messages() == []
    n.tick(healthy=True)
    assert systemd.messages() == [{"WATCHDOG": "1"}]


def test_watchdog_of_another_pid_is_not_ours(systemd: Systemd) -> None:
    clock = FakeClock()
    n = systemd.notifier(clock, WATCHDOG_USEC="2000000", WATCHDOG_PID=str(os.getpid() + 1))
    assert n.watchdog_interval is None
    clock.now += 100
    n.tick()
    assert systemd.messages() == []
    assert systemd.notifier(WATCHDOG_USEC="2000000", WATCHDOG_PID=str(os.getpid())).watchdog_interval == 1.0


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [("", "", None), ("abc", "", None), ("0", "", None), ("1000000", "x", None), ("3000000", "", 1.5)],
)
def test_watchdog_interval_parsing(usec: str, pid: str, expected: float | None) -> None:
    assert watchdog_interval({"WATCHDOG_USEC": usec, "WATCHDOG_PID": pid}) == expected


def test_reloading_reloaded_stopping(systemd: Systemd) -> None:
    n = systemd.notifier()
    before = time.monotonic_ns() // 1000
    n.reloading()
    n.reloaded()
    n.stopping("stopping: flushing")
    reloading, reloaded, stopping = systemd.messages()
    assert reloading["RELOADING"] == "1"
    assert before <= int(reloading["MONOTONIC_USEC"]) <= time.monotonic_ns() // 1000
    assert reloaded == {"READY": "1"}
    assert stopping == {"STOPPING": "1", "STATUS": "stopping: flushing"}


def test_send_errors_are_swallowed_and_logged(
    systemd: Systemd, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="ragd.resident.notify")
    gone = Notifier({"NOTIFY_SOCKET": str(tmp_path / "missing.sock")})
    assert not gone.enabled
    n = systemd.notifier()
    systemd.sock.close()  # systemd went away after we connected
    n.ready("x")
    n.stopping()
    assert "cannot connect" in caplog.text
    assert "sd_notify 'READY=1' failed" in caplog.text


def test_progress_text() -> None:
    assert progress_text(120, 3400, 2, "indexing") == "indexing 120/3400 files, 2 failed"
    assert progress_text(3400, 3400, 2, "idle") == "idle: 3400 files, 2 failed"
    assert progress_text(0, 1, 0, "indexing") == "indexing 0/1 file"
    assert progress_text(5, 5, 0, "idle") == "idle: 5 files"


def test_the_agents_health_is_asked_only_when_a_ping_is_due(systemd: Systemd) -> None:
    """The main loop hands its health check (every thread listed) as a callable: asked at a due ping only, never
    outside systemd nor between pings."""
    clock = FakeClock()
    asked: list[float] = []

    def healthy() -> bool:
        asked.append(clock.now)
        return True

    Notifier({"WATCHDOG_USEC": "1000000"}, clock=clock).tick(healthy=healthy)  # no NOTIFY_SOCKET
    n = systemd.notifier(clock, WATCHDOG_USEC="2000000")
    n.tick(healthy=healthy)  # the first ping is due a second from the start
    clock.now += 0.5
    n.tick(healthy=healthy)
    assert asked == [] and systemd.messages() == []
    clock.now += 0.6
    n.tick(healthy=healthy)
    n.tick(healthy=healthy)  # the next is due a second later
    assert asked == [clock.now] and systemd.messages() == [{"WATCHDOG": "1"}]
