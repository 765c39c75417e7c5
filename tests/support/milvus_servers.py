"""Milvus servers the tests start on 127.0.0.1, each stopped whole: its process group, not only the process the
test started (the `milvus` wheel's `milvus-server` wrapper leaves its `milvus run standalone` child running when
it is terminated; `milvus-lite server` runs its own children too)."""

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
        except BaseException:
            self.stop()  # what it started so far: not left running
            raise

    def _alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the {self.name} exited:\n{self.log.read_text(errors='replace')}")
        return True

    def _group_alive(self) -> bool:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        """The whole process group: terminated, killed after 30 s; then the port closed."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
            poll(lambda: not self._group_alive(), 30, what=f"the {self.name}'s processes to end")
        except (subprocess.TimeoutExpired, AssertionError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            poll(lambda: not self._group_alive(), 30, what=f"the {self.name}'s processes to be killed")
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
