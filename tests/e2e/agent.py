"""Running the real agent (`ragd run`) and the real `ragctl` in subprocesses, with the test's isolated environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragctl.protocol import Client, Unreachable, socket_path
from tests.support.poll import poll

if TYPE_CHECKING:
    from tests.support.users import User

RAGCTL = [sys.executable, "-m", "ragctl"]
RAGD_RUN = [sys.executable, "-m", "ragd", "run"]


def write_doc(path: Path, token: str, extra: str = "") -> Path:
    """A small Markdown file whose marker word `token` keyword search finds (English and Chinese text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# {token}\n\nThe marker {token} appears here. 标记 {token} 在这里。{extra}\n", encoding="utf-8"
    )
    return path


def files_in(root: Path) -> list[str]:
    """Every file under `root` the agent indexes by default (dot-files and dot-directories left out), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        out += [os.path.join(dirpath, f) for f in filenames if not f.startswith(".")]
    return sorted(out)


def keyword_hits(token: str, k: int = 20) -> list[str]:
    """The paths `ragctl search TOKEN --mode keyword` finds, sorted (with the copies of the same content that a hit
    folds in: its `duplicates`)."""
    res = ragctl_json("search", token, "--mode", "keyword", "-k", str(k))
    return sorted({p for r in res["results"] for p in (r["path"], *r.get("duplicates", ()))})


def ragctl(*args: str, check: int | None = 0, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*RAGCTL, *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy()
    )
    if check is not None:
        assert proc.returncode == check, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def ragctl_json(*args: str, check: int | None = 0) -> Any:
    return json.loads(ragctl(*args, "--json", check=check).stdout)


class AgentProcess:
    """`ragd run` in the background; its stderr goes to a log file shown when a test fails. With `user`, run as that
    (throwaway) user with `python`, an interpreter the user may run (tests/support/users.py: python_for), in the
    directory `env["HOME"]`."""

    def __init__(
        self,
        log_path: Path,
        *args: str,
        env: dict[str, str] | None = None,
        user: User | None = None,
        python: str = sys.executable,
    ) -> None:
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.env = env or os.environ.copy()
        as_user: dict[str, Any] = {}
        if user is not None:
            as_user = {"cwd": self.env["HOME"], "user": user.uid, "group": user.gid, "extra_groups": []}
        self.proc = subprocess.Popen([python, *RAGD_RUN[1:], *args], stdout=self._log, stderr=subprocess.STDOUT,
                                     env=self.env, **as_user)  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def call(self, verb: str, args: dict[str, Any] | None = None, timeout: float = 60) -> Any:
        with Client(socket_path(self.env), timeout=timeout) as c:  # the socket of the agent's environment
            return c.call(verb, args)

    def wait_ready(self, timeout: float = 60) -> None:
        def answered() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"ragd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                return bool(self.call("status")["agent"]["ready"])
            except (Unreachable, OSError):
                return False

        poll(answered, timeout, what="the agent to answer on its socket")

    def wait_idle(self, timeout: float = 120) -> None:
        self.call("wait", {"timeout": timeout}, timeout=timeout + 10)

    def sources(self) -> list[str]:
        return sorted(self.call("index", {"sources": True})["sources"])

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._log.close()


@contextmanager
def running_agent(log_path: Path, *args: str, idle: bool = False) -> Iterator[AgentProcess]:
    """`ragd run ARGS` answering on its socket (and idle, with `idle`); killed at the end."""
    proc = AgentProcess(log_path, *args)
    try:
        proc.wait_ready()
        if idle:
            proc.wait_idle()
        yield proc
    finally:
        proc.kill()
