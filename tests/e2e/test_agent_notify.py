"""sd_notify from the real agent, received on a test NOTIFY_SOCKET as systemd would."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.agent import AgentProcess
from tests.e2e.conftest import write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


class NotifySocket:
    """A notify socket read at once on a thread of its own, as systemd reads its own; `reading=False`: one that
    is never read (its queue fills after a few datagrams)."""

    def __init__(self, path: Path, *, reading: bool = True) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        if reading:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while not self._closed.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.messages.extend((time.monotonic(), line) for line in data.decode("utf-8").splitlines())

    def drain(self) -> list[tuple[float, str]]:
        with self._lock:
            return list(self.messages)

    def seen(self, prefix: str) -> list[float]:
        return [t for t, m in self.drain() if m.startswith(prefix)]

    def close(self) -> None:
        self._closed.set()
        self.sock.close()


def test_ready_status_watchdog_and_stopping(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(40):
        (root / f"n{i}.md").write_text(f"# note {i}\n\nsome text {i}\n")
    monkeypatch.setenv("RAGD_CONFIG", str(write_api_config(tmp_path / "ragd.toml", fake_openai_server)))
    notify = NotifySocket(tmp_path / "notify.sock")
    env = {**os.environ, "NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "400000"}  # ping every 0.2 s
    agent = AgentProcess(tmp_path / "agent.log", str(root), env=env)
    try:
        poll(lambda: notify.seen("READY=1"), 60, what="READY=1")
        assert any(m == f"MAINPID={agent.pid}" for _, m in notify.drain())
        agent.wait_ready()
        agent.wait_idle()
        poll(lambda: any(m.startswith("STATUS=idle") for _, m in notify.drain()), what="an idle STATUS")
        statuses = [m for _, m in notify.drain() if m.startswith("STATUS=")]
        assert "STATUS=idle: 40 files" in statuses, statuses
        assert any(s.startswith("STATUS=indexing: ") and "/" in s and "directories" in s for s in statuses), (
            statuses
        )
        start = time.monotonic()
        time.sleep(3)  # a deliberate window: the watchdog pings sent during it are counted below
        pings = [t for t in notify.seen("WATCHDOG=1") if t >= start]
        assert 5 <= len(pings) <= 20, (
            pings
        )  # every 0.2 s from the main loop (tick 0.25 s): ~12; 6 at a load of 40
        assert agent.stop() == 0
        assert notify.seen("STOPPING=1")
    finally:
        agent.kill()
        notify.close()


def test_a_notify_socket_nobody_reads_never_stops_the_agent(tmp_path: Path, config: Path) -> None:
    """The main loop sends sd_notify datagrams; once the receiver's queue is full a send must give up, not wait:
    otherwise the agent's phases never end (`ragctl wait` says busy for ever) and it answers nothing it must
    decide in the main loop."""
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(5):
        (root / f"n{i}.md").write_text(f"# note {i}\n\nsome text {i}\n")
    notify = NotifySocket(tmp_path / "notify.sock", reading=False)
    env = {**os.environ, "NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "100000"}  # 20 pings a second
    agent = AgentProcess(tmp_path / "agent.log", str(root), env=env)
    try:
        agent.wait_ready()
        time.sleep(2)  # the queue is full by now
        agent.wait_idle()
        (root / "late.md").write_text("# late\n\nwritten after the queue filled\n")
        poll(
            lambda: agent.call("status")["roots"][0]["files"]["EMBEDDED"] == 6,
            60,
            what="the late file indexed",
        )
        agent.wait_idle()
        assert agent.stop() == 0
    finally:
        agent.kill()
        notify.close()


def test_a_watchdog_kill_leaves_every_threads_stack_in_the_log(tmp_path: Path, config: Path) -> None:
    """systemd's watchdog stops a hung agent with SIGABRT: the log (the journal) must then say where each thread
    was, not end without a word."""
    root = tmp_path / "kb"
    root.mkdir()
    agent = AgentProcess(tmp_path / "agent.log", str(root))
    try:
        agent.wait_ready()
        agent.wait_idle()
        # faulthandler walks every thread's frames from the signal handler, without the interpreter's lock: a thread
        # ending at that moment can crash the walk (SIGSEGV mid-dump). The thread that served this test's own last
        # call ends just after its answer; a hung agent's threads are not ending
        time.sleep(0.5)
        agent.signal(signal.SIGABRT)
        assert agent.proc.wait(30) == -signal.SIGABRT
        log = agent.log()
        assert "Fatal Python error: Aborted" in log, log
        assert log.count("(most recent call first)") >= 3, log  # the main thread and the agent's others
        assert "lifecycle.py" in log, log  # the main loop, where it was
    finally:
        agent.kill()
