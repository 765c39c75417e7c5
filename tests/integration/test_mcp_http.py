"""The agent's MCP server over streamable HTTP, with the MCP SDK's real client.

The agent runs in-process, started and stopped by the lifecycle's own steps (tests/support/inproc.py), against the fake OpenAI embeddings server; `ragctl` runs as a real
subprocess on the same control socket.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextResourceContents

from ragctl.protocol import Client as ControlClient
from ragd.config import Config
from ragd.edges.http import HttpEdge
from ragd.edges.lifecycle import Lifecycle
from ragd.mcp import schema
from ragd.mcp.calls import wire
from ragd.mcp.server import McpService
from tests.integration.helpers import copy_fixture
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process
from tests.support.mcp_tools import TOOLS

T = TypeVar("T")
A_MD = "# Network errors\n\nThe peer closed the socket: ERR_CONN_RESET.\n\n## Retry\n\nRetry the request.\n"


@dataclass
class Agent:
    life: Lifecycle
    service: HttpEdge
    root: Path

    @property
    def url(self) -> str:
        assert self.service.url is not None, self.service.error
        return self.service.url

    def ctl(self, verb: str, args: dict[str, Any] | None = None) -> Any:
        with ControlClient(self.life.socket_path, timeout=60) as c:
            return c.call(verb, args)

    def mcp(self, fn: Callable[[Client], Awaitable[T]], *, mode: str = "legacy", headers: dict[str, str] | None = None) -> T:  # fmt: skip
        async def main() -> T:
            async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as http:
                transport = streamable_http_client(self.url, http_client=http)
                async with Client(transport, mode=mode) as client:
                    return await fn(client)

        try:
            return anyio.run(main)
        except BaseExceptionGroup as group:  # the client's task group wraps the error the server answered
            leaf: BaseException = group
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            raise leaf from None


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = copy_fixture(tmp_path)  # written by the ragjson tool: docs/{phone.md, ml.txt, sub/page.html}
    (root / "a.md").write_text(A_MD)
    (tmp_path / "secret.txt").write_text("outside every root\n")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    return root


@contextmanager
def running(root: Path, api: FakeOpenAI, *, wait: bool = True, **mcp: Any) -> Iterator[Agent]:
    emb = {"provider": "openai", "model": "fake-embed-8", "dimension": api.dim, "base_url": api.base_url,
           "api_key": "sk-test-key-123456", "retries": 2, "max_backoff": 0.2}  # fmt: skip
    config = Config.model_validate({"embedding": emb, "mcp": {"port": 0, **mcp}})
    with agent_in_process(config, [root]) as life:
        agent = Agent(life, life.http, root)
        if wait:
            agent.ctl("wait", {"timeout": 60})
        yield agent


async def call(tool: str, args: dict[str, Any], client: Client) -> Any:
    return await client.call_tool(tool, args)


async def read_raw(uri: str, client: Client) -> Any:
    return await client.read_resource(uri)


def text_of(result: Any) -> str:
    return str(result.content[0].text)


def test_initialize_does_not_wait_for_indexing_and_lists_the_tools(kb: Path, fake_openai_server: FakeOpenAI) -> None:  # fmt: skip
    fake_openai_server.delay = 2.0  # every embedding request of the initial indexing takes 2 s
    with running(kb, fake_openai_server, wait=False) as agent:

        async def handshake(c: Client) -> tuple[Any, Any]:
            return await c.list_tools(), await c.list_resource_templates()

        tools, templates = agent.mcp(handshake)  # initialize, tools/list, resources/templates/list
        # answered while the initial indexing still waits for its first embeddings
        assert agent.life.agent.current_state() == "indexing"
        fake_openai_server.delay = 0.0
        assert {t.name for t in tools.tools} == set(TOOLS)
        for tool in tools.tools:
            assert tool.annotations.read_only_hint is (tool.name != "reindex")
            assert tool.annotations.open_world_hint is False
            assert tool.output_schema is not None
        assert {t.uri_template for t in templates.resource_templates} == {
            f"ragd://{k}/{{+path}}" for k in ("dir", "file", "chunks", "orphans")
        }
        shipped = schema.schema()  # what `ragctl mcp` answers without asking the agent
        assert wire("tools/list", tools) == shipped["tools/list"]
        assert wire("resources/templates/list", templates) == shipped["resources/templates/list"]
        agent.ctl("wait", {"timeout": 60})
        status = agent.mcp(lambda c: c.call_tool("status", {}))
        assert status.structured_content["agent"]["state"] == "idle"


def test_search_equals_ragctl_search_json_and_the_stdio_verb(
    kb: Path, fake_openai_server: FakeOpenAI
) -> None:
    with running(kb, fake_openai_server) as agent:
        env = {**os.environ, "RAGD_SOCKET": str(agent.life.socket_path)}
        cli = subprocess.run([sys.executable, "-m", "ragctl", "search", "socket pods 电池", "-k", "4", "--json"],
                             capture_output=True, text=True, env=env, timeout=60, check=True)  # fmt: skip
        expected = json.loads(cli.stdout)["results"]
        assert len(expected) == 4
        args = {"query": "socket pods 电池", "top_k": 4}
        over_http = agent.mcp(lambda c: c.call_tool("search", args))
        assert not over_http.is_error and over_http.structured_content == {"results": expected}
        assert json.loads(text_of(over_http)) == {"results": expected}
        modern = agent.mcp(
            lambda c: c.call_tool("search", args), mode="auto"
        )  # 2026-07-28 per-request protocol
        assert modern.structured_content == {"results": expected}
        assert agent.ctl("mcp_call", {"name": "search", "arguments": args}) == wire("tools/call", over_http)
        q = agent.mcp(lambda c: c.call_tool("query", {"q": "socket pods 电池", "topn": 4}))
        assert json.loads(text_of(q)) == [{"content": r["content"], "source": r["path"], "score": r["score"]}
                                          for r in expected]  # fmt: skip
        bad = agent.mcp(lambda c: c.call_tool("search", {"query": "   "}))
        assert bad.is_error and "the search query is empty" in text_of(bad)


def test_read_document_and_read_chunk(kb: Path, fake_openai_server: FakeOpenAI) -> None:
    with running(kb, fake_openai_server) as agent:
        doc = agent.mcp(lambda c: c.call_tool("read_document", {"path": str(kb / "a.md")})).structured_content
        assert doc["text"] == A_MD.rstrip("\n") and doc["source"] == "file" and doc["total_lines"] == 7
        window = agent.mcp(
            lambda c: c.call_tool("read_document", {"path": "a.md", "start_line": 3, "end_line": 3})
        )
        assert window.structured_content["text"] == "The peer closed the socket: ERR_CONN_RESET."
        html = agent.mcp(
            lambda c: c.call_tool("read_document", {"path": "docs/sub/page.html"})
        ).structured_content
        assert html["source"] == "index" and "Kubernetes pods share a network namespace." in html["text"]
        chunk = agent.mcp(lambda c: c.call_tool("read_chunk", {"path": str(kb / "a.md"), "chunk_index": 0}))
        got = chunk.structured_content
        assert got["chunk_count"] == 1 and got["chunks"][0]["heading_path"] == ["Network errors"]
        assert got["chunks"][0]["start_line"] == 1 and "ERR_CONN_RESET" in got["chunks"][0]["content"]
        missing = agent.mcp(lambda c: c.call_tool("read_chunk", {"path": "a.md", "chunk_index": 5}))
        assert missing.is_error and "has chunks 0 to 0, not 5" in text_of(missing)
        beyond = agent.mcp(lambda c: c.call_tool("read_document", {"path": "a.md", "start_line": 99}))
        assert beyond.is_error and "the document has 7 line(s)" in text_of(beyond)


def read(agent: Agent, uri: str) -> Any:
    content = agent.mcp(lambda c: c.read_resource(uri)).contents[0]
    assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
    return json.loads(content.text)


def test_resources_dir_file_chunks_orphans(kb: Path, fake_openai_server: FakeOpenAI) -> None:
    with running(kb, fake_openai_server) as agent:
        assert read(agent, "ragd://dir/")["roots"][0]["uri"] == f"ragd://dir{kb}"
        listing = read(agent, f"ragd://dir{kb}")
        names = {e["name"]: e for e in listing["entries"]}
        assert names["docs"]["type"] == "dir" and names["a.md"]["state"] == "EMBEDDED"
        assert "link.txt" not in names  # it leads out of the root
        info = read(agent, f"ragd://file{kb}/a.md")
        assert info["state"] == "EMBEDDED" and info["chunks"] == 1 and info["model"] == "fake-embed-8"
        assert info["md5"] == hashlib.md5(A_MD.encode()).hexdigest() and info["indexed"]["chunks"] == 1
        chunks = read(agent, f"ragd://chunks{kb}/docs/phone.md")["chunks"]
        assert "6100mAh" in chunks[0]["content"]
        assert agent.ctl("mcp_read", {"uri": f"ragd://file{kb}/a.md"}) == wire(
            "resources/read", agent.mcp(lambda c: c.read_resource(f"ragd://file{kb}/a.md")))  # fmt: skip
        assert read(agent, f"ragd://orphans{kb}")["orphans"] == []
        agent.ctl("pause")  # the deletion is seen but not processed: the index still holds the file
        (kb / "a.md").unlink()
        assert read(agent, f"ragd://orphans{kb}")["orphans"] == [str(kb / "a.md")]
        assert read(agent, "ragd://orphans/")["orphans"] == [str(kb / "a.md")]
        spaced = kb / "docs" / "my notes #1.md"
        spaced.write_text("# x\n")
        entries = {e["name"]: e for e in read(agent, f"ragd://dir{kb}/docs")["entries"]}
        assert entries[spaced.name]["uri"] == f"ragd://file{kb}/docs/my%20notes%20%231.md"
        assert entries[spaced.name]["state"] == "PENDING"


ESCAPES = ["../secret.txt", "docs/../../secret.txt", "/etc/passwd", "link.txt", "docs/.rag/phone.md.ragjson"]


def test_path_escapes_are_refused_naming_the_roots(kb: Path, fake_openai_server: FakeOpenAI) -> None:
    with running(kb, fake_openai_server) as agent:
        for path in ESCAPES:
            for tool, extra in (("read_document", {}), ("read_chunk", {"chunk_index": 0})):
                result = agent.mcp(partial(call, tool, {"path": path, **extra}))
                assert result.is_error and "path refused" in text_of(result), (tool, path, text_of(result))
                assert str(kb) in text_of(result) or "ignored by ragd" in text_of(result)
        uris = [f"ragd://file{kb}/../secret.txt", f"ragd://file{kb}/docs/%2E%2E/%2E%2E/secret.txt",
                "ragd://file/etc/passwd", f"ragd://chunks{kb}/link.txt", f"ragd://dir{kb}/docs/.rag",
                f"ragd://dir{kb}x", f"ragd://file{kb}/a%00.md"]  # fmt: skip
        for uri in uris:
            with pytest.raises(MCPError, match="path refused"):
                agent.mcp(partial(read_raw, uri))
        with pytest.raises(Exception, match="path refused"):
            agent.ctl("mcp_read", {"uri": "ragd://file/etc/passwd"})


def raw_post(url: str, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(url, json=body, headers={**accept, **headers}, timeout=10)


def test_wrong_origin_or_host_is_refused(kb: Path, fake_openai_server: FakeOpenAI) -> None:
    with running(kb, fake_openai_server, wait=False, allowed_origins=["https://app.example"]) as agent:
        port = agent.url.split(":")[2].split("/")[0]
        assert raw_post(agent.url, Origin="http://evil.example").status_code == 403
        assert raw_post(agent.url, Host=f"evil.example:{port}").status_code == 421
        assert raw_post(agent.url, Origin=f"http://localhost:{port}").status_code == 200
        assert raw_post(agent.url, Origin="https://app.example").status_code == 200
        assert agent.service.status()["requests"] == 4


def test_bearer_token_is_required_when_configured(kb: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("RAGD_TEST_MCP_TOKEN", "s3cret-token")
    with running(kb, fake_openai_server, wait=False, token_env="RAGD_TEST_MCP_TOKEN") as agent:
        assert raw_post(agent.url).status_code == 401
        assert raw_post(agent.url, Authorization="Bearer wrong").status_code == 401
        assert raw_post(agent.url, Authorization="Bearer s3cret-token").status_code == 200
        tools = agent.mcp(lambda c: c.list_tools(), headers={"Authorization": "Bearer s3cret-token"})
        assert {t.name for t in tools.tools} == set(TOOLS)
        assert "s3cret" not in json.dumps(agent.ctl("config", {"action": "check"}))


def test_busy_port_leaves_the_agent_running_and_reports_the_error(kb: Path, fake_openai_server: FakeOpenAI) -> None:  # fmt: skip
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with running(kb, fake_openai_server, port=port) as agent:
            st = agent.service.status()
            assert st["url"] is None and st["enabled"] is True and st["state"] == "failed"
            assert f"cannot listen on 127.0.0.1 port {port}" in st["error"]
            assert agent.ctl("status")["health"]["http"] == {"state": "unavailable", "reason": st["error"],
                                                            "since": agent.ctl("status")["health"]["http"]["since"]}  # fmt: skip
            assert agent.ctl("status")["agent"]["state"] == "idle"
            found = agent.ctl("mcp_call", {"name": "search", "arguments": {"query": "ERR_CONN_RESET"}})
            assert found["structuredContent"]["results"][0]["path"] == str(kb / "a.md")


def test_the_endpoint_is_starting_until_it_is_bound_never_off(
    kb: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Before its port is bound (it is bound after READY), the endpoint says "starting": `ragctl status` printed
    "HTTP off" for seconds on a loaded machine, before the real state."""
    from ragctl import render

    with running(kb, fake_openai_server) as agent:
        assert agent.service.status()["state"] == "serving"
        before = HttpEdge(agent.life.agent, McpService(agent.life.agent)).status()  # one not started yet
        assert (before["state"], before["url"], before["error"]) == ("starting", None, None)
        assert "mcp: HTTP starting" in render.status({"agent": {"state": "starting"}, "mcp": before})


def test_the_mcp_stack_starts_after_what_it_is_told_to_wait_for(
    kb: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A new agent starts its MCP stack once its copy of the model is loaded (`first`): both in one process, the
    stack's import slowed the load that the first note's vectors waited for (docs/benchmarks.md, the first minute)."""
    with running(kb, fake_openai_server) as agent:
        service, order = McpService(agent.life.agent), []
        service.start_in_background(then=lambda: order.append("then"), first=lambda: order.append("first"))
        try:
            assert service.wait_started() == "running"
            assert order == ["first", "then"]
        finally:
            service.stop()
