"""`ragctl mcp`: the stdio MCP bridge, driven in memory.

The bridge reads lines given to `Bridge.feed` (or `serve`) and writes to `Out`, a thread-safe line collector.
The agent is `FakeAgent`, a thread that speaks the control protocol (docs/protocol.md) on a unix socket in
tmp_path — a double of the other process — and answers `mcp_call` / `mcp_read` with the test's functions.
Answers are checked against the real MCP SDK's types (the SDK the e2e test's client uses).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import mcp_types
import pytest

import ragctl
from ragctl import protocol
from ragctl.main import build_parser
from ragctl.mcp_bridge import SCHEMA_FILE, AgentLink, Bridge, Schema, load_schema
from tests.support.fake_agent import FakeAgentServer
from tests.support.poll import poll

Handler = Callable[[dict[str, Any]], Any]
TOOL_RESULT = {
    "content": [{"type": "text", "text": '{"results": []}'}],
    "structuredContent": {"results": [{"path": "/kb/文档.md", "score": 0.5, "content": "a\nb"}]},
    "isError": False,
}
NOT_RUNNING = (
    "the ragd agent is not running (no agent is listening on {}). "
    "Start it with `ragd run` or `systemctl --user start ragd`, then try again."
)


class FakeAgent(FakeAgentServer):
    """Answers each request with `handlers[verb](args)`; a handler may raise RemoteError (an error reply) or
    ConnectionAbortedError (the connection is closed without a reply)."""

    def __init__(self, path: Path, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        super().__init__(path)

    def answer(self, conn: socket.socket, rid: Any, verb: str, args: dict[str, Any]) -> bool:
        try:
            reply = protocol.reply_ok(rid, self.handlers[verb](args))
        except protocol.RemoteError as err:
            reply = protocol.reply_error(rid, err.code, err.message, err.hint)
        except ConnectionAbortedError:
            return False
        conn.sendall(protocol.encode(reply))
        return True


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
        self.bridge = Bridge(AgentLink(sock, 5.0, 10.0), cast(IO[bytes], self.out), schema)
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
    fake = FakeAgent(sock, {"mcp_call": lambda args: TOOL_RESULT, "mcp_read": lambda args: {"contents": []}})
    yield fake
    fake.close()


# -- answered by the bridge itself -------------------------------------------------------------------------------
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
    assert init.capabilities.tools is not None and init.capabilities.resources is not None
    assert init.instructions and "search" in init.instructions


def test_ping_notifications_and_responses(sock: Path) -> None:
    s = Session(sock)
    assert s.request("ping") == {}
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    s.send({"jsonrpc": "2.0", "id": 5, "result": {}})  # a response to nothing: ignored
    s.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": [1]})
    assert s.request("ping", rid="last") == {}
    assert [m["id"] for m in s.out.messages()] == [1, "last"]


def test_lists_are_the_schema_files(sock: Path) -> None:
    s = Session(sock)
    schema = json.loads(SCHEMA_FILE.read_text())
    tools = s.request("tools/list")
    assert tools == schema["tools/list"]
    listed = mcp_types.ListToolsResult.model_validate(tools).tools
    assert [t.name for t in listed] == ["search", "query", "read_document", "read_chunk", "status"]
    assert all(t.annotations and t.annotations.read_only_hint for t in listed)
    search = next(t for t in listed if t.name == "search").input_schema
    assert set(search["properties"]) == {"query", "top_k", "path_prefix", "mode"}
    templates = s.request("resources/templates/list")
    assert templates == schema["resources/templates/list"]
    assert mcp_types.ListResourceTemplatesResult.model_validate(templates).resource_templates
    assert s.request("resources/list") == {"resources": []}
    assert s.request("prompts/list") == {"prompts": []}


def test_the_short_schema_form_and_a_broken_schema_file(sock: Path, tmp_path: Path) -> None:
    short = tmp_path / "short.json"
    tool = {"name": "search", "inputSchema": {"type": "object"}}
    short.write_text(json.dumps({"tools": [tool], "resourceTemplates": []}))
    s = Session(sock, lambda: load_schema(short))
    assert s.request("tools/list") == {"tools": [tool]}
    assert s.request("resources/templates/list") == {"resourceTemplates": []}
    assert s.request("initialize", {"protocolVersion": "2025-03-26"})["protocolVersion"] == "2025-03-26"
    short.write_text('{"tools": [{"title": "no name"}]}')
    broken = Session(sock, lambda: load_schema(short))
    error = broken.request("tools/list")["error"]
    assert error["code"] == -32603 and "Reinstall ragd." in error["message"]
    init = broken.request("initialize", {"protocolVersion": "2025-06-18"})  # initialize works all the same
    assert mcp_types.InitializeResult.model_validate(init).protocol_version == "2025-06-18"


# -- forwarded to the agent --------------------------------------------------------------------------------------
def test_a_tool_call_is_forwarded_and_its_result_passed_through(sock: Path, agent: FakeAgent) -> None:
    s = Session(sock)
    args = {"query": "发票 invoice", "top_k": 3, "path_prefix": None}
    assert s.request("tools/call", {"name": "search", "arguments": args}) == TOOL_RESULT
    assert s.request("tools/call", {"name": "status"}) == TOOL_RESULT
    assert agent.requests == [("mcp_call", {"name": "search", "arguments": args}),
                              ("mcp_call", {"name": "status", "arguments": {}})]  # fmt: skip
    assert s.request("resources/read", {"uri": "ragd://dir/"}) == {"contents": []}
    assert agent.requests[-1] == ("mcp_read", {"uri": "ragd://dir/"})


def test_without_an_agent_tools_fail_with_how_to_start_it(sock: Path) -> None:
    s = Session(sock)
    assert s.request("initialize", {"protocolVersion": "2025-11-25"})["protocolVersion"] == "2025-11-25"
    assert len(s.request("tools/list")["tools"]) == 5
    result = mcp_types.CallToolResult.model_validate(
        s.request("tools/call", {"name": "search", "arguments": {"query": "x"}})
    )
    assert result.is_error
    assert [c.text for c in result.content if isinstance(c, mcp_types.TextContent)] == [
        NOT_RUNNING.format(sock)
    ]
    error = s.request("resources/read", {"uri": "ragd://dir/"})["error"]
    assert error == {"code": -32603, "message": NOT_RUNNING.format(sock)}


def _failing(code: str, message: str, hint: str = "") -> Handler:
    def handler(args: dict[str, Any]) -> Any:
        raise protocol.RemoteError(code, message, hint)

    return handler


def _hang_up(args: dict[str, Any]) -> Any:
    raise ConnectionAbortedError


@pytest.mark.parametrize(
    ("handler", "text"),
    [
        (_failing("unavailable", "the agent is starting (opening the index)", "try again in a moment"),
         "the agent is starting (opening the index). Try again in a moment."),
        (_failing("failed", "search failed: boom."), "search failed: boom."),
        (_failing("unknown_verb", "unknown verb 'mcp_call'"),
         f"this ragd agent cannot answer MCP calls (unknown verb 'mcp_call'). Update it to ragd "
         f"{ragctl.__version__} (the version of this ragctl) and restart it."),
        (_hang_up, "went away (the agent closed the connection). It may be restarting: try again"),
        (lambda args: ["not", "an", "object"], "bad answer from the ragd agent: mcp_call did not answer"),
    ],
)  # fmt: skip
def test_agent_failures_become_tool_errors(sock: Path, handler: Handler, text: str) -> None:
    fake = FakeAgent(sock, {"mcp_call": handler})
    try:
        result = Session(sock).request("tools/call", {"name": "search", "arguments": {"query": "x"}})
    finally:
        fake.close()
    assert result["isError"] is True
    assert text in result["content"][0]["text"]


@pytest.mark.parametrize(
    ("code", "rpc_code"), [("not_found", -32602), ("bad_request", -32602), ("failed", -32603)]
)
def test_agent_failures_of_a_resource_read_become_errors(sock: Path, code: str, rpc_code: int) -> None:
    fake = FakeAgent(sock, {"mcp_read": _failing(code, "ragd://file/etc/passwd is outside every root")})
    try:
        error = Session(sock).request("resources/read", {"uri": "ragd://file/etc/passwd"})["error"]
    finally:
        fake.close()
    assert error == {"code": rpc_code, "message": "ragd://file/etc/passwd is outside every root."}


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
        (b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "s", "arguments": 1}}', 9, -32602),
        (b'{"jsonrpc": "2.0", "id": 10, "method": "resources/read", "params": {"uri": ""}}', 10, -32602),
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


def test_a_batch_is_answered_with_one_array(sock: Path, agent: FakeAgent) -> None:
    s = Session(sock)
    s.send([{"jsonrpc": "2.0", "id": "a", "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "status"}},
            {"jsonrpc": "2.0", "id": "c", "method": "nope"}])  # fmt: skip
    poll(s.out.messages, timeout=10, what="the answer to the batch")
    [batch] = s.out.messages()
    assert [(r["id"], "result" in r) for r in batch] == [("a", True), ("b", True), ("c", False)]
    assert batch[1]["result"] == TOOL_RESULT


# -- concurrency, cancellation, end of input ---------------------------------------------------------------------
def _slow(release: threading.Event) -> Handler:
    def handler(args: dict[str, Any]) -> Any:
        assert release.wait(10)
        return {**TOOL_RESULT, "structuredContent": args}

    return handler


def test_slow_calls_run_side_by_side_and_never_hold_up_ping(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"mcp_call": _slow(release)})
    try:
        s = Session(sock)
        for rid in (1, 2):
            s.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "search"}})
        # both calls reached the agent before either was answered
        poll(lambda: len(fake.requests) == 2, timeout=10, what="both calls to reach the agent")
        assert s.request("ping", rid=3) == {}
        assert (
            s.request("initialize", {"protocolVersion": "2025-11-25"}, rid=4)["serverInfo"]["name"] == "ragd"
        )
        assert [m["id"] for m in s.out.messages()] == [3, 4]
        release.set()
        assert s.out.wait(1)["result"]["isError"] is False and s.out.wait(2)["result"]["isError"] is False
    finally:
        release.set()
        fake.close()


def test_a_cancelled_call_is_not_answered_and_does_not_hold_up_the_end(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"mcp_call": _slow(release)})
    s = Session(sock)
    call = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "search"}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}}
    try:
        assert s.bridge.serve([json.dumps(call).encode(), json.dumps(cancel).encode()]) == 0
        assert not release.is_set() and len(fake.requests) <= 1
    finally:
        release.set()
        fake.close()
    assert s.out.messages() == []


def test_the_end_of_input_waits_for_running_calls(sock: Path) -> None:
    release = threading.Event()
    fake = FakeAgent(sock, {"mcp_call": _slow(release)})

    def release_when_called() -> None:
        poll(lambda: fake.requests, timeout=10, what="the call to reach the agent")
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


# -- the process -------------------------------------------------------------------------------------------------
def test_stray_output_goes_to_stderr_and_protocol_lines_to_stdout() -> None:
    code = (
        "import os, sys; from ragctl.mcp_bridge import claim_stdout; out, restore = claim_stdout(); "
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


def test_every_call_running_at_the_end_of_input_is_answered(sock: Path) -> None:
    big = {**TOOL_RESULT, "structuredContent": {"results": [{"content": "长文 long text " * 20000}]}}
    fake = FakeAgent(sock, {"mcp_call": lambda args: big})  # answers that take a while to encode
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
