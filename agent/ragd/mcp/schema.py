"""`python -m ragd.mcp.schema`: the agent's MCP surface as static JSON, for the stdio bridge `ragctl mcp`.

While no agent is reachable, `ragctl mcp` answers `initialize`, `server/discover` and the lists by itself,
without importing the MCP SDK (cli/ragctl/mcp_local.py), so it ships this JSON as cli/ragctl/mcp_schema.json.
Regenerate that file after changing a tool, a resource or a prompt (a test compares the two):

    python -m ragd.mcp.schema > cli/ragctl/mcp_schema.json

Keys: "protocolVersion" (the newest handshake-era version, which the results are shaped for), "initialize",
"tools/list", "resources/templates/list" and "prompts/list", and "2026-07-28": the results of the per-request
era ("server/discover", the lists, an empty "resources/list"): each exactly as the agent's MCPServer sends it. In
"initialize", the bridge sets `protocolVersion` to the version it negotiated and `serverInfo.version` (left
empty here, so that a release does not change the file) to its own version.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from mcp.server.caching import apply_cache_hint
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    CacheableResult,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
)
from mcp_types.methods import serialize_server_result
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from .app import build_server, initialization_options
from .calls import WIRE_VERSION, wire

if TYPE_CHECKING:
    from ..verbs.runtime import Resident


def _no_agent() -> Resident:
    raise RuntimeError("the schema generator has no agent")


async def _lists() -> dict[str, Any]:
    server = build_server(_no_agent)
    options = initialization_options(server)  # the initialize payload of every session
    init = InitializeResult(protocol_version=WIRE_VERSION, capabilities=options.capabilities,
                            server_info=Implementation(name=server.name, title=options.title, version=""),
                            instructions=server.instructions)  # fmt: skip
    modern = server._lowlevel_server.get_capabilities(protocol_version=LATEST_MODERN_VERSION)
    discover = DiscoverResult(supported_versions=list(MODERN_PROTOCOL_VERSIONS), capabilities=modern,
                              instructions=server.instructions)  # fmt: skip
    tools = ListToolsResult(tools=await server.list_tools())
    templates = ListResourceTemplatesResult(resource_templates=await server.list_resource_templates())
    prompts = ListPromptsResult(prompts=await server.list_prompts())
    lists = {"tools/list": tools, "resources/templates/list": templates, "prompts/list": prompts,
             "resources/list": ListResourcesResult(resources=[])}  # fmt: skip
    return {
        "protocolVersion": WIRE_VERSION,
        "initialize": wire("initialize", init),
        **{method: wire(method, result) for method, result in lists.items() if method != "resources/list"},
        LATEST_MODERN_VERSION: {
            "server/discover": _modern(server, "server/discover", discover),
            **{method: _modern(server, method, result) for method, result in lists.items()},
        },
    }


def _modern(server: MCPServer, method: str, result: BaseModel) -> dict[str, Any]:
    """`result` as the agent sends it to a 2026-07-28 client (with its cache hint, as the SDK fills it in)."""
    hint = server._lowlevel_server.cache_hints.get(method)
    if hint is not None and isinstance(result, CacheableResult):
        result = apply_cache_hint(result, hint)
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return serialize_server_result(method, LATEST_MODERN_VERSION, dumped)


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
