"""What an MCP session gets beyond single calls, over both transports and both protocol eras, with the SDK's client.

The agent runs in-process (tests/support/inproc.py) against the fake OpenAI embeddings server. `stdio` is the real
`ragctl mcp` subprocess, spawned by the SDK's stdio client and told the agent's socket; `http` is the agent's
streamable HTTP endpoint. `legacy` is the `initialize` handshake (2025-11-25), `modern` the 2026-07-28
per-request era (the SDK discovers it with `server/discover`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp_types import ResourceLink, ServerNotification, TextContent

from ragctl.protocol import Client as ControlClient
from ragd.config import Config
from ragd.edges.lifecycle import Lifecycle
from ragd.mcp.resources import uri
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process
from tests.support.mcp_tools import TOOLS
from tests.support.poll import poll

T = TypeVar("T")
MODES = {"legacy": ("legacy", "2025-11-25"), "modern": ("auto", "2026-07-28")}


@dataclass
class Agent:
    life: Lifecycle
    root: Path
    log: Path

    def ctl(self, verb: str, args: dict[str, Any] | None = None) -> Any:
        with ControlClient(self.life.socket_path, timeout=60) as c:
            return c.call(verb, args)

    @asynccontextmanager
    async def client(self, transport: str, era: str, **kwargs: Any) -> AsyncIterator[Client]:
        mode = MODES[era][0]
        if transport == "http":
            assert self.life.http.url is not None, self.life.http.error
            async with (
                httpx2.AsyncClient(timeout=60) as http,
                Client(
                    streamable_http_client(self.life.http.url, http_client=http), mode=mode, **kwargs
                ) as client,
            ):
                yield client
        else:
            env = {**os.environ, "RAGD_SOCKET": str(self.life.socket_path)}
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "ragctl", "mcp", "-v"], env=env
            )
            with self.log.open("a") as errlog:
                async with Client(stdio_client(params, errlog=errlog), mode=mode, **kwargs) as client:
                    yield client

    def run(self, transport: str, era: str, fn: Callable[[Client], Awaitable[T]], **kwargs: Any) -> T:
        async def main() -> T:
            async with self.client(transport, era, **kwargs) as client:
                assert client.protocol_version == MODES[era][1]
                return await fn(client)

        return anyio.run(main)


@contextmanager
def running(root: Path, api: FakeOpenAI, log: Path) -> Iterator[Agent]:
    emb = {"provider": "openai", "model": "fake-embed-8", "dimension": api.dim, "base_url": api.base_url,
           "api_key": "sk-test-key-123456", "retries": 2, "max_backoff": 0.2}  # fmt: skip
    watch = {"quiet": 0.2, "ceiling": 1.0}
    config = Config.model_validate({"embedding": emb, "mcp": {"port": 0}, "watch": watch})
    with agent_in_process(config, [root]) as life:
        agent = Agent(life, root, log)
        agent.ctl("wait", {"timeout": 60})
        yield agent


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "notes").mkdir(parents=True)
    (root / "a.md").write_text("# Network errors\n\nThe peer closed the socket: ERR_CONN_RESET.\n")
    (root / "notes" / "电池.md").write_text("# 电池\n\n电池容量是 6100mAh。\n", encoding="utf-8")
    return root


@pytest.fixture
def agent(kb: Path, fake_openai_server: FakeOpenAI, tmp_path: Path) -> Iterator[Agent]:
    with running(kb, fake_openai_server, tmp_path / "bridge.log") as agent:
        yield agent


both = pytest.mark.parametrize("transport", ["stdio", "http"])
eras = pytest.mark.parametrize("era", ["legacy", "modern"])
# every transport in every era, asked in turn of one agent by the tests that only read (an agent per pair cost
# its start-up, and its indexing, four times over)
EVERY_WAY = [(transport, era) for transport in ("stdio", "http") for era in ("legacy", "modern")]


# -- tools ----------------------------------------------------------------------------------------------------
def test_every_tool_is_annotated_with_an_output_schema_and_search_links_its_sources(agent: Agent) -> None:
    for transport, era in EVERY_WAY:
        _tools_and_links(agent, transport, era)


def _tools_and_links(agent: Agent, transport: str, era: str) -> None:
    async def session(client: Client) -> tuple[Any, ...]:
        tools = await client.list_tools()  # the client then checks each structured result against its schema
        found = await client.call_tool("search", {"query": "ERR_CONN_RESET socket", "top_k": 5})
        links = [c for c in found.content if isinstance(c, ResourceLink)]
        linked = await client.read_resource(links[0].uri) if links else None
        status = await client.call_tool("status", {})
        return tools, found, links, linked, status, client.server_capabilities

    tools, found, links, linked, status, caps = agent.run(transport, era, session)
    assert caps.resources is not None and caps.resources.subscribe and caps.resources.list_changed
    assert caps.prompts is not None and caps.tools is not None
    assert {t.name for t in tools.tools} == set(TOOLS)
    for tool in tools.tools:
        a = tool.annotations
        assert a is not None and a.open_world_hint is False and a.destructive_hint is False, tool.name
        assert a.read_only_hint is (tool.name != "reindex") and a.idempotent_hint is True, tool.name
        assert tool.output_schema is not None and tool.title and tool.description, tool.name
    assert not found.is_error and found.structured_content is not None
    paths = list(dict.fromkeys(hit["path"] for hit in found.structured_content["results"]))
    assert paths and paths[0] == str(agent.root / "a.md")
    assert [str(link.uri) for link in links] == [u for p in paths for u in (uri("chunks", p), uri("file", p))]
    assert linked is not None and "ERR_CONN_RESET" in linked.contents[0].text
    assert isinstance(found.content[0], TextContent) and "ERR_CONN_RESET" in found.content[0].text
    assert not status.is_error and status.structured_content is not None
    assert set(status.structured_content) == {
        "agent",
        "progress",
        "roots",
        "embedder",
        "parse",
        "history",
        "index",
        "mcp",
        "health",
    }


# -- resources/list -------------------------------------------------------------------------------------------
def test_resources_list_pages_through_every_document(
    kb: Path, fake_openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    for i in range(520):  # more than one page of 500
        (kb / "many" / f"d{i // 100}").mkdir(parents=True, exist_ok=True)
        (kb / "many" / f"d{i // 100}" / f"n{i:03}.txt").write_text(f"note {i}\n")

    async def session(client: Client) -> list[Any]:
        pages = [await client.list_resources()]
        while pages[-1].next_cursor is not None:
            pages.append(await client.list_resources(cursor=pages[-1].next_cursor))
        return pages

    with running(kb, fake_openai_server, tmp_path / "bridge.log") as agent:
        for transport, era in EVERY_WAY:
            pages = agent.run(transport, era, session)
            assert [len(p.resources) for p in pages] == [500, 22], (transport, era)
            uris = [str(r.uri) for p in pages for r in p.resources]
            assert len(set(uris)) == 522 and uri("file", kb / "a.md") in uris, (transport, era)
            assert uri("file", kb / "many" / "d5" / "n519.txt") in uris, (transport, era)
            if era == "modern":  # a cache hint on every page (SEP-2549)
                assert all(p.ttl_ms == 10_000 and p.cache_scope == "private" for p in pages), transport


# -- change announcements -------------------------------------------------------------------------------------
@both
@pytest.mark.filterwarnings(
    "ignore:resources/subscribe is removed"
)  # it is, in 2026-07-28; not in 2025-11-25
def test_a_2025_client_subscribed_to_a_document_hears_that_it_changed(agent: Agent, transport: str) -> None:
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ServerNotification):
            heard.append(message)

    target = uri("file", agent.root / "a.md")

    async def session(client: Client) -> None:
        await client.subscribe_resource(target)
        (agent.root / "a.md").write_text("# Network errors\n\nNow about ECONNREFUSED.\n")
        (agent.root / "new.md").write_text("# New\n\nA new note.\n")
        with anyio.fail_after(30):
            while not {_method(m) for m in heard} >= {"notifications/resources/updated",
                                                      "notifications/resources/list_changed"}:  # fmt: skip
                await anyio.sleep(0.05)

    agent.run(transport, "legacy", session, message_handler=on_message)
    updated = {m.params.uri for m in heard if _method(m) == "notifications/resources/updated"}
    assert target in {str(u) for u in updated}  # only what it subscribed to
    assert {str(u) for u in updated} <= {target}


@both
def test_a_2026_client_listening_hears_changes_and_list_changes(agent: Agent, transport: str) -> None:
    target = uri("file", agent.root / "a.md")

    async def session(client: Client) -> list[Any]:
        events: list[Any] = []
        async with client.listen(resource_subscriptions=[target], resources_list_changed=True) as sub:
            (agent.root / "a.md").write_text("# Network errors\n\nNow about ETIMEDOUT.\n")
            (agent.root / "newer.md").write_text("# Newer\n\nAnother note.\n")
            with anyio.fail_after(30):
                async for event in sub:
                    events.append(event)
                    kinds = {type(e) for e in events}
                    if {ResourceUpdated, ResourcesListChanged} <= kinds:
                        break
        return events

    events = agent.run(transport, "modern", session)
    assert {e.uri for e in events if isinstance(e, ResourceUpdated)} == {target}


# -- long calls -----------------------------------------------------------------------------------------------
@both
@eras
def test_a_wait_reports_progress_and_its_cancellation_stops_it_in_the_agent(
    agent: Agent, fake_openai_server: FakeOpenAI, transport: str, era: str
) -> None:
    fake_openai_server.hold_next(1)  # the agent stays busy until released
    (agent.root / "held.md").write_text("# Held\n\nWaiting for its vectors.\n")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def session(client: Client) -> tuple[int, int, bool]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: client.call_tool("wait_until_indexed", {"timeout_s": 120},
                                                   progress_callback=on_progress))  # fmt: skip
            with anyio.fail_after(30):
                while len(progress) < 2:
                    await anyio.sleep(0.05)
            running = agent.ctl("status")["mcp"]["calls_running"]
            tg.cancel_scope.cancel()  # the client gives up: notifications/cancelled
        with anyio.fail_after(30):
            while agent.ctl("status")["mcp"]["calls_running"]:
                await anyio.sleep(0.05)
        still_busy = agent.ctl("status")["agent"]["state"] != "idle"
        return running, len(progress), still_busy

    try:
        running, notes, still_busy = agent.run(transport, era, session)
    finally:
        fake_openai_server.release()
    assert running == 1 and notes >= 2
    assert still_busy, "the wait stopped because it was cancelled, not because the agent became idle"
    values = [v for v, _, _ in progress]
    assert values == sorted(values) and all(m for _, _, m in progress)
    agent.ctl("wait", {"timeout": 60})


def test_a_session_closed_with_a_call_running_drops_the_call(
    agent: Agent, fake_openai_server: FakeOpenAI
) -> None:
    """A `ragctl mcp` killed (SIGKILL: it cancels nothing) while a wait ran for its client: the agent stops the call
    as soon as the session's connection closes, instead of waiting on until its timeout for no one (a guard: the
    bridge relies on this when it is gone, beside the cancellations it sends)."""
    fake_openai_server.hold_next(1)  # the agent stays busy until released
    (agent.root / "held.md").write_text("# Held\n\nWaiting for its vectors.\n")
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "wait_until_indexed", "arguments": {"timeout_s": 600}}}]  # fmt: skip
    try:
        client = ControlClient(agent.life.socket_path, timeout=60)
        client.call("mcp_session", {})
        conn, _ = client.detach()
        conn.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        poll(lambda: agent.ctl("status")["mcp"]["calls_running"] == 1, 30, what="the wait in the agent")
        conn.close()  # no notifications/cancelled: the connection just ends
        poll(lambda: agent.ctl("status")["mcp"]["calls_running"] == 0, 5, what="the wait to be dropped")
        assert (
            agent.ctl("status")["agent"]["state"] != "idle"
        )  # dropped, not ended by the agent becoming idle
    finally:
        fake_openai_server.release()
    agent.ctl("wait", {"timeout": 60})


@both
def test_reindex_runs_the_jobs_and_reports_progress(agent: Agent, transport: str) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def session(client: Client) -> Any:
        return await client.call_tool("reindex", {"force": True}, progress_callback=on_progress)

    result = agent.run(transport, "legacy", session)
    assert not result.is_error, result.content
    assert result.structured_content is not None and result.structured_content["scheduled"] == 2


# -- recent changes and prompts -------------------------------------------------------------------------------
def test_recent_changes_and_the_prompts(agent: Agent) -> None:
    (agent.root / "notes" / "电池.md").unlink()
    poll(
        lambda: agent.ctl("status")["agent"]["state"] == "idle" and _no_entry(agent.root / "notes"),
        timeout=30,
    )
    for transport, era in EVERY_WAY:
        _changes_and_prompts(agent, transport, era)


def _changes_and_prompts(agent: Agent, transport: str, era: str) -> None:

    async def session(client: Client) -> tuple[Any, ...]:
        changes = await client.call_tool("recent_changes", {"since_hours": 1})
        prompts = await client.list_prompts()
        search = await client.get_prompt("search_documents", {"topic": "电池容量"})
        summary = await client.get_prompt("summarise_changes", {"hours": "2"})
        return changes, prompts, search, summary

    changes, prompts, search, summary = agent.run(transport, era, session)
    assert changes.structured_content is not None
    got = {(c["rel_path"], c["change"]) for c in changes.structured_content["changes"]}
    assert got == {("a.md", "created"), ("notes/电池.md", "deleted")}
    assert all(c["document_id"] for c in changes.structured_content["changes"])
    assert {p.name for p in prompts.prompts} == {"search_documents", "summarise_changes"}
    assert "电池容量" in search.messages[0].content.text
    text = summary.messages[0].content.text
    assert (
        f"deleted: {agent.root / 'notes' / '电池.md'}" in text and f"created: {agent.root / 'a.md'}" in text
    )


def _no_entry(directory: Path) -> bool:
    return not list((directory / ".rag").glob("*.ragjson"))


def _method(message: Any) -> str:
    return str(getattr(message, "method", ""))
