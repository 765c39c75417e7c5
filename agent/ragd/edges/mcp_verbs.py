"""Control verbs for MCP over the control socket (docs/mcp.md, docs/protocol.md).

    mcp_session {}                               -> {"protocol": "mcp"}, then the connection is an MCP session
    mcp_call {"name": str, "arguments": {...}}  -> the tools/call result (CallToolResult as on the wire)
    mcp_read {"uri": str}                        -> the resources/read result (ReadResourceResult as on the wire)

`mcp_session` is what the stdio bridge `ragctl mcp` uses: after its reply the connection carries MCP's stdio
framing both ways (mcp/session.py). `mcp_call` and `mcp_read` are one call each, without a session (scripts,
tests). All are answered by the agent's one `MCPServer` (the one serving HTTP), so stdio and HTTP answers are
identical. A failing tool is a normal result with `isError: true`; a failing resource read is an error reply
(`not_found` -> JSON-RPC -32602, `failed` -> -32603); `unavailable` while the MCP server is not running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragctl import protocol as p

from ..errors import RagdError
from .control import Handler, Stream, Takeover

if TYPE_CHECKING:
    from ..mcp.server import McpService


def _bad(message: str) -> RagdError:
    return RagdError(message, "see docs/mcp.md", code=p.BAD_REQUEST)


def mcp_verbs(service: McpService) -> dict[str, Handler]:
    def mcp_call(args: dict[str, Any], stream: Stream) -> Any:
        name, arguments = args.get("name"), args.get("arguments") or {}
        if not isinstance(name, str) or not name:
            raise _bad("mcp_call needs a tool 'name'")
        if not isinstance(arguments, dict):
            raise _bad(f"mcp_call 'arguments' must be an object, not {type(arguments).__name__}")
        return service.call_tool(name, arguments)

    def mcp_read(args: dict[str, Any], stream: Stream) -> Any:
        uri = args.get("uri")
        if not isinstance(uri, str) or not uri:
            raise _bad("mcp_read needs a resource 'uri'")
        return service.read_resource(uri)

    def mcp_session(args: dict[str, Any], stream: Stream) -> Takeover:
        service.check_running()  # refused now, as an error reply, rather than after the takeover
        return Takeover({"protocol": "mcp"}, service.serve_session)

    return {"mcp_session": mcp_session, "mcp_call": mcp_call, "mcp_read": mcp_read}
