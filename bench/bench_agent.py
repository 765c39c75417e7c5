"""Benchmarks of the resident agent (issue 4). Prints figures; asserts nothing.

    python -m bench.bench_agent [--parts latency,status,idle,burst] [--edits 40] [--files 10000]

1. latency: edit-to-searchable with the bundled local model — append a unique word to a file of a 200-file corpus,
   then poll the agent's `search` (keyword mode, over the control socket) every 10 ms until that file is found.
   p50/p95/max over N edits, one edit at a time.
2. status: wall time of `ragctl status` (a new process each time, as a user runs it) with 10,000 files indexed.
3. idle: the agent's RSS and CPU use over 60 s of idleness with 10,000 files (2,000 directories) watched.
4. burst: 10,000 files created as fast as Python can write them, into a watched root: time until `wait` returns,
   and files lost (files on disk minus sources in the index; must be 0).

Parts 2-4 use a local OpenAI-compatible server on 127.0.0.1 (deterministic vectors, no delay), so that they
measure the agent and not the model; part 1 uses the local model, which is what a user gets by default.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.corpus import generate
from bench.fake_api import EmbeddingsAPI
from ragctl.protocol import Client, Unreachable

RAGCTL = [sys.executable, "-m", "ragctl"]


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def agent_env(base: Path, config: str | None = None) -> dict[str, str]:
    """The environment of an agent (and its ragctl) living under `base`: its runtime, data and config folders,
    and `config` (TOML) as its config file when given."""
    env = {**os.environ, "XDG_RUNTIME_DIR": str(base / "run"), "RAGD_DATA_DIR": str(base / "data"),
           "XDG_CONFIG_HOME": str(base / "cfg"), "HOME": str(base)}  # fmt: skip
    (base / "run").mkdir(mode=0o700, parents=True, exist_ok=True)
    if config:
        (base / "ragd.toml").write_text(config)
        env["RAGD_CONFIG"] = str(base / "ragd.toml")
    return env


class Agent:
    def __init__(self, base: Path, root: Path, config: str | None) -> None:
        self.env = agent_env(base, config)
        self.sock = base / "run" / "ragd" / "control.sock"
        self.log = (base / "agent.log").open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "ragd", "-q", "run", str(root)], env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT)  # fmt: skip
        self.client = self._connect()

    def _connect(self) -> Client:
        deadline = time.monotonic() + 120
        while True:
            try:
                return Client(self.sock, timeout=None)
            except Unreachable:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)

    def call(self, verb: str, args: dict[str, Any] | None = None) -> Any:
        try:
            return self.client.call(verb, args)
        except Unreachable:  # the agent closes a connection left idle (control.IDLE_TIMEOUT_S): connect again
            if self.proc.poll() is not None:
                raise
            self.client.close()
            self.client = self._connect()
            return self.client.call(verb, args)

    def wait(self) -> float:
        t0 = time.perf_counter()
        self.call("wait")
        return time.perf_counter() - t0

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)
        self.log.close()


def api_config(server: EmbeddingsAPI) -> str:
    return (f'[embedding]\nprovider = "openai"\nmodel = "bench-embed"\ndimension = {server.dim}\n'
            f'base_url = "{server.base_url}"\napi_key = "sk-bench"\nbatch_size = 64\n')  # fmt: skip


def bench_latency(tmp: Path, edits: int) -> None:
    root = tmp / "lat" / "kb"
    files = generate(root, 200, 10, mean_bytes=3000)
    agent = Agent(tmp / "lat", root, None)
    try:
        t_idle = agent.wait()
        print(f"latency: initial indexing of 200 files (local model) took {t_idle:.1f} s")
        rng = random.Random(3)
        lat = []
        for i in range(edits):
            target = rng.choice([f for f in files if f.suffix in (".md", ".txt")])
            word = f"zq{i:03d}edit{rng.randrange(10**6)}"
            with target.open("a", encoding="utf-8") as f:
                f.write(f"\n\nA new paragraph mentions {word} today.\n")
            t0 = time.perf_counter()
            while True:
                hits = agent.call("search", {"query": word, "mode": "keyword", "top_k": 3})["results"]
                if any(h["path"] == str(target) for h in hits):
                    break
                time.sleep(0.01)
            lat.append(time.perf_counter() - t0)
            agent.wait()
        print(f"latency: edit-to-searchable over {edits} edits (local model): p50 {pct(lat, 50):.3f} s, "
              f"p95 {pct(lat, 95):.3f} s, max {max(lat):.3f} s")  # fmt: skip
    finally:
        agent.stop()


def make_tree(root: Path, files: int, dirs: int) -> None:
    for i in range(files):
        d = root / f"d{i % dirs:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"n{i:05d}.md").write_text(f"# note {i}\n\nsome words about item {i} and 项目 {i}.\n")


def bench_big(tmp: Path, files: int, parts: set[str]) -> None:
    with EmbeddingsAPI(dim=64) as server:
        base = tmp / "big"
        root = base / "kb"
        make_tree(root, files, files // 5)
        agent = Agent(base, root, api_config(server))
        try:
            t = agent.wait()
            print(
                f"big: initial indexing of {files} files in {files // 5} dirs: {t:.1f} s (API server, no delay)"
            )
            if "status" in parts:
                walls = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    subprocess.run([*RAGCTL, "status"], env=agent.env, capture_output=True, check=True)
                    walls.append(time.perf_counter() - t0)
                print(f"status: `ragctl status` with {files} files: median {pct(walls, 50) * 1000:.0f} ms, "
                      f"p95 {pct(walls, 95) * 1000:.0f} ms (20 runs, new process each)")  # fmt: skip
            if "idle" in parts:
                time.sleep(5)
                cpu0, t0 = agent.cpu_s(), time.perf_counter()
                time.sleep(60)
                cpu = (agent.cpu_s() - cpu0) / (time.perf_counter() - t0) * 100
                print(
                    f"idle: {files} files watched: RSS {agent.rss_mib():.0f} MiB, CPU {cpu:.2f} % over 60 s"
                )
            if "burst" in parts:
                burst = root / "burst"
                burst.mkdir()
                t0 = time.perf_counter()
                for i in range(files):
                    (burst / f"b{i:05d}.txt").write_text(f"burst file {i} word{i}x\n")
                written = time.perf_counter() - t0
                agent.wait()
                total = time.perf_counter() - t0
                on_disk = sum(len([f for f in fs if not f.startswith(".")])
                              for d, _, fs in os.walk(root) if "/.rag" not in d + "/")  # fmt: skip
                indexed = len(agent.call("index", {"sources": True})["sources"])
                print(f"burst: {files} files created in {written:.1f} s; agent idle {total:.1f} s after the first; "
                      f"files on disk {on_disk}, indexed {indexed}, lost {on_disk - indexed}")  # fmt: skip
        finally:
            agent.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="latency,status,idle,burst")
    ap.add_argument("--edits", type=int, default=40)
    ap.add_argument("--files", type=int, default=10000)
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {platform.system()} {platform.release()}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ragd-bench-agent-") as tmp:
        if "latency" in parts:
            bench_latency(Path(tmp), args.edits)
        if parts & {"status", "idle", "burst"}:
            bench_big(Path(tmp), args.files, parts)


if __name__ == "__main__":
    main()
