"""Benchmarks of MCP (issue 5): `ragctl mcp` start-up, and a search tool round trip over stdio and over HTTP.

    python -m bench.bench_mcp [--spawns 30] [--calls 50] [--files 200] [--attach]

1. spawn: wall time from starting `ragctl mcp` to its answer to `initialize` (a new process each time, as an MCP
   client starts it), median and p95 over --spawns runs, for `python -m ragctl` and the installed `ragctl`
   script: first with no agent (the bridge answers from its schema file), then with the agent running (the
   bridge opens a session on it and the agent answers).
2. search: the `search` tool (hybrid, top_k 5) called --calls times, one call at a time, with queries taken in
   turn from a fixed list, against a `ragd run` agent indexing a generated corpus of --files files (embeddings
   from a local OpenAI-compatible server, deterministic vectors, no delay: the figures measure the transports):
   - control socket: the agent's `search` verb, no MCP at all (the floor);
   - stdio raw: JSON-RPC lines written to one `ragctl mcp` and its answers read back (the bridge alone);
   - stdio SDK / HTTP SDK: the MCP SDK's client, through `ragctl mcp` and to the agent's HTTP endpoint (its URL
     from `status` or the agent's log), when the agent serves it.
   --attach uses the agent already running on this user's socket ($RAGD_SOCKET, ...) instead of starting one
   (--url gives its MCP URL when `status` does not).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.corpus import generate
from bench.fake_api import EmbeddingsAPI
from ragctl.protocol import Client, RemoteError, Unreachable, socket_path

QUERIES = (
    "ERR_CONN_RESET socket",
    "电池容量 快充",
    "hybrid search BM25",
    "备份 backups nightly",
    "向量数据库",
)
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}  # fmt: skip
MCP_URL = re.compile(r"MCP on (http://\S+)")


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def line(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def report(what: str, secs: list[float]) -> None:
    print(f"  {what:<44} median {statistics.median(secs) * 1000:7.1f} ms, p95 {pct(secs, 95) * 1000:7.1f} ms "
          f"({len(secs)} runs)")  # fmt: skip


# -- 1. spawn -> initialize ----------------------------------------------------------------------------------------
def spawn_once(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen([*cmd, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    assert proc.stdin and proc.stdout
    proc.stdin.write(line(INIT))
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    took = time.perf_counter() - t0
    assert answer["result"]["serverInfo"]["name"] == "ragd", answer
    proc.stdin.close()
    proc.wait(10)
    return took


def bench_spawn(runs: int, env: dict[str, str], who: str = "no agent: the bridge answers") -> None:
    print(f"spawn -> initialize answered (wall, new process each run; {who}):")
    commands = {"python -m ragctl mcp": [sys.executable, "-m", "ragctl"]}
    script = Path(sys.executable).with_name("ragctl")
    if script.exists():
        commands["ragctl mcp (installed script)"] = [str(script)]
    for name, cmd in commands.items():
        spawn_once(cmd, env)  # warm the page cache
        report(name, [spawn_once(cmd, env) for _ in range(runs)])


# -- the agent -----------------------------------------------------------------------------------------------------
@contextmanager
def started_agent(base: Path, files: int) -> Iterator[tuple[dict[str, str], str | None]]:
    """A `ragd run` on a generated corpus, ready and idle: (its environment, its MCP URL or None)."""
    root = base / "kb"
    generate(root, files, max(1, files // 20), mean_bytes=3000)
    with EmbeddingsAPI(dim=64) as api:
        (base / "run").mkdir(mode=0o700)
        (base / "ragd.toml").write_text(
            f'[embedding]\nprovider = "openai"\nmodel = "bench-embed"\ndimension = {api.dim}\n'
            f'base_url = "{api.base_url}"\napi_key = "sk-bench"\nbatch_size = 64\n\n[mcp]\nport = 0\n'
        )
        env = {**os.environ, "XDG_RUNTIME_DIR": str(base / "run"), "RAGD_DATA_DIR": str(base / "data"),
               "XDG_CONFIG_HOME": str(base / "cfg"), "HOME": str(base), "RAGD_CONFIG": str(base / "ragd.toml")}  # fmt: skip
        env.pop("RAGD_SOCKET", None)
        log_path = base / "agent.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "ragd", "run", str(root)], env=env, stdout=log,
                                    stderr=subprocess.STDOUT)  # fmt: skip
            try:
                sock = socket_path(env)
                t0 = time.perf_counter()
                call(sock, "wait", {"timeout": 600}, deadline=time.monotonic() + 120)
                print(f"agent: {files} files indexed in {time.perf_counter() - t0:.1f} s")
                url = mcp_url(sock) or _url_in(log_path)
                yield env, url
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)


def call(sock: Path, verb: str, args: dict[str, Any] | None = None, deadline: float = 0.0) -> Any:
    while True:
        try:
            with Client(sock, timeout=None) as client:
                return client.call(verb, args)
        except Unreachable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def mcp_url(sock: Path) -> str | None:
    mcp = call(sock, "status").get("mcp") or {}
    return mcp.get("url") if isinstance(mcp, dict) else None


def _url_in(log: Path) -> str | None:
    found = MCP_URL.findall(log.read_text(errors="replace"))
    return found[-1] if found else None


# -- 2. search round trips -----------------------------------------------------------------------------------------
def timed(n: int, fn: Callable[[int], None]) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def bench_control(sock: Path, n: int) -> None:
    with Client(sock, timeout=None) as client:

        def one(i: int) -> None:
            client.call("search", {"query": QUERIES[i % len(QUERIES)], "top_k": 5, "mode": "hybrid"})

        for i in range(len(QUERIES)):  # warm up: the agent embeds each query once, then caches its vector
            one(i)
        report("control socket `search` (no MCP, the floor)", timed(n, one))


def bench_stdio_raw(env: dict[str, str], n: int) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ragctl", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    assert proc.stdin and proc.stdout
    stdin, stdout = proc.stdin, proc.stdout

    def one(i: int) -> None:
        args = {"query": QUERIES[i % len(QUERIES)], "top_k": 5}
        stdin.write(line({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                          "params": {"name": "search", "arguments": args}}))  # fmt: skip
        stdin.flush()
        result = json.loads(stdout.readline())["result"]
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])

    try:
        stdin.write(line(INIT))
        stdin.flush()
        stdout.readline()
        one(0)
        report("stdio raw JSON-RPC through `ragctl mcp`", timed(n, one))
    except RuntimeError as err:
        print(f"  stdio: the search tool failed: {err}")
    finally:
        stdin.close()
        proc.wait(30)


def bench_sdk(name: str, server: Any, n: int) -> None:
    import anyio
    from mcp import Client as McpClient

    async def main() -> list[float] | str:
        async with McpClient(server, mode="legacy") as client:
            await client.list_tools()
            out = []
            for i in range(n + 1):
                t0 = time.perf_counter()
                result = await client.call_tool("search", {"query": QUERIES[i % len(QUERIES)], "top_k": 5})
                if result.is_error:
                    return f"the search tool failed: {getattr(result.content[0], 'text', result.content[0])}"
                out.append(time.perf_counter() - t0)
            return out[1:]  # the first call warms up

    secs = anyio.run(main)
    if isinstance(secs, str):
        print(f"  {name}: {secs}")
    else:
        report(name, secs)


def bench_search(env: dict[str, str], url: str | None, n: int) -> None:
    from mcp.client.stdio import StdioServerParameters

    print(f"search tool round trip (hybrid, top_k 5, one call at a time, {n} calls):")
    sock = socket_path(env)
    bench_control(sock, n)
    bench_stdio_raw(env, n)
    bench_sdk("stdio, MCP SDK client -> `ragctl mcp`",
              StdioServerParameters(command=sys.executable, args=["-m", "ragctl", "mcp"], env=env), n)  # fmt: skip
    if url:
        bench_sdk(f"HTTP, MCP SDK client -> {url}", url, n)
    else:
        print("  HTTP: the agent reports no MCP URL (not in `status`, not in its log)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spawns", type=int, default=30)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument(
        "--attach", action="store_true", help="use the agent already running on this user's socket"
    )
    ap.add_argument("--url", help="the agent's MCP URL with --attach (default: from `status`)")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {platform.system()} {platform.release()}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ragd-bench-mcp-") as tmp:
        base = Path(tmp)
        if args.attach:
            env = dict(os.environ)
            bench_spawn(args.spawns, env)
            try:
                url = args.url or mcp_url(socket_path(env))
            except (Unreachable, RemoteError) as err:
                sys.exit(f"--attach: no agent to attach to: {err}")
            bench_search(env, url, args.calls)
            return
        idle_env = {**os.environ, "XDG_RUNTIME_DIR": str(base / "none")}
        idle_env.pop("RAGD_SOCKET", None)
        bench_spawn(args.spawns, idle_env)
        with started_agent(base / "agent", args.files) as (env, url):
            bench_spawn(args.spawns, env, "an agent running: it answers")
            bench_search(env, url, args.calls)


if __name__ == "__main__":
    main()
