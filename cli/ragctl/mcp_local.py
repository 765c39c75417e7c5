"""What `ragctl mcp` answers by itself while no agent is reachable: ragd's MCP surface from mcp_schema.json.

The agent's MCP server answers everything once the bridge reaches it (mcp_bridge.py). Until then the bridge
answers from mcp_schema.json, generated from that server by `python -m ragd.mcp.schema`: `initialize`,
`server/discover`, `ping`, `tools/list`, `resources/templates/list`, `prompts/list` exactly as the agent would,
an empty `resources/list`, and, for what needs the agent (`tools/call`, `resources/read`, `prompts/get`), the
reason it cannot be reached and how to start it: a tool error (isError) for a tool call, a JSON-RPC error for
the others. A client can thus start before the agent, list the tools, and call them once the agent is up.

Standard library only, like the rest of ragctl.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from . import __version__
from .protocol import DENIED, DENIED_HINT, UNKNOWN_VERB, ProtocolError, RemoteError, Unreachable

log = logging.getLogger(__name__)

SCHEMA_FILE = Path(__file__).with_name("mcp_schema.json")
# the protocol revisions reachable through `initialize` (mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)  # the per-request envelope era, which opens with `server/discover`
START_HINT = "start it with `ragd run` or `systemctl --user start ragd`, then try again"
INSTRUCTIONS = (
    "ragd keeps the user's folders of documents searchable. Use `search` to find passages (each result cites "
    "its file), then `read_chunk` or `read_document` to read around a hit."
)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700, -32600, -32601, -32602, -32603,
)  # fmt: skip
STATIC = ("tools/list", "resources/templates/list", "prompts/list")
VERSION_META = "io.modelcontextprotocol/protocolVersion"  # in `_meta` of every 2026-07-28 request
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"  # in `_meta` of every 2026-07-28 result

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

    version: str  # the newest handshake-era protocol version, the one these results are shaped for
    results: Mapping[
        str, Json
    ]  # method -> result; `initialize`'s protocolVersion and version set per session
    modern: Mapping[str, Json]  # method -> result, for the per-request era (2026-07-28)

    @property
    def tools(self) -> Json:
        return self.results["tools/list"]

    @property
    def templates(self) -> Json:
        return self.results["resources/templates/list"]


def default_initialize() -> Json:
    return {
        "capabilities": {"tools": {}, "resources": {}},
        "serverInfo": {"name": "ragd", "version": __version__},
        "instructions": INSTRUCTIONS,
    }


def load_schema(path: Path = SCHEMA_FILE) -> Schema:
    """mcp_schema.json: {"protocolVersion", "initialize", "server/discover", "tools/list",
    "resources/templates/list", "prompts/list"} (the generator's form), or the short one
    ({"tools": [...], "resourceTemplates": [...]}).

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
    results: dict[str, Json] = {
        "initialize": init if isinstance(init, dict) else default_initialize(),
        "tools/list": tools,
        "resources/templates/list": templates,
        "prompts/list": data.get("prompts/list") or {"prompts": []},
    }
    modern = data.get(MODERN_VERSIONS[-1])
    modern = {k: v for k, v in modern.items() if isinstance(v, dict)} if isinstance(modern, dict) else {}
    return Schema(negotiate(data.get("protocolVersion"), HANDSHAKE_VERSIONS[-1]), results, modern)


def _items_with(result: Any, key: str, field: str) -> bool:
    items = result.get(key) if isinstance(result, dict) else None
    ok = lambda item: isinstance(item, dict) and isinstance(item.get(field), str)  # noqa: E731
    return isinstance(items, list) and all(map(ok, items))


def negotiate(requested: Any, latest: str) -> str:
    """The client's version when the bridge speaks it, else the bridge's newest (the client then decides)."""
    return requested if requested in HANDSHAKE_VERSIONS else latest


# -- messages for the user ---------------------------------------------------------------------------------------
def sentences(*parts: str) -> str:
    """Join message parts as sentences: 'a (b)', 'try again' -> 'a (b). Try again.'"""
    out: list[str] = []
    for part in filter(None, (p.strip() for p in parts)):
        part = part[0].upper() + part[1:] if out else part
        out.append(part if part.endswith((".", "!", "?")) else part + ".")
    return " ".join(out)


def explain(err: AgentError) -> str:
    """Why the agent cannot answer, and what to do about it, for the user of the MCP client."""
    if isinstance(err, Unreachable):
        return _unreachable(err)
    if isinstance(err, RemoteError):
        if err.code == UNKNOWN_VERB:
            return sentences(f"this ragd agent cannot serve MCP sessions ({err.message})",
                             f"update it to ragd {__version__} (the version of this ragctl) and restart it")  # fmt: skip
        return sentences(err.message or err.code, err.hint)
    return sentences(f"bad answer from the ragd agent: {err.message}",
                     err.hint or "ragctl and the agent may be of different versions")  # fmt: skip


def _unreachable(err: Unreachable) -> str:
    if err.reason == DENIED:
        return sentences(f"cannot use the ragd agent on {err.path}: {err.reason}", DENIED_HINT)
    if err.reason.startswith(("no socket", "connection refused")):
        return sentences(f"the ragd agent is not running (no agent is listening on {err.path})", START_HINT)
    if "in time" in err.reason:
        return sentences(f"the ragd agent on {err.path} did not answer in time", "it may be busy: try again")
    if err.reason.startswith(("the agent closed", "send failed", "receive failed")):
        return sentences(f"the ragd agent on {err.path} went away ({err.reason})",
                         "it may be restarting: try again; see `systemctl --user status ragd` or its log")  # fmt: skip
    return sentences(f"cannot reach the ragd agent on {err.path} ({err.reason})", START_HINT)


def tool_error(text: str) -> Json:
    """A CallToolResult reporting a failure to the model (not a protocol error)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


# -- JSON-RPC ----------------------------------------------------------------------------------------------------
def valid_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def key(rid: Any) -> tuple[bool, Any]:
    """A request id as a dictionary key: 1 and "1" are different requests."""
    return isinstance(rid, str), rid


def error(rid: Any, code: int, message: str) -> Json:
    return {
        "jsonrpc": "2.0",
        "id": rid if valid_id(rid) else None,
        "error": {"code": code, "message": message},
    }


def invalid(msg: Json) -> str | None:
    """Why `msg` is not a JSON-RPC 2.0 request or notification, or None."""
    if msg.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if not isinstance(msg.get("method"), str):
        return "a request needs a 'method' string"
    if "id" in msg and not valid_id(msg["id"]):
        return "'id' must be a string or an integer"
    return None


def encode(reply: Json | list[Json]) -> bytes:
    """One protocol line (JSON escapes every newline inside strings)."""
    try:
        return (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (e.g. "\ud800" sent by the client): escape everything
        return (json.dumps(reply, separators=(",", ":")) + "\n").encode("ascii")


def _modern(params: Any) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_META in meta


# -- answers -----------------------------------------------------------------------------------------------------
class Local:
    """The answers given without the agent; `why` is the latest reason the agent could not be reached."""

    def __init__(self, schema: Schema | Exception) -> None:
        self._schema = schema

    def surface(self) -> Schema:
        if isinstance(self._schema, Exception):
            err = self._schema
            raise RpcError(INTERNAL_ERROR, sentences(
                f"ragctl's list of ragd's tools ({SCHEMA_FILE.name}) cannot be read: {err}",
                "reinstall ragd")) from None  # fmt: skip
        return self._schema

    def answer(self, msg: Any, why: AgentError) -> Json | None:
        """The reply to one message: a result or an error; None for a notification or a response."""
        if not isinstance(msg, dict):
            return error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
        if "method" not in msg and ("result" in msg or "error" in msg):
            return None  # a response to a request of the agent's, which has gone
        reason = invalid(msg)
        if reason is not None:
            log.warning("invalid message (%s): %.200r", reason, msg)
            return (
                error(msg.get("id"), INVALID_REQUEST, f"Invalid Request: {reason}") if "id" in msg else None
            )
        if "id" not in msg:
            return None
        rid, params = msg["id"], msg.get("params")
        if params is not None and not isinstance(params, dict):
            return error(rid, INVALID_PARAMS, "Invalid params: 'params' must be an object")
        try:
            if _modern(params):
                result = self.modern_result(msg["method"], params or {}, why)
            else:
                result = self.result(msg["method"], params or {}, why)
        except RpcError as err:
            return error(rid, err.code, err.message)
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def modern_result(self, method: str, params: Json, why: AgentError) -> Json:
        """A 2026-07-28 request's result: no handshake, no ping, subscriptions only through the agent; each
        result stamped with the server's identity, as the spec asks."""
        if method in ("initialize", "ping", "resources/subscribe", "resources/unsubscribe"):
            raise RpcError(
                METHOD_NOT_FOUND, f"Method not found: {method} (not in protocol {MODERN_VERSIONS[-1]})"
            )
        result = self.surface().modern.get(method) or {
            **self.result(method, params, why),
            "resultType": "complete",
        }
        meta: Json = result["_meta"] if isinstance(result.get("_meta"), dict) else {}
        return {**result, "_meta": {**meta, SERVER_INFO_META: {"name": "ragd", "version": __version__}}}

    def result(self, method: str, params: Json, why: AgentError) -> Json:
        if method == "initialize":
            return self._initialize(params)
        if method in ("ping", "resources/subscribe", "resources/unsubscribe", "logging/setLevel"):
            return {}  # a subscription is passed on to the agent once it is reached
        if method == "resources/list":
            return {"resources": []}
        if method in STATIC and method in self.surface().results:
            return self.surface().results[method]
        if method == "tools/call":
            if not isinstance(params.get("name"), str) or not params["name"]:
                raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs a tool 'name'")
            return tool_error(explain(why))
        if method in ("resources/read", "prompts/get", "subscriptions/listen", "completion/complete"):
            raise RpcError(INTERNAL_ERROR, explain(why))
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: Json) -> Json:
        try:
            base, latest = self.surface().results["initialize"], self.surface().version
        except RpcError:  # initialize works all the same; tools/list says what is wrong
            base, latest = default_initialize(), HANDSHAKE_VERSIONS[-1]
        version = negotiate(params.get("protocolVersion"), latest)
        server_info = {**base.get("serverInfo", {}), "name": "ragd", "version": __version__}
        return {**base, "protocolVersion": version, "serverInfo": server_info}
