"""The control socket under a burst of clients: how many of N simultaneous connections are refused or fail.

    python -m bench.bench_control [--clients 200] [--rounds 3]

Starts `ragd run` on an empty folder in a private XDG environment (no model is loaded: nothing to embed), then
per round:
- burst: N non-blocking `connect()`s in a row, none accepted yet; counts those refused with EAGAIN (the listen
  backlog is full) — the figure the backlog decides;
- clients: N threads released together by a barrier, each connecting (blocking) and calling `hello`; counts
  failures and reports the slowest answer.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ragctl.protocol import Client, Unreachable, socket_path


def burst(path: Path, n: int) -> int:
    refused = 0
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(os.fspath(path))
            socks.append(s)
        except BlockingIOError:
            refused += 1
            s.close()
    for s in socks:
        s.close()
    return refused


def clients(path: Path, n: int) -> tuple[int, float]:
    barrier = threading.Barrier(n)
    failed: list[BaseException] = []
    slowest = [0.0]

    def one() -> None:
        try:
            barrier.wait(30)
            t0 = time.perf_counter()
            with Client(path, timeout=30) as c:
                c.call("hello")
            slowest[0] = max(slowest[0], time.perf_counter() - t0)
        except Exception as err:
            failed.append(err)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return len(failed), slowest[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragd-bench-control-") as tmp:
        home = Path(tmp)
        env = {**os.environ, "HOME": str(home)}
        for var in (
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_CACHE_HOME",
            "XDG_STATE_HOME",
            "XDG_RUNTIME_DIR",
        ):
            (home / var).mkdir(mode=0o700)
            env[var] = str(home / var)
        env.pop("RAGD_SOCKET", None)
        cfg = home / "ragd.toml"
        cfg.write_text("[mcp]\nenabled = false\n")
        env["RAGD_CONFIG"] = str(cfg)
        (home / "kb").mkdir()
        os.environ.update({k: env[k] for k in ("XDG_RUNTIME_DIR", "HOME")})
        path = socket_path()
        proc = subprocess.Popen([sys.executable, "-m", "ragd", "run", str(home / "kb")], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with Client(path, timeout=5) as c:
                        if c.call("status")["agent"]["ready"]:
                            break
                except (Unreachable, OSError):
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the agent did not start")
                time.sleep(0.1)
            print(
                f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
            )
            print(f"somaxconn: {Path('/proc/sys/net/core/somaxconn').read_text().strip()}")
            for r in range(a.rounds):
                refused = burst(path, a.clients)
                failed, slowest = clients(path, a.clients)
                print(f"round {r + 1}: burst of {a.clients} connects: {refused} refused (EAGAIN); "
                      f"{a.clients} simultaneous clients: {failed} failed, slowest answer {slowest * 1000:.0f} ms")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
