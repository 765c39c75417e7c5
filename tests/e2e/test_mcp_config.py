"""`ragctl mcp-config --write` as a user runs it, and the written entry as each AI tool uses it.

The agent is the real `ragd run` with a bearer token on its HTTP endpoint. `ragctl mcp-config CLIENT --write
--config-file F` writes F; the test then does what the client does with F: starts the entry's exact command with
the MCP SDK's stdio client and the SDK's default environment (only what the entry's `env` adds on top), or
connects the SDK's streamable HTTP client to the entry's URL with the entry's headers.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.agent import RAGCTL, AgentProcess, running_agent
from tests.e2e.conftest import api_config_text
from tests.integration.test_mcp_http import raw_post
from tests.support.fake_openai import FakeOpenAI
from tests.support.mcp_tools import TOOLS
from tests.support.poll import poll

pytestmark = pytest.mark.usefixtures("own_tmpdir")

TOKEN = "e2e-mcp-token-0001"
KEYS = {
    "claude-desktop": "mcpServers",
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "vscode": "servers",
}


@pytest.fixture
def agent(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> Iterator[AgentProcess]:
    """`ragd run` over one document, with `[mcp] token` set; its HTTP endpoint serving."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "reset.md").write_text("# ERR_CONN_RESET\n\nThe peer closed the socket; retry the request.\n")
    config = tmp_path / "ragd.toml"
    config.write_text(
        api_config_text(fake_openai_server) + f'token = "{TOKEN}"\n'
    )  # [mcp] is its last section
    monkeypatch.setenv("RAGD_CONFIG", str(config))
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as proc:
        poll(lambda: proc.call("status")["mcp"]["url"], what="the MCP endpoint to serve")
        yield proc


def console_script(path: Path) -> Path:
    """ragctl as a venv's console script (what `pip install` writes into .venv/bin/)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom ragctl.main import main\nsys.exit(main())\n")
    path.chmod(0o755)
    return path


def write_config(program: list[str], client: str, file: Path, *extra: str) -> dict[str, Any]:
    """Run `PROGRAM mcp-config CLIENT --write --config-file FILE`; the entry it wrote, read back from FILE."""
    proc = subprocess.run([*program, "mcp-config", client, "--write", "--config-file", str(file), *extra],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"into {file}" in proc.stdout and "to use it" in proc.stdout
    entry: dict[str, Any] = json.loads(file.read_text())[KEYS[client]]["ragd"]
    return entry


def status_over(transport: Any) -> tuple[set[str], Any]:
    """The tools a client lists and its call of `status`."""

    async def main() -> tuple[set[str], Any]:
        async with Client(transport, mode="legacy") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return tools, await client.call_tool("status", {})

    return anyio.run(main)


def over_stdio(entry: dict[str, Any], log: Path) -> tuple[set[str], Any]:
    """What a client does with a stdio entry: start exactly its command, with the SDK's default environment."""
    env = {**(entry.get("env") or {}), "TMPDIR": os.environ["TMPDIR"]}  # the test's own (own_tmpdir)
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
    with log.open("a") as errlog:
        return status_over(stdio_client(params, errlog=errlog))


def over_http(entry: dict[str, Any]) -> tuple[set[str], Any]:
    """What a client does with an HTTP entry: connect to its URL with its headers."""
    http = httpx2.AsyncClient(headers=entry.get("headers") or {}, timeout=30)
    return status_over(streamable_http_client(entry["url"], http_client=http))


def test_each_clients_written_command_starts_a_bridge_that_reaches_the_agent(
    agent: AgentProcess, tmp_path: Path
) -> None:
    script = console_script(tmp_path / "venv" / "bin" / "ragctl")
    runs = [(client, [str(script)]) for client in KEYS] + [
        ("claude-desktop", RAGCTL)
    ]  # and as python -m ragctl
    for client, program in runs:
        file = tmp_path / "clients" / f"{client}-{len(program)}.json"
        entry = write_config(program, client, file)
        assert os.path.isabs(entry["command"]), entry
        assert entry["command"] == (str(script) if program != RAGCTL else sys.executable), entry
        if client in ("vscode", "claude-code"):
            assert entry["type"] == "stdio"
        tools, status = over_stdio(entry, tmp_path / "bridge.log")
        assert tools == set(TOOLS), (client, entry)
        assert not status.is_error, (client, status.content)
        assert status.structured_content["agent"]["pid"] == agent.pid


def test_the_http_entry_carries_the_agents_url_and_token(agent: AgentProcess, tmp_path: Path) -> None:
    url = agent.call("status")["mcp"]["url"]
    for client in ("claude-code", "cursor", "vscode"):
        file = tmp_path / f"{client}.json"
        entry = write_config(RAGCTL, client, file, "--http")
        assert entry["url"] == url and entry["headers"] == {"Authorization": f"Bearer {TOKEN}"}
        assert stat.S_IMODE(file.stat().st_mode) == 0o600  # a new file holding the token
        tools, status = over_http(entry)
        assert tools == set(TOOLS), client
        assert not status.is_error and status.structured_content["agent"]["pid"] == agent.pid
    assert raw_post(url).status_code == 401  # the token is what lets it in
    assert raw_post(url, **entry["headers"]).status_code == 200
    assert TOKEN not in agent.log()
