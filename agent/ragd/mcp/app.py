"""The agent's MCP server: `tools.py` and `resources.py` registered with the MCP SDK's `MCPServer`, and its HTTP app.

One `MCPServer` per agent serves both transports: streamable HTTP (`http_app`, run by `server.McpService`) and
the stdio bridge `ragctl mcp` (through the control verbs in edges/mcp_verbs.py). Tool functions are synchronous, so the SDK
runs each call in a worker thread (anyio.to_thread) and the event loop never waits on a search or a model load.
Domain errors become tool errors (`isError`) / resource errors that carry their message and hint.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from ragctl import protocol as p

from ..errors import RagdError
from ..verbs.arguments import describe
from . import resources, tools

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
PATH = "/mcp"
INSTRUCTIONS = (
    "ragd keeps the user's folders of documents searchable. Use `search` to find passages (each result cites its "
    "file, heading path, page and line range), then `read_chunk` or `read_document` to read around a hit. Paths "
    "are absolute, or relative to a root. Resources ragd://dir/, ragd://file/, ragd://chunks/, ragd://orphans/ "
    "followed by an absolute path (without its leading slash) browse the knowledge base."
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class SearchHit(BaseModel):
    path: str = Field(description="absolute path of the document")
    rel_path: str = Field(description="path relative to its root")
    root: str
    chunk_index: int = Field(description="for read_chunk")
    score: float = Field(description="higher is better (RRF for hybrid, cosine for vector, BM25 for keyword)")
    content: str
    heading_path: list[str] = Field(description="headings above the passage, outermost first")
    page: int | None = Field(description="1-based page (PDF), else null")
    start_line: int = Field(description="first line of the passage in the document's text (1-based)")
    end_line: int
    snippet: str


class SearchOutput(BaseModel):
    results: list[SearchHit]


class QueryHit(BaseModel):
    content: str
    source: str = Field(description="absolute path of the document")
    score: float


class QueryOutput(BaseModel):
    result: list[QueryHit]


class DocumentOutput(BaseModel):
    path: str
    root: str
    source: Literal["file", "index"] = Field(
        description="read from the file itself, or rebuilt from its chunks"
    )
    text: str
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool = Field(description="true when the window stops before end_line (size limit)")
    next_start_line: int | None = Field(description="where to continue reading, when truncated")


class ChunkItem(BaseModel):
    chunk_index: int
    content: str
    heading_path: list[str]
    page: int | None
    start_line: int
    end_line: int


class ChunkOutput(BaseModel):
    path: str
    root: str
    chunk_index: int
    chunk_count: int
    chunks: list[ChunkItem]


def _tool(fn: Callable[..., T], *args: Any) -> T:
    try:
        return fn(*args)
    except RagdError as err:
        raise ToolError(str(err)) from None


def _resource(fn: Callable[..., dict[str, Any]], rt: Resident, path: str) -> str:
    try:
        return json.dumps(fn(rt, path), ensure_ascii=False, indent=1)
    except RagdError as err:
        if err.code in (p.NOT_FOUND, p.BAD_REQUEST):
            raise MCPError(INVALID_PARAMS, str(err), {"path": path}) from None
        raise ResourceError(str(err)) from None


def _one_line(fn: F) -> F:
    """A docstring wrapped for the source reads as one line in tools/list."""
    fn.__doc__ = " ".join((fn.__doc__ or "").split())
    return fn


class RagdServer(MCPServer):
    """The SDK's server, with argument errors told as ragd tells them ("argument 'top_k' must be less than or
    equal to 100"), not as pydantic's multi-line report with its URL."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as err:
            if isinstance(err.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {name}: {describe(err.__cause__)}") from err.__cause__
            raise


def build_server(get_rt: Callable[[], Resident], version: str = "") -> MCPServer:
    """The MCP server; `get_rt` is called on every request (the schema generator builds one without an agent)."""
    server: MCPServer = RagdServer("ragd", version=version, instructions=INSTRUCTIONS, log_level="WARNING")
    _add_tools(server, get_rt)
    _add_resources(server, get_rt)
    return server


def _add_tools(server: MCPServer, get_rt: Callable[[], Resident]) -> None:
    @server.tool(title="Search the knowledge base", annotations=READ_ONLY)
    def search(
        query: Annotated[str, Field(description="what to look for: words, a question, a phrase (any language)")],
        top_k: Annotated[int, Field(ge=1, le=100, description="how many passages")] = 5,
        path_prefix: Annotated[str | None, Field(description="only under this directory (absolute, or relative to a root)")] = None,
        mode: Annotated[Literal["hybrid", "vector", "keyword"], Field(description="hybrid: meaning + keywords")] = "hybrid",
    ) -> SearchOutput:  # fmt: skip
        """Search the user's indexed documents; each result cites its file, heading path, page and line range."""
        return SearchOutput.model_validate(_tool(tools.search, get_rt(), query, top_k, path_prefix, mode))

    @server.tool(title="Query (ragjson compatible)", annotations=READ_ONLY)
    def query(
        q: Annotated[str, Field(description="the query")],
        topn: Annotated[int, Field(ge=1, le=100, description="how many results")] = 5,
    ) -> Annotated[CallToolResult, QueryOutput]:
        """Hybrid search answering a JSON list of {content, source, score}, as the ragjson tool's `query` does."""
        hits = _tool(tools.query, get_rt(), q, topn)
        text = json.dumps(hits, ensure_ascii=False, indent=1)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content={"result": hits}
        )

    @server.tool(title="Read a document", annotations=READ_ONLY)
    @_one_line
    def read_document(
        path: Annotated[
            str, Field(description="absolute path, or relative to a root (as in search results)")
        ],
        start_line: Annotated[int | None, Field(ge=1, description="first line (1-based); default 1")] = None,
        end_line: Annotated[
            int | None, Field(ge=1, description="last line (inclusive); default the end")
        ] = None,
    ) -> DocumentOutput:
        """The text of a document or of a range of its lines (numbered as in search results); 100,000 characters
        at most per call: when truncated, continue from next_start_line."""
        return DocumentOutput.model_validate(_tool(tools.read_document, get_rt(), path, start_line, end_line))

    @server.tool(title="Read a chunk", annotations=READ_ONLY)
    def read_chunk(
        path: Annotated[str, Field(description="absolute path, or relative to a root")],
        chunk_index: Annotated[int, Field(ge=0, description="from a search result")],
        neighbors: Annotated[int, Field(ge=0, le=20, description="chunks to add on each side")] = 0,
    ) -> ChunkOutput:
        """One indexed chunk of a document with its citation fields, and optionally the chunks around it."""
        return ChunkOutput.model_validate(_tool(tools.read_chunk, get_rt(), path, chunk_index, neighbors))

    @server.tool(title="Agent status", annotations=READ_ONLY)
    def status() -> dict[str, Any]:
        """The agent's status: indexing progress, roots, failures, embedder and index (as `ragctl status --json`)."""
        return _tool(tools.status, get_rt())


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


# -- HTTP -----------------------------------------------------------------------------------------------------
def transport_security(host: str, port: int, extra_origins: tuple[str, ...]) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: only this loopback endpoint's own names are accepted."""
    names = {host, "127.0.0.1", "localhost"} if host != "::1" else {"[::1]", "localhost"}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{n}:{port}" for n in names),
        allowed_origins=sorted(f"http://{n}:{port}" for n in names) + list(extra_origins),
    )


class Guard:
    """ASGI middleware in front of the MCP app: counts requests and, with a token configured, refuses (401) any
    request that does not carry `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests += 1
            if self.token is not None and not self._authorized(scope):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token or b"")
        return False


async def _unauthorized(send: Send) -> None:
    body = (
        b'{"error": "unauthorized: this MCP endpoint needs Authorization: Bearer <token> (see [mcp] token)"}'
    )
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="ragd"'),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(
    server: MCPServer, host: str, port: int, extra_origins: tuple[str, ...], token: str | None
) -> Guard:
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        transport_security=transport_security(host, port, extra_origins),
        host=host,
    )
    return Guard(app, token)
