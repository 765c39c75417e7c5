"""`ragctl mcp` as AI tools run it: spawned by the MCP SDK's real stdio client, with and without a running agent.

The agent is the real `ragd run` (against the fake OpenAI embeddings server); the bridge is the real
`python -m ragctl mcp` subprocess, and its raw stdout is checked line by line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, TextResourceContents

import ragctl
from ragctl.protocol import socket_path
from tests.e2e.agent import RAGCTL, AgentProcess, ragctl_json, running_agent
from tests.e2e.conftest import FAST_WATCH, write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.mcp_tools import TOOLS
from tests.support.poll import poll

T = TypeVar("T")
NOT_RUNNING = (
    "the ragd agent is not running (no agent is listening on {}). "
    "Start it with `ragd run` or `systemctl --user start ragd`, then try again."
)


def over_stdio(log: Path, fn: Callable[[Client], Awaitable[T]], mode: str = "auto") -> T:
    """Run `fn` with an SDK client connected to a `ragctl mcp` it spawned (the bridge's stderr goes to `log`)."""

    async def main() -> T:
        params = StdioServerParameters(command=sys.executable, args=["-m", "ragctl", "mcp", "-v"],
                                       env=dict(os.environ))  # fmt: skip
        with log.open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                return await fn(client)

    return anyio.run(main)


def texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


def raw_session(requests: list[Any], timeout: float = 60) -> list[str]:
    """Write `requests` (objects, or bytes as they are) to a `ragctl mcp`, close its stdin, return its stdout lines."""
    data = b"".join((r if isinstance(r, bytes) else json.dumps(r, ensure_ascii=False).encode()) + b"\n"
                    for r in requests)  # fmt: skip
    proc = subprocess.run([*RAGCTL, "mcp", "-v"], input=data, capture_output=True, timeout=timeout,
                          env=os.environ.copy())  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout.endswith(b"\n")
    return proc.stdout.decode("utf-8").split("\n")[:-1]


def assert_jsonrpc(line: str) -> list[dict[str, Any]]:
    """`line` is one JSON-RPC 2.0 response (or a batch of them), or a notification from the server; returns the
    responses. A notification can come at any time: `resources/list_changed` is announced (coalesced over 0.5 s)
    after the agent indexed documents, so a session opened right after it went idle may get one."""
    msg = json.loads(line)
    if isinstance(msg, dict) and "id" not in msg:
        assert msg["jsonrpc"] == "2.0" and msg["method"].startswith("notifications/"), line
        return []
    replies = msg if isinstance(msg, list) else [msg]
    for reply in replies:
        assert reply["jsonrpc"] == "2.0" and "id" in reply, line
        assert ("result" in reply) != ("error" in reply), line
        if "error" in reply:
            assert isinstance(reply["error"]["code"], int) and isinstance(reply["error"]["message"], str)
    return replies


def req(rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": method,
        **({"params": params} if params is not None else {}),
    }


def _requests() -> list[Any]:
    """A session of everything a client may send, malformed lines included."""
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    return [
        req(0, "server/discover", {}),
        req(1, "initialize", hello),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        req(2, "tools/list"),
        req(3, "resources/templates/list"),
        req(4, "tools/call", {"name": "search", "arguments": {"query": "ERR_CONN_RESET 电池\n", "top_k": 3}}),
        req(5, "tools/call", {"name": "read_document", "arguments": {"path": "/etc/passwd"}}),
        req(6, "resources/read", {"uri": "ragd://dir/"}),
        req(7, "ping"),
        b"this is not JSON",
        b"\xff\xfe not UTF-8",
        [req(8, "ping"), req(9, "tools/call", {"name": "status"})],
        req(10, "no/such/method"),
    ]


# -- no agent ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_without_an_agent_the_sdk_client_connects_and_tools_say_how_to_start_it(
    tmp_path: Path, mode: str, version: str
) -> None:
    """Either era: `auto` discovers the per-request era (server/discover), `legacy` does the handshake."""

    async def session(client: Client) -> tuple[Any, ...]:
        tools = await client.list_tools()
        return (
            client.protocol_version,
            client.server_info,
            tools,
            await client.call_tool("search", {"query": "x"}),
        )

    negotiated, info, tools, result = over_stdio(tmp_path / "bridge.log", session, mode=mode)
    assert negotiated == version
    assert info is not None and (info.name, info.version) == ("ragd", ragctl.__version__)
    assert [t.name for t in tools.tools] == list(TOOLS)
    assert [t.name for t in tools.tools if not (t.annotations and t.annotations.read_only_hint)] == [
        "reindex"
    ]
    assert result.is_error and texts(result) == [NOT_RUNNING.format(socket_path())]


def test_every_line_on_stdout_is_json_rpc_without_an_agent() -> None:
    lines = raw_session(_requests())
    replies = [r for line in lines for r in assert_jsonrpc(line)]
    assert sorted(r["id"] for r in replies if r["id"] is not None) == list(range(11))  # each request once
    assert sum(r["id"] is None for r in replies) == 2  # the two lines that are not JSON
    call = next(r for r in replies if r["id"] == 4)["result"]
    assert call["isError"] and NOT_RUNNING.format(socket_path()) in call["content"][0]["text"]


# -- a running agent ---------------------------------------------------------------------------------------------
@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "reset.md").write_text(
        "# ERR_CONN_RESET\n\nThe peer closed the socket; retry the request.\n"
    )
    (root / "phone.md").write_text("# 小米 15 Pro\n\n电池容量是 6100mAh，支持 90W 快充。\n", encoding="utf-8")
    (root / "ml.txt").write_text("Backpropagation computes gradients layer by layer.\n")
    return root


@pytest.fixture
def agent(
    tmp_path: Path, root: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> Iterator[AgentProcess]:
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server, watch=FAST_WATCH)
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as proc:
        yield proc


def test_search_over_stdio_equals_ragctl_search(agent: AgentProcess, root: Path, tmp_path: Path) -> None:
    async def session(client: Client) -> tuple[Any, ...]:
        await client.list_tools()  # the client validates structured results against the tools' output schemas
        found = await client.call_tool("search", {"query": "ERR_CONN_RESET socket", "top_k": 3})
        if found.is_error:  # asserted below, with its text
            return found, None, None, None
        zh = await client.call_tool("search", {"query": "电池容量", "top_k": 3, "mode": "keyword"})
        doc = await client.read_resource(f"ragd://file/{str(root / 'phone.md').lstrip('/')}")
        try:
            await client.read_resource("ragd://file/etc/passwd")
            escaped: MCPError | None = None
        except MCPError as err:
            escaped = err
        return found, zh, doc, escaped

    found, zh, doc, escaped = over_stdio(tmp_path / "bridge.log", session, mode="legacy")
    assert not found.is_error, texts(found)
    expected = ragctl_json("search", "ERR_CONN_RESET socket", "-k", "3")["results"]
    assert found.structured_content is not None and found.structured_content["results"] == expected
    assert expected and expected[0]["path"] == str(root / "ops" / "reset.md")
    assert not zh.is_error and zh.structured_content is not None
    assert (
        zh.structured_content["results"]
        == ragctl_json("search", "电池容量", "-k", "3", "--mode", "keyword")["results"]
    )
    [contents] = doc.contents
    assert isinstance(contents, TextResourceContents) and "phone.md" in contents.text
    assert escaped is not None, "a path outside every root must be refused"


def test_every_line_on_stdout_is_json_rpc_with_an_agent(agent: AgentProcess) -> None:
    lines = raw_session(_requests())
    replies = {r["id"]: r for line in lines for r in assert_jsonrpc(line) if r["id"] is not None}
    assert sorted(replies) == list(range(11))
    search = replies[4]["result"]
    assert not search["isError"], search
    assert search["structuredContent"]["results"] and "ERR_CONN_RESET" in search["content"][0]["text"]
    assert replies[5]["result"]["isError"]  # /etc/passwd is outside every root


CLIENT = """
import os, sys, anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

async def main():
    params = StdioServerParameters(command=sys.executable, args=["-m", "ragctl", "mcp", "-v"], env=dict(os.environ))
    async with Client(stdio_client(params, errlog=sys.stderr)) as client:
        print("connected", flush=True)
        await client.call_tool("wait_until_indexed", {"timeout_s": 600})

anyio.run(main)
"""


def _children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone
        if entry.name.isdigit() and stat[0] != "Z" and int(stat[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, not a zombie left for a parent that no longer reaps it."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_client_takes_its_bridge_and_its_running_call_with_it(
    agent: AgentProcess, root: Path, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """An MCP client killed while a long call ran (`wait_until_indexed` on a busy agent) left its `ragctl mcp`, and
    the call in the agent, alive for up to 10 minutes. The bridge notices that its client is gone (its stdout has no
    reader left, its parent died), cancels the calls the agent still runs for it, and exits."""
    fake_openai_server.hold_next(1)  # the agent stays busy: the wait goes on until the client is killed
    try:
        (root / "held.md").write_text("# held\n\nwaiting for its vectors\n")
        poll(
            lambda: any("waiting for its vectors" in t for t in fake_openai_server.texts),
            30,
            what="the request",
        )
        with (tmp_path / "client.log").open("w") as log:
            client = subprocess.Popen([sys.executable, "-c", CLIENT], stdout=subprocess.PIPE, stderr=log,
                                      env=dict(os.environ), text=True)  # fmt: skip
            try:
                assert client.stdout is not None and client.stdout.readline() == "connected\n"
                poll(
                    lambda: agent.call("status")["mcp"]["calls_running"] == 1,
                    30,
                    what="the wait in the agent",
                )
                [bridge] = _children(client.pid)
                client.kill()
                client.wait(30)
            finally:
                client.kill()
        poll(lambda: not _alive(bridge), 5, what="the bridge to exit")
        poll(
            lambda: agent.call("status")["mcp"]["calls_running"] == 0, 5, what="the wait to end in the agent"
        )
    finally:
        fake_openai_server.release()
