"""`ragctl` and `ragctl mcp` find an agent started by hand with a runtime dir of its own, from a minimal environment.

An AI tool's MCP SDK starts `ragctl mcp` with only HOME, LOGNAME, PATH, SHELL, TERM and USER
(`get_default_environment()`): no XDG_RUNTIME_DIR, no RAGD_*. The real `ragd run` here uses the test's own
XDG_RUNTIME_DIR (not /run/user/UID); the client finds it through the discovery record under HOME. The children
get PYTHONPATH too, when the test run has one: it says which code to run, not where the agent is; and TMPDIR, a
directory of the test run's, so that the socket such a client computes first (<temp dir>/ragd-<uid>) is never one
an agent elsewhere on the machine made.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from ragctl import protocol
from ragctl.protocol import discovery
from tests.e2e.agent import RAGCTL, AgentProcess, running_agent

T = TypeVar("T")
pytestmark = pytest.mark.usefixtures("own_tmpdir")


def extra_env() -> dict[str, str]:
    """What the children get beyond the SDK's default environment: which code to run, and a temp dir of their own."""
    extra = {"TMPDIR": os.environ["TMPDIR"]}  # the test's (own_tmpdir), not the machine's /tmp
    if os.environ.get("PYTHONPATH"):
        extra["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return extra


def minimal_env() -> dict[str, str]:
    env = {**get_default_environment(), **extra_env()}
    assert not {k for k in env if k.startswith(("XDG_", "RAGD_"))}, env
    return env


def over_stdio(log: Path, fn: Callable[[Client], Awaitable[T]]) -> T:
    """`fn` with the real SDK client connected to a `ragctl mcp` it spawned with its default environment."""

    async def main() -> T:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ragctl", "mcp", "-v"], env=extra_env()
        )
        with log.open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                return await fn(client)

    return anyio.run(main)


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "reset.md").write_text("# ERR_CONN_RESET\n\nThe peer closed the socket; retry the request.\n")
    return root


@pytest.fixture
def agent(tmp_path: Path, root: Path, config: Path) -> Iterator[AgentProcess]:
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as proc:
        own = protocol.socket_path(proc.env)
        assert own.is_socket()
        assert protocol.runtime_dir(minimal_env()) / protocol.SOCKET_NAME != own  # what the old client tried
        yield proc


def test_the_sdk_stdio_client_with_its_default_environment_reaches_the_agent(
    agent: AgentProcess, root: Path, tmp_path: Path
) -> None:
    async def session(client: Client) -> tuple[Any, Any]:
        return await client.call_tool("status", {}), await client.call_tool(
            "search", {"query": "ERR_CONN_RESET"}
        )

    status, found = over_stdio(tmp_path / "bridge.log", session)
    assert not status.is_error, text_of(status)
    assert status.structured_content is not None and status.structured_content["agent"]["pid"] == agent.pid
    assert not found.is_error, text_of(found)
    assert found.structured_content is not None
    assert [r["path"] for r in found.structured_content["results"]][:1] == [str(root / "reset.md")]


def test_ragctl_status_with_the_minimal_environment_reaches_the_agent(agent: AgentProcess) -> None:
    proc = subprocess.run([*RAGCTL, "status", "--json"], capture_output=True, text=True, timeout=60,
                          env=minimal_env())  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["agent"]["pid"] == agent.pid


def test_the_record_is_private_and_gone_after_a_clean_stop(agent: AgentProcess) -> None:
    record = discovery.record_path(os.environ)
    assert json.loads(record.read_text())["pid"] == agent.pid
    assert record.stat().st_mode & 0o777 == 0o600 and record.parent.stat().st_mode & 0o777 == 0o700
    assert agent.stop() == 0
    assert not record.exists(), agent.log()
    proc = subprocess.run([*RAGCTL, "status"], capture_output=True, text=True, timeout=60, env=minimal_env())
    assert proc.returncode == 3, proc.stderr
    assert "not running" in proc.stderr


def test_a_bridge_started_before_the_agent_finds_it_once_it_runs(
    tmp_path: Path, root: Path, config: Path
) -> None:
    started: list[AgentProcess] = []

    def start_agent() -> None:
        started.append(AgentProcess(tmp_path / "agent.log", str(root)))
        started[0].wait_ready()

    async def session(client: Client) -> tuple[Any, Any]:
        before = await client.call_tool("status", {})
        await anyio.to_thread.run_sync(start_agent)
        with anyio.fail_after(60):
            while True:  # its MCP server starts just after READY: poll until it answers
                after = await client.call_tool("status", {})
                if "MCP server is not running" not in text_of(after):
                    return before, after
                await anyio.sleep(0.05)

    try:
        before, after = over_stdio(tmp_path / "bridge.log", session)
    finally:
        for proc in started:
            proc.signal(signal.SIGTERM)
            proc.stop()
    assert before.is_error and "not running" in text_of(before)
    assert not after.is_error, text_of(after)
    assert after.structured_content is not None and after.structured_content["agent"]["pid"] == started[0].pid
