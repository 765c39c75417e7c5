"""`ragctl mcp`: the stdio MCP bridge, driven in memory.

The bridge reads lines given to `Bridge.feed` (or `serve`) and writes to `Out`, a thread-safe line collector.
The agent is `FakeAgent`, a thread that speaks the control protocol (docs/protocol.md) on a unix socket in
tmp_path — a double of the other process: it accepts `mcp_session` and then answers JSON-RPC with the test's
functions. Answers are checked against the real MCP SDK's types (the SDK the e2e tests' client uses); the real
agent behind a real bridge is tests/integration/test_mcp_session.py and tests/e2e/test_mcp_stdio.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import mcp_types
import pytest

import ragctl
from ragctl import protocol
from ragctl.main import build_parser
from ragctl.mcp_bridge import Bridge
from ragctl.mcp_link import AgentLink
from ragctl.mcp_local import SCHEMA_FILE, Schema, load_schema
from tests.support.fake_agent import FakeAgentServer
from tests.support.mcp_tools import TOOLS
from tests.support.poll import poll

Handler = Callable[[dict[str, Any]], Any]
TOOL_RESULT = {
    "content": [{"type": "text", "text": '{"results": []}'}],
    "structuredContent": {"results": [{"path": "/kb/文档.md", "score": 0.5, "content": "a\nb"}]},
    "isError": False,
}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
NOT_RUNNING = (
    "the ragd agent is not running (no agent is listening on {}). "
    "Start it with `ragd run` or `systemctl --user start ragd`, then try again."
)


class FakeAgent(FakeAgentServer):
    """Turns a connection into an MCP session on `mcp_session` (or refuses it with `refuse`), then answers each
    JSON-RPC request with `handlers[method](msg)` (a result, or ConnectionAbortedError: the session is closed),
    and records every message it got (`received`). `ping` and `initialize` are answered unless handled."""

    def __init__(self, path: Path, handlers: dict[str, Handler] | None = None,
                 refuse: protocol.RemoteError | None = None) -> None:  # fmt: skip
        self.handlers = {"initialize": lambda msg: {"protocolVersion": "2025-11-25", "capabilities": {},
                                                    "serverInfo": {"name": "ragd", "version": "agent"}},
                         "ping": lambda msg: {}, **(handlers or {})}  # fmt: skip
        self.refuse = refuse
        self.received: list[dict[str, Any]] = []
        self.answered: list[Any] = []  # the ids whose answers were sent
        self.sessions = 0
        self._conns: list[socket.socket] = []
        super().__init__(path)

    def answer(self, conn: socket.socket, rid: Any, verb: str, args: dict[str, Any]) -> bool:
        assert verb == "mcp_session", verb
        if self.refuse is not None:
            err = self.refuse
            conn.sendall(protocol.encode(protocol.reply_error(rid, err.code, err.message, err.hint)))
            return True
        conn.sendall(protocol.encode(protocol.reply_ok(rid, {"protocol": "mcp"})))
        self.sessions += 1
        self._conns.append(conn)
        reader = protocol.LineReader(conn)
        lock = threading.Lock()
        while (line := reader.read_line()) is not None:
            msg = json.loads(line)
            self.received.append(msg)
            if "id" in msg and "method" in msg:
                threading.Thread(target=self._reply, args=(conn, lock, msg), daemon=True).start()
        return False

    def _reply(self, conn: socket.socket, lock: threading.Lock, msg: dict[str, Any]) -> None:
        handler = self.handlers.get(msg["method"])
        try:
            if handler is None:
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"],
                                         "error": {"code": -32601, "message": "Method not found"}}  # fmt: skip
            else:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handler(msg)}
        except ConnectionAbortedError:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            return
        with lock, contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
            self.answered.append(msg["id"])

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """A notification from the agent to the client, on every open session."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.sendall(
                    json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode() + b"\n"
                )

    def methods(self) -> list[str]:
        return [m.get("method", "<response>") for m in self.received]


class Out:
    """The client's end of the bridge's stdout: whole lines, parsed, waited for."""

    def __init__(self) -> None:
        self.raw = bytearray()
        self._cond = threading.Condition()

    def write(self, data: bytes) -> int:
        with self._cond:
            self.raw += data
            self._cond.notify_all()
        return len(data)

    def flush(self) -> None:
        pass

    def messages(self) -> list[Any]:
        with self._cond:
            assert self.raw.endswith(b"\n") or not self.raw
            return [json.loads(line) for line in self.raw.splitlines()]

    def wait(self, rid: Any, timeout: float = 10.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((m for m in self.messages() if isinstance(m, dict) and m.get("id") == rid), None)

        with self._cond:
            assert self._cond.wait_for(found, timeout), f"no answer to request {rid!r}: {self.messages()}"
        return cast(dict[str, Any], found())


class Session:
    def __init__(self, sock: Path, schema: Callable[[], Schema] = load_schema) -> None:
        self.out = Out()
        self.bridge = Bridge(AgentLink(sock, 5.0), cast(IO[bytes], self.out), schema)
        self._next = 0

    def send(self, msg: Any) -> None:
        self.bridge.feed(json.dumps(msg, ensure_ascii=False).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any] | None = None, rid: Any = None) -> Any:
        """Send a request and return its answer's `result` (or the whole answer when it is an error)."""
        if rid is None:
            self._next += 1
            rid = self._next
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})})
        reply = self.out.wait(rid)
        return reply.get("result", reply)


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "control.sock"


@pytest.fixture
def agent(sock: Path) -> Iterator[FakeAgent]:
    fake = FakeAgent(
        sock, {"tools/call": lambda msg: TOOL_RESULT, "resources/read": lambda msg: {"contents": []}}
    )
    yield fake
    fake.close()


# -- answered by the bridge itself, without an agent -------------------------------------------------------------
@pytest.mark.parametrize(
    ("asked", "expected"),
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"),
     ("2026-07-28", "2025-11-25"), ("1999-01-01", "2025-11-25"), (None, "2025-11-25")],
)  # fmt: skip
def test_initialize_negotiates_a_version_the_sdk_accepts(
    sock: Path, asked: str | None, expected: str
) -> None:
    params = {"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    result = Session(sock).request("initialize", {**params, **({"protocolVersion": asked} if asked else {})})
    init = mcp_types.InitializeResult.model_validate(result)
    assert init.protocol_version == expected
    assert (init.server_info.name, init.server_info.version) == ("ragd", ragctl.__version__)
    assert init.capabilities.resources is not None and init.capabilities.resources.subscribe is True
    assert init.capabilities.prompts is not None and init.capabilities.tools is not None
    assert init.instructions and "search" in init.instructions


def test_ping_notifications_and_responses(sock: Path) -> None:
    s = Session(sock)
    assert s.request("ping") == {}
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    s.send({"jsonrpc": "2.0", "id": 5, "result": {}})  # a response to nothing: ignored
    s.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": [1]})
    assert s.request("resources/subscribe", {"uri": "ragd://dir/kb"}) == {}  # passed on once an agent is up
    assert s.request("ping", rid="last") == {}
    assert [m["id"] for m in s.out.messages()] == [1, 2, "last"]


def test_lists_are_the_schema_files(sock: Path) -> None:
    s = Session(sock)
    schema = json.loads(SCHEMA_FILE.read_text())
    tools = s.request("tools/list")
    assert tools == schema["tools/list"]
    listed = mcp_types.ListToolsResult.model_validate(tools).tools
    assert [t.name for t in listed] == list(TOOLS)
    search = next(t for t in listed if t.name == "search").input_schema
    assert set(search["properties"]) == {"query", "top_k", "path_prefix", "mode", "files", "reach", "where", "scope",
                                           "explain"}  # fmt: skip
    templates = s.request("resources/templates/list")
    assert templates == schema["resources/templates/list"]
    assert mcp_types.ListResourceTemplatesResult.model_validate(templates).resource_templates
    assert s.request("resources/list") == {"resources": []}
    prompts = mcp_types.ListPromptsResult.model_validate(s.request("prompts/list")).prompts
    assert {p.name for p in prompts} == {"search_documents", "summarise_changes"}


def test_a_2026_client_is_answered_in_its_era_without_an_agent(sock: Path) -> None:
    """The per-request era: `server/discover`, the lists, and tool calls, each stamped with the server's
    identity and of the shape the SDK's 2026-07-28 types require; no handshake, no ping."""
    from mcp_types.methods import serialize_server_result

    s = Session(sock)
    meta = {"_meta": ENVELOPE}
    discover = s.request("server/discover", meta)
    assert discover["supportedVersions"] == ["2026-07-28"]
    for method, params in [("server/discover", {}), ("tools/list", {}), ("prompts/list", {}),
                           ("resources/list", {}), ("tools/call", {"name": "search"})]:  # fmt: skip
        result = s.request(method, {**params, **meta})
        assert serialize_server_result(method, "2026-07-28", result), method
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "ragd", method
    call = s.request("tools/call", {"name": "search", **meta})
    assert call["isError"] and call["resultType"] == "complete"
    assert s.request("ping", meta)["error"]["code"] == -32601


def test_the_short_schema_form_and_a_broken_schema_file(sock: Path, tmp_path: Path) -> None:
    short = tmp_path / "short.json"
    tool = {"name": "search", "inputSchema": {"type": "object"}}
    short.write_text(json.dumps({"tools": [tool], "resourceTemplates": []}))
    s = Session(sock, lambda: load_schema(short))
    assert s.request("tools/list") == {"tools": [tool]}
    assert s.request("resources/templates/list") == {"resourceTemplates": []}
    assert s.request("prompts/list") == {"prompts": []}
    assert s.request("initialize", {"protocolVersion": "2025-03-26"})["protocolVersion"] == "2025-03-26"
    short.write_text('{"tools": [{"title": "no name"}]}')
    broken = Session(sock, lambda: load_schema(short))
    error = broken.request("tools/list")["error"]
    assert error["code"] == -32603 and "Reinstall ragd." in error["message"]
    init = broken.request("initialize", {"protocolVersion": "2025-06-18"})  # initialize works all the same
    assert mcp_types.InitializeResult.model_validate(init).protocol_version == "2025-06-18"


def test_without_an_agent_tools_fail_with_how_to_start_it(sock: Path) -> None:
    s = Session(sock)
    assert s.request("initialize", INIT)["protocolVersion"] == "2025-11-25"
    assert len(s.request("tools/list")["tools"]) == len(TOOLS)
    result = mcp_types.CallToolResult.model_validate(
        s.request("tools/call", {"name": "search", "arguments": {"query": "x"}})
    )
    assert result.is_error
    assert [c.text for c in result.content if isinstance(c, mcp_types.TextContent)] == [
        NOT_RUNNING.format(sock)
    ]
    for method, params in [("resources/read", {"uri": "ragd://dir/"}), ("prompts/get", {"name": "x"})]:
        assert s.request(method, params)["error"] == {"code": -32603, "message": NOT_RUNNING.format(sock)}


# -- through the agent's session ---------------------------------------------------------------------------------
def test_every_message_goes_to_the_agent_and_its_answers_and_notifications_come_back(
    sock: Path, agent: FakeAgent
) -> None:
    s = Session(sock)
    assert s.request("initialize", INIT)["serverInfo"]["version"] == "agent"  # the agent's, not the bridge's
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    args = {"query": "发票 invoice", "top_k": 3, "path_prefix": None}
    assert s.request("tools/call", {"name": "search", "arguments": args}) == TOOL_RESULT
    assert s.request("resources/read", {"uri": "ragd://dir/"}) == {"contents": []}
    assert s.request("no/such/method")["error"]["code"] == -32601  # the agent says so, not the bridge
    agent.notify("notifications/resources/list_changed", {})
    poll(lambda: any(m.get("method") == "notifications/resources/list_changed" for m in s.out.messages()),
         timeout=10, what="the agent's notification")  # fmt: skip
    assert agent.methods() == ["initialize", "notifications/initialized", "tools/call", "resources/read",
                               "no/such/method"]  # fmt: skip
    assert agent.received[2]["params"] == {"name": "search", "arguments": args}
    assert agent.sessions == 1


@pytest.mark.parametrize(
    ("refusal", "text"),
    [
        (protocol.RemoteError("unavailable", "the agent's MCP server is not running", "try again in a moment"),
         "the agent's MCP server is not running. Try again in a moment."),
        (protocol.RemoteError("unknown_verb", "unknown verb 'mcp_session'"),
         f"this ragd agent cannot serve MCP sessions (unknown verb 'mcp_session'). Update it to ragd "
         f"{ragctl.__version__} (the version of this ragctl) and restart it."),
    ],
)  # fmt: skip
def test_an_agent_that_refuses_a_session_is_told_in_tool_errors(
    sock: Path, refusal: protocol.RemoteError, text: str
) -> None:
    fake = FakeAgent(sock, refuse=refusal)
    try:
        result = Session(sock).request("tools/call", {"name": "search", "arguments": {"query": "x"}})
    finally:
        fake.close()
    assert result["isError"] is True and result["content"][0]["text"] == text


def test_a_call_running_when_the_agent_goes_away_is_answered_and_the_next_session_is_brought_up_to_date(
    sock: Path,
) -> None:
    first = threading.Event()

    def hang_up_once(msg: dict[str, Any]) -> Any:
        if not first.is_set():
            first.set()
            raise ConnectionAbortedError
        return TOOL_RESULT

    fake = FakeAgent(sock, {"tools/call": hang_up_once, "resources/subscribe": lambda msg: {}})
    try:
        s = Session(sock)
        assert s.request("initialize", INIT)["serverInfo"]["name"] == "ragd"
        s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert s.request("resources/subscribe", {"uri": "ragd://file/kb/a.md"}) == {}
        gone = s.request("tools/call", {"name": "search", "arguments": {"query": "x"}})
        assert gone["isError"] and "went away" in gone["content"][0]["text"]
        assert s.request("tools/call", {"name": "search", "arguments": {"query": "y"}}) == TOOL_RESULT
    finally:
        fake.close()
    assert fake.sessions == 2
    second = fake.methods()[4:]  # the new session: told what the client told the first one, then the call
    assert second == ["initialize", "notifications/initialized", "resources/subscribe", "tools/call"]
    assert fake.received[4]["params"] == INIT and str(fake.received[4]["id"]).startswith("ragctl-replay-")
    ids = [m.get("id") for m in s.out.messages()]
    assert not [i for i in ids if str(i).startswith("ragctl-replay-")]  # the replays' answers stayed inside


def test_an_agent_started_after_the_client_is_used_from_then_on(sock: Path) -> None:
    s = Session(sock)
    assert s.request("initialize", INIT)["serverInfo"]["version"] == ragctl.__version__  # answered here
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert s.request("tools/call", {"name": "search"})["isError"]
    fake = FakeAgent(sock, {"tools/call": lambda msg: TOOL_RESULT})
    try:
        assert s.request("tools/call", {"name": "search"}) == TOOL_RESULT
    finally:
        fake.close()
    assert fake.methods() == ["initialize", "notifications/initialized", "tools/call"]


def test_a_batch_is_answered_with_one_array(sock: Path, agent: FakeAgent) -> None:
    s = Session(sock)
    s.send([{"jsonrpc": "2.0", "id": "a", "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "status"}},
            {"jsonrpc": "2.0", "id": "c", "method": "nope"}])  # fmt: skip
    poll(s.out.messages, timeout=10, what="the answer to the batch")
    [batch] = s.out.messages()
    assert sorted((r["id"], "result" in r) for r in batch) == [("a", True), ("b", True), ("c", False)]
    assert next(r for r in batch if r["id"] == "b")["result"] == TOOL_RESULT


# -- concurrency, cancellation, end of input ---------------------------------------------------------------------
def _slow(release: threading.Event) -> Handler:
    def handler(msg: dict[str, Any]) -> Any:
        assert release.wait(10)
        return {**TOOL_RESULT, "structuredContent": msg["params"]}

    return handler


def test_slow_calls_run_side_by_side_and_never_hold_up_ping(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"tools/call": _slow(release)})
    try:
        s = Session(sock)
        for rid in (1, 2):
            s.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "search"}})
        poll(
            lambda: fake.methods().count("tools/call") == 2, timeout=10, what="both calls to reach the agent"
        )
        assert s.request("ping", rid=3) == {}
        assert [m["id"] for m in s.out.messages()] == [3]
        release.set()
        assert s.out.wait(1)["result"]["isError"] is False and s.out.wait(2)["result"]["isError"] is False
    finally:
        release.set()
        fake.close()


def test_a_cancelled_call_reaches_the_agent_and_its_late_answer_is_not_passed_on(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"tools/call": _slow(release)})
    s = Session(sock)
    try:
        s.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "search"}})
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})
        poll(lambda: "notifications/cancelled" in fake.methods(), timeout=10, what="the cancellation")
        release.set()
        poll(lambda: "slow" in fake.answered, timeout=10, what="the agent's late answer")
        assert s.request("ping", rid="after") == {}
    finally:
        release.set()
        fake.close()
    assert [m["id"] for m in s.out.messages()] == ["after"]


def test_a_cancelled_call_does_not_hold_up_the_end_of_input(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"tools/call": _slow(release)})
    s = Session(sock)
    call = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "search"}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}}
    try:
        assert s.bridge.serve([json.dumps(call).encode(), json.dumps(cancel).encode()]) == 0
        assert not release.is_set()  # returned while the call was still running in the agent
    finally:
        release.set()
        fake.close()
    assert s.out.messages() == []


def test_the_end_of_input_waits_for_running_calls(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"tools/call": _slow(release)})

    def release_when_called() -> None:
        poll(lambda: "tools/call" in fake.methods(), timeout=10, what="the call to reach the agent")
        release.set()

    threading.Thread(target=release_when_called, daemon=True).start()
    s = Session(sock)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"q": 1}},
    }
    try:
        assert s.bridge.serve(iter([json.dumps(call).encode() + b"\n"])) == 0
    finally:
        release.set()
        fake.close()
    [reply] = s.out.messages()
    assert reply["result"]["structuredContent"] == {"name": "search", "arguments": {"q": 1}}


def test_every_call_running_at_the_end_of_input_is_answered(sock: Path) -> None:
    big = {**TOOL_RESULT, "structuredContent": {"results": [{"content": "长文 long text " * 20000}]}}
    fake = FakeAgent(sock, {"tools/call": lambda msg: big})  # answers that take a while to send
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads switch often: the end of input must still wait for every answer
    try:
        for _ in range(10):
            s = Session(sock)
            calls = [
                {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "x"}} for i in range(4)
            ]
            assert s.bridge.serve(json.dumps(c).encode() for c in calls) == 0
            assert sorted(m["id"] for m in s.out.messages()) == list(range(4))
    finally:
        sys.setswitchinterval(interval)
        fake.close()


def _cancelled(fake: FakeAgent) -> list[Any]:
    """The request ids the agent was told were cancelled."""
    return [m["params"]["requestId"] for m in fake.received if m.get("method") == "notifications/cancelled"]


def test_a_client_gone_cancels_its_running_calls_in_the_agent(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"tools/call": _slow(release)})
    s = Session(sock)
    try:
        for rid in ("slow", 7):
            s.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {"name": "wait_until_indexed"},
                }
            )
        poll(lambda: fake.methods().count("tools/call") == 2, timeout=10, what="the calls to reach the agent")
        assert s.bridge.abandon("the MCP client is gone") == 2
        poll(
            lambda: sorted(map(str, _cancelled(fake))) == ["7", "slow"], timeout=10, what="the cancellations"
        )
        assert {
            m["params"]["reason"] for m in fake.received if "params" in m and "reason" in m["params"]
        } == {"the MCP client is gone"}
        release.set()
    finally:
        release.set()
        fake.close()
    assert s.out.messages() == []  # nothing more is written for a client that is gone


@pytest.mark.parametrize("how", ["stdout closed", "SIGTERM", "SIGTERM burst"])
def test_the_bridge_exits_at_once_when_its_client_is_gone(sock: Path, how: str) -> None:
    """Its stdout with no reader left (the client died; its stdin may stay open in another process), or SIGTERM
    (as SDK clients stop their servers): the calls still running are cancelled in the agent and the bridge exits,
    instead of waiting for them. A burst of SIGTERM too: a handler that set an Event ran again inside itself, on the
    Event's lock, and hung or died of a RecursionError."""
    release = threading.Event()
    fake = FakeAgent(sock, {"tools/call": _slow(release)})
    proc = subprocess.Popen([sys.executable, "-m", "ragctl", "mcp", "--socket", str(sock)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}\n')
        proc.stdin.flush()
        poll(lambda: "tools/call" in fake.methods(), timeout=10, what="the call to reach the agent")
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        elif how == "SIGTERM burst":
            end = time.monotonic() + 2.0
            while time.monotonic() < end and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        else:
            proc.stdout.close()
        assert proc.wait(10) == 0
        poll(lambda: _cancelled(fake) == [1], timeout=10, what="the cancellation")
    finally:
        release.set()
        proc.kill()
        proc.stdin.close()
        fake.close()


# -- malformed input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "rid", "code"),
    [
        (b"not json", None, -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', None, -32700),
        (b"\xff\xfe{}", None, -32700),
        (b"[]", None, -32600),
        (b"42", None, -32600),
        (b'{"jsonrpc": "2.0", "id": 1}', 1, -32600),
        (b'{"jsonrpc": "1.0", "id": 2, "method": "ping"}', 2, -32600),
        (b'{"id": 3, "method": "ping"}', 3, -32600),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None, -32600),
        (b'{"jsonrpc": "2.0", "id": 4, "method": 7}', 4, -32600),
        (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/get"}', 5, -32601),
        (b'{"jsonrpc": "2.0", "id": 6, "method": "server/discover", "params": {}}', 6, -32601),
        (b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": [1]}', 7, -32602),
        (b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"arguments": {}}}', 8, -32602),
    ],
)  # fmt: skip
def test_malformed_input_is_answered_and_the_session_goes_on(
    sock: Path, line: bytes, rid: Any, code: int
) -> None:
    s = Session(sock)
    s.bridge.feed(line + b"\n")
    error = s.out.wait(rid)
    assert error["jsonrpc"] == "2.0" and error["error"]["code"] == code and error["error"]["message"]
    assert s.request("ping", rid="after") == {}
    s.bridge.feed(b"\n")
    s.bridge.feed(b"   \r\n")  # blank lines are skipped
    assert len(s.out.messages()) == 2


# -- the process -------------------------------------------------------------------------------------------------
def test_stray_output_goes_to_stderr_and_protocol_lines_to_stdout() -> None:
    code = (
        "import os, sys; from ragctl.mcp_stdio import claim_stdout; out, restore = claim_stdout(); "
        "print('stray print'); os.write(1, b'stray fd write\\n'); sys.stdout.flush(); "
        "out.write(b'{\"jsonrpc\": \"2.0\"}\\n'); out.flush(); restore(); print('after')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert proc.stdout == b'{"jsonrpc": "2.0"}\nafter\n'
    assert proc.stderr == b"stray print\nstray fd write\n"


def test_the_mcp_verb() -> None:
    ns = build_parser().parse_args(["mcp"])
    assert (ns.command, ns.json, ns.verbose, ns.socket) == ("mcp", False, False, None)
    ns = build_parser().parse_args(["--timeout", "2", "mcp", "--socket", "/s.sock", "-v"])
    assert (ns.socket, ns.verbose, ns.io_timeout) == (Path("/s.sock"), True, 2.0)
