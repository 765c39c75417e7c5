"""Milvus servers the tests start on 127.0.0.1, each stopped whole: its process group and every process it started,
not only the process the test started (the `milvus` wheel's `milvus-server` wrapper leaves its `milvus run
standalone` child running when it is terminated alone)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.poll import poll

MILVUS_LITE = [sys.executable, "-m", "milvus_lite.cmdline"]
# PyPI's `milvus` 2.3.5, the newest Linux build of the embedded Milvus standalone server (a Milvus older than 2.5)
OLD_MILVUS = [sys.executable, "-c", "import sys, milvus; sys.argv[0] = 'milvus-server'; milvus.main()"]
# every listening port of that server is given (its defaults are fixed numbers that another server may hold)
OLD_MILVUS_PORTS = ("etcd", "root-coord", "proxy", "proxy-internal", "query-coord", "query-node", "index-coord",
                    "index-node", "data-coord", "data-node")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _processes() -> dict[int, tuple[str, int, int]]:
    """Every process: its state, parent and process group (Linux's /proc)."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # ended meanwhile
        out[int(stat.parent.name)] = (state, int(ppid), int(pgrp))
    return out


def tree(pid: int) -> dict[int, str]:
    """The process `pid` and all its descendants, each with its command line."""
    children: dict[int, list[int]] = {}
    for child, (_state, ppid, _pgrp) in _processes().items():
        children.setdefault(ppid, []).append(child)
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        said = command_line(p)
        if said is not None:
            found[p] = said
            todo += children.get(p, [])
    return found


def command_line(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended and not yet reaped, does not)."""
    said = _processes().get(pid)
    return said is not None and said[0] != "Z"


def old_milvus_missing() -> str | None:
    """Why the old Milvus server cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return "the `milvus` 2.3.5 wheel (an embedded Milvus standalone server) is built for Linux only"
    if importlib.util.find_spec("milvus") is None:
        return "the `milvus` 2.3.5 wheel (an embedded Milvus standalone server) is not installed: make setup"
    return None


class ServerProcess:
    """A server process in a session (and process group) of its own, on 127.0.0.1:`port`."""

    name = "server"

    def __init__(self, data_dir: Path, port: int, log: Path) -> None:
        self.data_dir, self.port, self.log = data_dir, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 60) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            poll(lambda: self._alive() and answers(self.port), timeout, what=f"the {self.name} to listen")
            poll(lambda: self._alive() and self.ready(), timeout, every=1.0, what=f"the {self.name} to serve")
        except BaseException:
            self.stop()  # what it started so far: not left running
            raise

    def ready(self) -> bool:
        """Whether the server, listening, serves its clients (a server may accept connections before that)."""
        return True

    def _alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the {self.name} exited:\n{self.log.read_text(errors='replace')}")
        return True

    def _left(self, started: dict[int, str]) -> list[int]:
        """What still runs of the server: its process group, and whatever it started (even in a group of its own)."""
        assert self.proc is not None
        group = self.proc.pid  # its session's, and its group's, id
        return sorted(pid for pid, (state, _ppid, pgrp) in _processes().items() if state != "Z" and (
            pgrp == group or (pid in started and command_line(pid) == started[pid])))  # fmt: skip

    def _signal(self, pids: list[int], sig: signal.Signals) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        """The whole server: its process group and every process it started, terminated, killed after 30 s; then the
        port closed. AssertionError if any of them is still there."""
        if self.proc is None:
            return
        started = tree(self.proc.pid)
        self._signal(list(started), signal.SIGTERM)
        try:
            self.proc.wait(30)
            poll(lambda: not self._left(started), 30, what=f"the {self.name}'s processes to end")
        except (subprocess.TimeoutExpired, AssertionError):
            self._signal(self._left(started), signal.SIGKILL)
            self.proc.wait(30)
            poll(lambda: not self._left(started), 30, what=f"the {self.name}'s processes to be killed")
        poll(lambda: not answers(self.port), 30, what=f"the {self.name}'s port to close")


class MilvusLiteServer(ServerProcess):
    """`milvus-lite server` on 127.0.0.1:`port`, its data in `data_dir` (kept across a stop and a start)."""

    name = "Milvus Lite server"

    def command(self) -> list[str]:
        return [*MILVUS_LITE, "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1",
                "--port", str(self.port)]  # fmt: skip


class OldMilvusServer(ServerProcess):
    """PyPI's `milvus` 2.3.5 (`milvus-server --data DIR`): a real Milvus standalone older than 2.5."""

    name = "Milvus 2.3.5 server"

    def command(self) -> list[str]:
        ports = [arg for key in OLD_MILVUS_PORTS
                 for arg in (f"--{key}-port", str(self.port if key == "proxy" else free_port()))]  # fmt: skip
        return [*OLD_MILVUS, "--data", str(self.data_dir), *ports]

    def ready(self) -> bool:
        """Its proxy listens before its coordinators are up (under load, for many seconds): until then a client's
        connection fails as from a server that is not there."""
        from pymilvus import MilvusClient

        try:
            client = MilvusClient(uri=self.uri, timeout=5)
        except Exception:  # pymilvus's errors for a server not serving yet are of many kinds
            return False
        try:
            return bool(client.get_server_version())
        except Exception:
            return False
        finally:
            client.close()
