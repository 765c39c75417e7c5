"""tools/call and resources/read on the agent's `MCPServer` for the stdio bridge, answered as on the wire.

The results are those the SDK's own request handlers send over HTTP (`MCPServer._handle_call_tool` and
`_handle_read_resource`), shaped by the SDK's per-version serializer for the newest handshake-era protocol
version (WIRE_VERSION), so `ragctl mcp` and HTTP clients of that version get the same answers.
A resource error becomes a RagdError whose code tells the bridge the JSON-RPC error to send:
`not_found` -> -32602 (invalid params: unknown resource, refused or missing path), `failed` -> -32603.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedResourceError,
    UnexpectedToolError,
)
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolResult,
    InputRequiredResult,
    ReadResourceResult,
    TextContent,
    TextResourceContents,
)
from mcp_types.methods import serialize_server_result
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel

from ragctl import protocol as p

from ..errors import RagdError

log = logging.getLogger(__name__)


WIRE_VERSION = LATEST_HANDSHAKE_VERSION  # what stdio clients (Claude Desktop, Cursor, ...) negotiate today


def wire(method: str, result: BaseModel) -> dict[str, Any]:
    """`result` as the SDK sends it for `method` to a client of WIRE_VERSION (fields of that version only)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return serialize_server_result(method, WIRE_VERSION, dumped)


async def call_tool(server: MCPServer, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await server.call_tool(name, arguments)
    except MCPError as err:
        raise RagdError(err.error.message, code=p.FAILED) from None
    except Exception as exc:  # the MCP boundary, as in the SDK's handler: any failure is a tool error result
        if not isinstance(exc, ToolError) or isinstance(exc, UnexpectedToolError):
            log.exception("MCP tool %r raised an unexpected exception", name)
        result = CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
    return wire("tools/call", result)


async def read_resource(server: MCPServer, uri: str) -> dict[str, Any]:
    try:
        found = await server.read_resource(uri)
    except ResourceError as err:
        if isinstance(err, UnexpectedResourceError):
            log.exception("MCP resource %r raised an unexpected exception", uri)
        code = p.NOT_FOUND if isinstance(err, ResourceNotFoundError) else p.FAILED
        raise RagdError(str(err), code=code) from None
    except MCPError as err:
        code = p.NOT_FOUND if err.error.code == INVALID_PARAMS else p.FAILED
        raise RagdError(err.error.message, code=code) from None
    if isinstance(found, InputRequiredResult):  # none of ragd's resources asks for input; passed on as is
        return wire("resources/read", found)
    contents: list[TextResourceContents | BlobResourceContents] = []
    for item in found:
        if isinstance(item.content, bytes):
            contents.append(BlobResourceContents(uri=uri, blob=base64.b64encode(item.content).decode(),
                                                 mime_type=item.mime_type or "application/octet-stream"))  # fmt: skip
        else:
            contents.append(
                TextResourceContents(uri=uri, text=item.content, mime_type=item.mime_type or "text/plain")
            )
    return wire("resources/read", ReadResourceResult(contents=contents))
