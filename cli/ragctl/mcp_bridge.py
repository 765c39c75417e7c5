"""`ragctl mcp`: the stdio MCP server for AI tools that start a command; it forwards each call to the agent.

An MCP client (Claude Desktop, Cursor, an agent framework) starts `ragctl mcp` and speaks JSON-RPC 2.0 on its
stdin and stdout, one message per line (the MCP stdio transport). The bridge answers by itself, at once and with
or without an agent: `initialize`, `ping`, `tools/list`, `resources/templates/list`, `resources/list` and
`prompts/list` (the lists come from mcp_schema.json, generated from the agent's MCP server by
`python -m ragd.mcp.schema`). It forwards `tools/call` and `resources/read` to the running agent as the control
verbs `mcp_call` and `mcp_read` (docs/protocol.md), each on its own connection and thread, so a slow search never
holds up a `ping`. With no agent, a tool call is a tool error (isError) saying how to start it; a resource read
is a JSON-RPC error with the same text.

Standard library only, like the rest of ragctl (no MCP SDK): spawn → `initialize` answered takes about 60 ms.
Nothing but JSON-RPC reaches stdout: protocol lines are written to a private duplicate of fd 1, and fd 1 itself
(with sys.stdout) points at stderr while the bridge runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, NamedTuple

from . import __version__
from .protocol import (
    BAD_REQUEST,
    NOT_FOUND,
    UNKNOWN_VERB,
    Client,
    ProtocolError,
    RemoteError,
    Unreachable,
    socket_path,
)

log = logging.getLogger(__name__)

SCHEMA_FILE = Path(__file__).with_name("mcp_schema.json")
# the protocol revisions reachable through `initialize` (mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CALL_TIMEOUT = 630.0  # seconds to wait for the agent's answer to one call (the agent gives a call 600 s)
START_HINT = "start it with `ragd run` or `systemctl --user start ragd`, then try again"
INSTRUCTIONS = (
    "ragd keeps the user's folders of documents searchable. Use `search` to find passages (each result cites "
    "its file), then `read_chunk` or `read_document` to read around a hit."
)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700, -32600, -32601, -32602, -32603,
)  # fmt: skip
FORWARDED = frozenset({"tools/call", "resources/read"})  # the methods answered by the agent, on a thread each

Json = dict[str, Any]
AgentError = Unreachable | RemoteError | ProtocolError


class RpcError(Exception):
    """A JSON-RPC error answer to one request."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


# -- the static surface ------------------------------------------------------------------------------------------
class Schema(NamedTuple):
    """What the bridge serves without the agent (mcp_schema.json); results exactly as on the wire."""

    version: str  # the newest protocol version, the one these results are shaped for
    initialize: Json  # the initialize result; protocolVersion and serverInfo.version are set per session
    tools: Json  # the tools/list result
    templates: Json  # the resources/templates/list result


def default_initialize() -> Json:
    return {
        "capabilities": {"tools": {}, "resources": {}},
        "serverInfo": {"name": "ragd", "version": __version__},
        "instructions": INSTRUCTIONS,
    }


def load_schema(path: Path = SCHEMA_FILE) -> Schema:
    """mcp_schema.json in the generator's form ({"protocolVersion", "initialize", "tools/list",
    "resources/templates/list"}) or the short one ({"tools": [...], "resourceTemplates": [...]}).

    Raises OSError when the file cannot be read, ValueError when it is not such a document."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    tools = data.get("tools/list", {"tools": data.get("tools")})
    templates = data.get("resources/templates/list", {"resourceTemplates": data.get("resourceTemplates", [])})
    if not _items_with(tools, "tools", "name"):
        raise ValueError("no list of tools, each with a 'name'")
    if not _items_with(templates, "resourceTemplates", "uriTemplate"):
        raise ValueError("'resourceTemplates' is not a list of templates, each with a 'uriTemplate'")
    init = data.get("initialize")
    if not isinstance(init, dict):
        init = default_initialize()
    version = data.get("protocolVersion")
    return Schema(negotiate(version, HANDSHAKE_VERSIONS[-1]), init, tools, templates)


def _items_with(result: Any, key: str, field: str) -> bool:
    items = result.get(key) if isinstance(result, dict) else None
    ok = lambda item: isinstance(item, dict) and isinstance(item.get(field), str)  # noqa: E731
    return isinstance(items, list) and all(map(ok, items))


def negotiate(requested: Any, latest: str) -> str:
    """The client's version when the bridge speaks it, else the bridge's newest (the client then decides)."""
    return requested if requested in HANDSHAKE_VERSIONS else latest


# -- the agent ---------------------------------------------------------------------------------------------------
class AgentLink:
    """Calls to the agent over its control socket, one connection per call so that calls run side by side."""

    def __init__(
        self, socket: Path | None, connect_timeout: float | None, answer_timeout: float | None = CALL_TIMEOUT
    ):
        self.socket = (
            socket  # None: found again at each call (the agent may start, or move, after the bridge)
        )
        self.connect_timeout, self.answer_timeout = connect_timeout, answer_timeout

    def call(self, verb: str, args: Json) -> Any:
        """The verb's result; Unreachable, RemoteError or ProtocolError otherwise."""
        with Client(self.socket or socket_path(client=True), self.connect_timeout) as client:
            client.settimeout(self.answer_timeout)
            return client.call(verb, args)


def sentences(*parts: str) -> str:
    """Join message parts as sentences: 'a (b)', 'try again' -> 'a (b). Try again.'"""
    out: list[str] = []
    for part in filter(None, (p.strip() for p in parts)):
        part = part[0].upper() + part[1:] if out else part
        out.append(part if part.endswith((".", "!", "?")) else part + ".")
    return " ".join(out)


def explain(err: AgentError) -> str:
    """What went wrong in forwarding a call, and what to do about it, for the user of the MCP client."""
    if isinstance(err, Unreachable):
        return _unreachable(err)
    if isinstance(err, RemoteError):
        if err.code == UNKNOWN_VERB:
            return sentences(f"this ragd agent cannot answer MCP calls ({err.message})",
                             f"update it to ragd {__version__} (the version of this ragctl) and restart it")  # fmt: skip
        return sentences(err.message or err.code, err.hint)
    return sentences(f"bad answer from the ragd agent: {err.message}",
                     err.hint or "ragctl and the agent may be of different versions")  # fmt: skip


def _unreachable(err: Unreachable) -> str:
    if err.reason.startswith(("no socket", "connection refused")):
        return sentences(f"the ragd agent is not running (no agent is listening on {err.path})", START_HINT)
    if "in time" in err.reason:
        return sentences(f"the ragd agent on {err.path} did not answer in time", "it may be busy: try again")
    if err.reason.startswith(("the agent closed", "send failed", "receive failed")):
        return sentences(f"the ragd agent on {err.path} went away ({err.reason})",
                         "it may be restarting: try again; see `systemctl --user status ragd` or its log")  # fmt: skip
    return sentences(f"cannot reach the ragd agent on {err.path} ({err.reason})", START_HINT)


def _not_an_object(verb: str) -> str:
    return explain(ProtocolError(BAD_REQUEST, f"{verb} did not answer with an object"))


def tool_error(text: str) -> Json:
    """A CallToolResult reporting a failure to the model (not a protocol error)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


# -- JSON-RPC ----------------------------------------------------------------------------------------------------
def _valid_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def _key(rid: Any) -> tuple[bool, Any]:
    return isinstance(rid, str), rid  # 1 and "1" are different requests


def _error(rid: Any, code: int, message: str) -> Json:
    error = {"code": code, "message": message}
    return {"jsonrpc": "2.0", "id": rid if _valid_id(rid) else None, "error": error}


def _invalid(msg: Json) -> str | None:
    """Why `msg` is not a JSON-RPC 2.0 request or notification, or None."""
    if msg.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if not isinstance(msg.get("method"), str):
        return "a request needs a 'method' string"
    if "id" in msg and not _valid_id(msg["id"]):
        return "'id' must be a string or an integer"
    return None


def encode(reply: Json | list[Json]) -> bytes:
    """One protocol line (JSON escapes every newline inside strings)."""
    try:
        return (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (e.g. "\ud800" sent by the client): escape everything
        return (json.dumps(reply, separators=(",", ":")) + "\n").encode("ascii")


class Bridge:
    """One MCP session: `feed` it each line read from the client; replies are written to `out`, a line each."""

    def __init__(self, agent: AgentLink, out: IO[bytes], schema: Callable[[], Schema] = load_schema) -> None:
        self._agent, self._out, self._load = agent, out, schema
        self._schema: Schema | None = None
        self._write_lock = threading.Lock()
        self._closed = False
        self._calls = threading.Condition()  # guards _pending: forwarded requests in flight -> cancelled?
        self._pending: dict[tuple[bool, Any], bool] = {}
        self._methods: dict[str, Callable[[Json], Json]] = {
            "initialize": self._initialize,
            "ping": lambda params: {},
            "tools/list": lambda params: self._surface().tools,
            "tools/call": self._call_tool,
            "resources/list": lambda params: {"resources": []},
            "resources/templates/list": lambda params: self._surface().templates,
            "resources/read": self._read_resource,
            "prompts/list": lambda params: {"prompts": []},
        }

    # -- input ---------------------------------------------------------------------------------------------------
    def serve(self, lines: Iterable[bytes]) -> int:
        """Answer every line until the input ends, then the calls still running (not cancelled ones); 0."""
        for line in lines:
            self.feed(line)
        with self._calls:
            self._calls.wait_for(lambda: all(self._pending.values()))
        with self._write_lock:
            self._closed = True  # a cancelled call that ends later writes nothing
        return 0

    def feed(self, line: bytes) -> None:
        """Handle one line: answered here, or on a thread of its own for a call forwarded to the agent."""
        if not line.strip():
            return
        try:
            msg = json.loads(line)
        except ValueError as err:  # bad JSON or bad UTF-8
            self._send(_error(None, PARSE_ERROR, f"Parse error: {err}"))
            return
        batch = msg if isinstance(msg, list) else None
        if batch == []:
            self._send(_error(None, INVALID_REQUEST, "Invalid Request: an empty batch"))
            return
        messages = batch if batch is not None else [msg]
        forwarded = [m for m in messages if isinstance(m, dict) and m.get("method") in FORWARDED
                     and "id" in m and _valid_id(m["id"])]  # fmt: skip
        if not forwarded:
            self._reply(messages, batch is not None, [])
            return
        with self._calls:  # registered before the thread starts, so that a cancellation finds them
            self._pending.update((_key(m["id"]), False) for m in forwarded)
        args = (messages, batch is not None, forwarded)
        threading.Thread(target=self._reply, args=args, name="mcp-call", daemon=True).start()

    def _reply(self, messages: list[Any], batch: bool, forwarded: list[Json]) -> None:
        replies = [r for r in map(self._answer_guarded, messages) if r is not None]
        keys = [_key(m["id"]) for m in forwarded]
        with self._calls:
            cancelled = {key for key in keys if self._pending.get(key)}
        replies = [r for r in replies if not (cancelled and _key(r.get("id")) in cancelled)]
        if replies:
            self._send(replies if batch else replies[0])
        with self._calls:  # only now: `serve` ends once nothing is pending, and then writes nothing more
            for key in keys:
                self._pending.pop(key, None)
            self._calls.notify_all()

    def _answer_guarded(self, msg: Any) -> Json | None:
        try:
            return self.answer(msg)
        except Exception:  # the session's boundary: a bug fails this request, never the session
            log.exception("internal error answering %.200r", msg)
            rid = msg.get("id") if isinstance(msg, dict) else None
            return _error(rid, INTERNAL_ERROR, "internal error in ragctl mcp (see its log on stderr)")

    def answer(self, msg: Any) -> Json | None:
        """The reply to one message: a result or an error; None for a notification or a response."""
        if not isinstance(msg, dict):
            return _error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
        if "method" not in msg and ("result" in msg or "error" in msg):
            return None  # a response: the bridge sends no requests, so there is nothing to match it with
        why = _invalid(msg)
        if why is not None:
            log.warning("invalid message (%s): %.200r", why, msg)
            return _error(msg.get("id"), INVALID_REQUEST, f"Invalid Request: {why}") if "id" in msg else None
        rid, method, params = msg.get("id"), msg["method"], msg.get("params")
        if "id" not in msg:
            self._notified(method, params)
            return None
        handler = self._methods.get(method)
        if handler is None:
            return _error(rid, METHOD_NOT_FOUND, f"Method not found: {method}")
        if params is not None and not isinstance(params, dict):
            return _error(rid, INVALID_PARAMS, "Invalid params: 'params' must be an object")
        started = time.monotonic()
        try:
            result = handler(params or {})
        except RpcError as err:
            return _error(rid, err.code, err.message)
        finally:
            log.debug("%s (id %r) answered in %.1f ms", method, rid, (time.monotonic() - started) * 1000)
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _notified(self, method: str, params: Any) -> None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        if method != "notifications/cancelled" or not _valid_id(rid):
            log.debug("notification %s", method)
            return
        with self._calls:
            if _key(rid) in self._pending:
                self._pending[_key(rid)] = True  # its answer will be dropped
                self._calls.notify_all()

    # -- output --------------------------------------------------------------------------------------------------
    def _send(self, reply: Json | list[Json]) -> None:
        data = encode(reply)
        with self._write_lock:
            if self._closed:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError) as err:  # the client closed our stdout (ValueError: a closed file)
                self._closed = True
                log.info("stdout is closed (%s): answers are dropped until stdin ends", err)

    # -- methods -------------------------------------------------------------------------------------------------
    def _surface(self) -> Schema:
        if self._schema is None:
            try:
                self._schema = self._load()
            except (OSError, ValueError) as err:
                log.error("cannot read the MCP schema %s: %s", SCHEMA_FILE, err)
                raise RpcError(INTERNAL_ERROR, sentences(
                    f"ragctl's list of ragd's tools ({SCHEMA_FILE.name}) cannot be read: {err}",
                    "reinstall ragd")) from None  # fmt: skip
        return self._schema

    def _initialize(self, params: Json) -> Json:
        try:
            base, latest = self._surface().initialize, self._surface().version
        except RpcError:  # initialize works all the same; tools/list says what is wrong
            base, latest = default_initialize(), HANDSHAKE_VERSIONS[-1]
        version = negotiate(params.get("protocolVersion"), latest)
        log.debug("initialize from %r asking for %r: %s", params.get("clientInfo"), params.get("protocolVersion"),
                  version)  # fmt: skip
        server_info = {**base.get("serverInfo", {}), "name": "ragd", "version": __version__}
        return {**base, "protocolVersion": version, "serverInfo": server_info}

    def _call_tool(self, params: Json) -> Json:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs a tool 'name'")
        if arguments is not None and not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: tools/call 'arguments' must be an object")
        try:
            result = self._agent.call("mcp_call", {"name": name, "arguments": arguments or {}})
        except (Unreachable, RemoteError, ProtocolError) as err:
            return tool_error(explain(err))
        return result if isinstance(result, dict) else tool_error(_not_an_object("mcp_call"))

    def _read_resource(self, params: Json) -> Json:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise RpcError(INVALID_PARAMS, "Invalid params: resources/read needs a 'uri'")
        try:
            result = self._agent.call("mcp_read", {"uri": uri})
        except RemoteError as err:
            code = INVALID_PARAMS if err.code in (NOT_FOUND, BAD_REQUEST) else INTERNAL_ERROR
            raise RpcError(code, explain(err)) from None
        except (Unreachable, ProtocolError) as err:
            raise RpcError(INTERNAL_ERROR, explain(err)) from None
        if not isinstance(result, dict):
            raise RpcError(INTERNAL_ERROR, _not_an_object("mcp_read"))
        return result


# -- the process -------------------------------------------------------------------------------------------------
def claim_stdout() -> tuple[IO[bytes], Callable[[], None]]:
    """A private writer on the real stdout for protocol lines; fd 1 and sys.stdout go to stderr meanwhile.

    Returns the writer and a function that puts everything back."""
    saved = sys.stdout
    saved.flush()
    proto_fd = os.dup(1)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr: stray output goes nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    sys.stdout = sys.stderr
    out = os.fdopen(proto_fd, "wb")

    def restore() -> None:
        sys.stdout = saved
        with contextlib.suppress(OSError, ValueError):
            saved.flush()  # anything printed to the old object goes to stderr while fd 1 still points there
        os.dup2(out.fileno(), 1)
        out.close()

    return out, restore


def run_stdio(socket: Path | None, connect_timeout: float | None, verbose: bool = False) -> int:
    """Serve MCP on this process's stdin and stdout until stdin ends (then 0)."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="ragctl mcp: %(levelname)s: %(message)s")  # fmt: skip
    if sys.stdin.isatty():
        sys.stderr.write("ragctl mcp: serving MCP (JSON-RPC) on stdin/stdout for an AI tool; Ctrl-D ends.\n")
    out, restore = claim_stdout()
    try:
        return Bridge(AgentLink(socket, connect_timeout), out).serve(sys.stdin.buffer)
    finally:
        restore()
