"""The agent's MCP server: the SDK's `MCPServer` with ragd's tools (tooldefs.py), resources (resources.py) and
prompts (prompts.py), its change announcements (events.py), and the lists and errors as ragd serves them.

One `MCPServer` per agent serves every transport: streamable HTTP (on the port of the HTTP edge, edges/http.py),
the stdio bridge `ragctl mcp` (a session on the control socket: session.py) and the single calls `mcp_call` /
`mcp_read` (calls.py). Domain errors become tool errors (`isError`) / resource errors that carry their message
and hint.

Every request is answered as its caller (docs/access.md): over HTTP the one its bearer token stands for (the
HTTP edge's Guard puts it in the request's scope), over the control socket the connection's peer (bound by the
control server).
A scoped caller may call the tools of SCOPED_TOOLS, which limit their answers to what it can read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ListResourcesResult, PaginatedRequestParams, Resource
from pydantic import ValidationError

from ragctl import protocol as p

from .. import access
from ..errors import RagdError
from ..verbs.arguments import describe
from . import resources
from .events import Announcer
from .long_calls import LongCalls
from .prompts import add_prompts
from .tooldefs import add_tools

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ..verbs.runtime import Resident

INSTRUCTIONS = (
    "ragd keeps the user's folders of documents searchable. Use `search` to find passages (each result cites its "
    "file, heading path, page and line range, and links to the document's resources), then `read_chunk` or "
    "`read_document` to read around a hit; `recent_changes` lists what changed lately. Paths are absolute, or "
    "relative to a root. Resources ragd://dir/, ragd://file/, ragd://chunks/, ragd://orphans/ followed by an "
    "absolute path (without its leading slash) browse the knowledge base; resources/list pages through every "
    "document."
)
# How long a 2026-07-28 client may reuse a result (SEP-2549): the tools, templates and prompts change only with a
# new version of ragd; the documents change at any moment (and changes are announced).
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=3_600_000, scope="public"),
    "resources/templates/list": CacheHint(ttl_ms=3_600_000, scope="public"),
    "prompts/list": CacheHint(ttl_ms=3_600_000, scope="public"),
    "resources/list": CacheHint(ttl_ms=10_000, scope="private"),
    "resources/read": CacheHint(ttl_ms=0, scope="private"),
}
CALLER_KEY = "ragd.caller"  # the request's caller, in its ASGI scope (put there by edges/http.py's Guard)
PAGE_SIZE = 500  # documents per resources/list page
SCOPED_TOOLS = frozenset({"search", "query", "read_document", "read_chunk", "recent_changes", "status",
                          "wait_until_indexed"})  # fmt: skip


def caller_of(request: Any) -> access.Caller:
    """The caller of a request: an HTTP request's own (no caller there: nobody in particular, PUBLIC), else the
    caller bound to this control connection or session."""
    if request is None:
        return access.current()
    scope = getattr(request, "scope", None)
    found = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, access.Caller) else access.PUBLIC


def _request_of(context: Any) -> Any:
    try:
        return context.request_context.request if context is not None else None
    except ValueError:  # a context made outside a request (calls.py)
        return None


def _resource(fn: Callable[..., dict[str, Any]], rt: Resident, path: str) -> str:
    try:
        return json.dumps(fn(rt, path), ensure_ascii=False, indent=1)
    except RagdError as err:
        if err.code in (p.NOT_FOUND, p.BAD_REQUEST):
            raise MCPError(INVALID_PARAMS, str(err), {"path": path}) from None
        raise ResourceError(str(err)) from None


class RagdServer(MCPServer):
    """The SDK's server, with argument errors told as ragd tells them ("argument 'top_k' must be less than or
    equal to 100"), not as pydantic's multi-line report with its URL, and `resources/list` paginated."""

    def __init__(self, get_rt: Callable[[], Resident], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.get_rt = get_rt
        self.long_calls = LongCalls()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        with access.acting_as(caller_of(_request_of(context))) as caller:
            if not caller.full and name not in SCOPED_TOOLS and self._tool_manager.get_tool(name) is not None:
                raise ToolError(str(access.denied(f"the tool {name}", caller)))
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as err:
                if isinstance(err.__cause__, ValidationError):
                    raise ToolError(
                        f"Error executing tool {name}: {describe(err.__cause__)}"
                    ) from err.__cause__
                raise

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        with access.acting_as(caller_of(_request_of(context))):
            return await super().read_resource(uri, context)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        with access.acting_as(caller_of(_request_of(context))):
            return await super().get_prompt(name, arguments, context)

    async def _handle_list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        """Every document the agent knows, PAGE_SIZE at a time (resources.documents)."""
        cursor = params.cursor if params is not None else None
        try:
            with access.acting_as(caller_of(ctx.request)):
                page, after = await anyio.to_thread.run_sync(
                    resources.documents, self.get_rt(), cursor, PAGE_SIZE
                )
        except RagdError as err:
            raise MCPError(INVALID_PARAMS if err.code == p.BAD_REQUEST else -32603, str(err)) from None
        found = [Resource(uri=d["uri"], name=d["name"], title=d["title"], mime_type="application/json",
                          description=f"{d['state']} document") for d in page]  # fmt: skip
        return ListResourcesResult(resources=found, next_cursor=after)


def initialization_options(server: MCPServer) -> InitializationOptions:
    """The `initialize` answer of every session (stdio and HTTP), as `build_server` made it."""
    return server._lowlevel_server.create_initialization_options()


def _announce_list_changes(server: MCPServer) -> None:
    """Advertise `resources.listChanged` to 2025 clients on every transport. The SDK derives it from an argument
    of `create_initialization_options` that its own HTTP transport never passes, so the low-level server's
    default is made to pass it."""
    low = server._lowlevel_server
    low.create_initialization_options = partial(  # type: ignore[method-assign]
        type(low).create_initialization_options, low, NotificationOptions(resources_changed=True)
    )


def build_server(
    get_rt: Callable[[], Resident], version: str = "", announcer: Announcer | None = None
) -> RagdServer:
    """The MCP server; `get_rt` is called on every request (the schema generator builds one without an agent)."""
    announcer = announcer or Announcer()
    server = RagdServer(get_rt, name="ragd", version=version, instructions=INSTRUCTIONS, log_level="WARNING",
                        cache_hints=CACHE_HINTS, subscriptions=announcer.bus)  # fmt: skip
    announcer.install(server)
    _announce_list_changes(server)
    add_tools(server, get_rt, server.long_calls)
    _add_resources(server, get_rt)
    add_prompts(server, get_rt)
    return server


def _add_resources(server: MCPServer, get_rt: Callable[[], Resident]) -> None:
    # paths.py checks the paths (with messages naming the roots); the SDK's own checks would refuse absolute paths
    own_checks = ResourceSecurity(exempt_params=frozenset({"path"}))
    opts: dict[str, Any] = {"mime_type": "application/json", "security": own_checks}

    @server.resource("ragd://dir/{+path}", name="directory", title="Directory listing", **opts)
    def directory(path: str) -> str:
        """A directory's documents (with their state) and subdirectories; ragd://dir/ lists the roots."""
        return _resource(resources.directory, get_rt(), path)

    @server.resource("ragd://file/{+path}", name="file", title="Document metadata", **opts)
    def file(path: str) -> str:
        """A document's .ragjson metadata: state, chunk count, md5, embedding model, error."""
        return _resource(resources.file_info, get_rt(), path)

    @server.resource("ragd://chunks/{+path}", name="chunks", title="Chunks of a document", **opts)
    def chunks(path: str) -> str:
        """A document's chunks (content, heading path, page, line range) from its .ragjson entry."""
        return _resource(resources.file_chunks, get_rt(), path)

    @server.resource("ragd://orphans/{+path}", name="orphans", title="Orphans", **opts)
    def orphans(path: str) -> str:
        """Indexed sources under a directory whose file or sidecar is gone. ragd://orphans/ covers every root."""
        return _resource(resources.orphans, get_rt(), path)
