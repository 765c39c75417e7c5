"""`python -m ragd.mcp.schema`: the agent's MCP surface as static JSON, for the stdio bridge `ragctl mcp`.

`ragctl mcp` must answer `initialize`, `tools/list` and `resources/templates/list` at once, without importing the
MCP SDK or reaching the agent, so it ships this JSON as cli/ragctl/mcp_schema.json. Regenerate that file after
changing a tool or a resource (a test compares the two):

    python -m ragd.mcp.schema > cli/ragctl/mcp_schema.json

Keys: "protocolVersion" (the newest handshake-era version, which the results are shaped for), "initialize",
"tools/list" and "resources/templates/list": the results exactly as the agent's MCPServer sends them. In
"initialize", the bridge sets `protocolVersion` to the version it negotiated and `serverInfo.version` (left
empty here, so that a release does not change the file) to its own version.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from mcp_types import Implementation, InitializeResult, ListResourceTemplatesResult, ListToolsResult

from .app import build_server
from .calls import WIRE_VERSION, wire

if TYPE_CHECKING:
    from ..verbs.runtime import Resident


def _no_agent() -> Resident:
    raise RuntimeError("the schema generator has no agent")


async def _lists() -> dict[str, Any]:
    server = build_server(_no_agent)
    options = server._lowlevel_server.create_initialization_options()  # the SDK's own initialize payload
    init = InitializeResult(protocol_version=WIRE_VERSION, capabilities=options.capabilities,
                            server_info=Implementation(name=server.name, title=options.title, version=""),
                            instructions=server.instructions)  # fmt: skip
    templates = ListResourceTemplatesResult(resource_templates=await server.list_resource_templates())
    return {
        "protocolVersion": WIRE_VERSION,
        "initialize": wire("initialize", init),
        "tools/list": wire("tools/list", ListToolsResult(tools=await server.list_tools())),
        "resources/templates/list": wire("resources/templates/list", templates),
    }


def schema() -> dict[str, Any]:
    return asyncio.run(_lists())


def render() -> str:
    """The file's exact text."""
    return json.dumps(schema(), ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def main() -> NoReturn:
    sys.stdout.write(render())
    sys.exit(0)


if __name__ == "__main__":
    main()
