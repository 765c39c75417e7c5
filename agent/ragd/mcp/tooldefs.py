"""The MCP tools, registered on the server: `tools.py`'s functions with their schemas, annotations and results.

Every tool has an `outputSchema` (outputs.py) and answers with `structuredContent` conforming to it plus the same
JSON as text (for clients that read only text). `search` adds a `resource_link` to the file and the chunks
resources of each document it cites. Quick tools are synchronous: the SDK runs them in a worker thread. The long
ones (`wait_until_indexed`, `reindex`) report progress (`notifications/progress`, when the client sent a
progress token) and stop in the agent when the client cancels them (long_calls.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ContentBlock, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from ragctl.protocol import TOP_K

from ..errors import RagdError
from ..index import MAX_K
from ..verbs import sync as sync_verb
from ..verbs import wait as wait_verb
from ..verbs.documents import resource_uri
from . import tools
from .long_calls import LongCalls
from .outputs import (
    ChangesOutput,
    ChunkOutput,
    DocumentOutput,
    QueryOutput,
    ReindexOutput,
    SearchOutput,
    StatusOutput,
    WaitOutput,
)

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)  # fmt: skip
# reindex writes nothing but the index and sidecars ragd owns, and running it twice does what once does
INDEXING = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                           open_world_hint=False)  # fmt: skip
MAX_WAIT_S = 3600.0


def _tool(fn: Callable[..., T], *args: Any) -> T:
    try:
        return fn(*args)
    except RagdError as err:
        raise ToolError(str(err)) from None


def _one_line(fn: F) -> F:
    """A docstring wrapped for the source reads as one line in tools/list."""
    fn.__doc__ = " ".join((fn.__doc__ or "").split())
    return fn


def _result(model: BaseModel, links: list[ContentBlock] = ()) -> CallToolResult:  # type: ignore[assignment]
    """The structured result, its JSON as text, and any resource links."""
    data = {k: v for k, v in model.model_dump(mode="json").items() if v is not None}  # optional parts absent
    text = TextContent(type="text", text=json.dumps(data, ensure_ascii=False, indent=1))
    return CallToolResult(content=[text, *links], structured_content=data)


def _links(hits: list[Mapping[str, Any]]) -> list[ContentBlock]:
    """A link to the metadata and one to the chunks of each document cited, in the order first cited."""
    seen: dict[str, Mapping[str, Any]] = {}
    for hit in hits:
        seen.setdefault(hit["path"], hit)
    links: list[ContentBlock] = []
    for path, hit in seen.items():
        name = hit["rel_path"] or path
        links.append(ResourceLink(type="resource_link", uri=resource_uri("chunks", path), name=name,
                                  title=f"{name}: chunks", mime_type="application/json",
                                  description="the document's indexed chunks with their citation fields"))  # fmt: skip
        links.append(ResourceLink(type="resource_link", uri=resource_uri("file", path), name=name,
                                  title=f"{name}: metadata", mime_type="application/json",
                                  description="the document's index state, chunk count, model and error"))  # fmt: skip
    return links


WHERE_HELP = (
    'only documents whose metadata matches every filter: "KEY=VALUE" exact, "KEY^=PREFIX" starts with (case '
    'does not matter), e.g. ["tag=invoice", "product=X200", "version^=2."]; keys: title, tags (or tag), product, '
    "version, type, author, created (ISO 8601) and those the user configured"
)


def add_tools(server: MCPServer, get_rt: Callable[[], Resident], long_calls: LongCalls) -> None:
    _add_reading(server, get_rt)
    _add_agent(server, get_rt, long_calls)


def _add_reading(server: MCPServer, get_rt: Callable[[], Resident]) -> None:
    @server.tool(title="Search the knowledge base", annotations=READ_ONLY)
    @_one_line
    def search(
        query: Annotated[str, Field(description="what to look for: words, a question, a phrase (any language)")],
        top_k: Annotated[int, Field(ge=1, le=MAX_K, description="how many passages")] = TOP_K,
        path_prefix: Annotated[str | list[str] | None, Field(description="only under this directory, or these (absolute, or relative to a root)")] = None,
        mode: Annotated[Literal["hybrid", "vector", "keyword"], Field(description="hybrid: meaning + keywords")] = "hybrid",
        files: Annotated[bool, Field(description="documents rather than passages (for \"which files are about ...\"): top_k documents, each with its best passages and how many matched")] = False,
        reach: Annotated[Literal["agent", "all"], Field(description="on an index shared by several machines (Milvus): this agent's files, or every agent's (each result names its agent)")] = "agent",
        where: Annotated[list[str] | None, Field(description=WHERE_HELP)] = None,
        explain: Annotated[bool, Field(description="with each result, why it is where it is: its rank and score on each side (vector, keyword, glosses, lead) and how they were fused")] = False,
        scope: Annotated[Literal["agent", "all"] | None, Field(description="deprecated: the older name of reach")] = None,
    ) -> Annotated[CallToolResult, SearchOutput]:  # fmt: skip
        """Search the user's indexed documents; each result cites its file, heading path, page and line range,
        carries its document's metadata (tags, product, version, ...), and links to the document's chunks and
        metadata resources."""
        asked = {"query": query, "top_k": top_k, "path_prefix": path_prefix, "mode": mode, "files": files,
                 "reach": None if scope else reach, "scope": scope, "where": where, "explain": explain}  # fmt: skip
        found = SearchOutput.model_validate(_tool(tools.search, get_rt(), asked))
        return _result(found, _links([hit.model_dump() for hit in found.results]))

    @server.tool(title="Query (ragjson compatible)", annotations=READ_ONLY)
    def query(
        q: Annotated[str, Field(description="the query")],
        topn: Annotated[int, Field(ge=1, le=MAX_K, description="how many results")] = TOP_K,
        where: Annotated[list[str] | None, Field(description=WHERE_HELP)] = None,
    ) -> Annotated[CallToolResult, QueryOutput]:
        """Hybrid search answering a JSON list of {content, source, score}, as the ragjson tool's `query` does."""
        hits = _tool(tools.query, get_rt(), q, topn, where or [])
        text = json.dumps(hits, ensure_ascii=False, indent=1)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content={"result": hits}
        )

    @server.tool(title="Read a document", annotations=READ_ONLY)
    @_one_line
    def read_document(
        path: Annotated[str, Field(description="absolute path, or relative to a root (as in search results)")],
        start_line: Annotated[int | None, Field(ge=1, description="first line (1-based); default 1")] = None,
        end_line: Annotated[int | None, Field(ge=1, description="last line (inclusive); default the end")] = None,
    ) -> DocumentOutput:  # fmt: skip
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

    @server.tool(title="Recently changed documents", annotations=READ_ONLY)
    @_one_line
    def recent_changes(
        since_hours: Annotated[float, Field(gt=0, le=24 * 366, description="how far back, in hours")] = 24,
        path_prefix: Annotated[str | None, Field(description="only under this directory (absolute, or relative to a root)")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="at most this many documents")] = 100,
    ) -> ChangesOutput:  # fmt: skip
        """The documents created, changed, moved or renamed, deleted, restored, failed, recovered or skipped in
        the last `since_hours`, newest first (each once, with its latest change), from the agent's history of
        every document (kept across restarts)."""
        return ChangesOutput.model_validate(
            _tool(tools.recent_changes, get_rt(), since_hours, path_prefix, limit)
        )


def _add_agent(server: MCPServer, get_rt: Callable[[], Resident], long_calls: LongCalls) -> None:
    @server.tool(title="Agent status", annotations=READ_ONLY)
    def status() -> StatusOutput:
        """The agent's status: indexing progress, roots, failures, embedder and index (as `ragctl status --json`)."""
        return StatusOutput.model_validate(_tool(tools.status, get_rt()))

    @server.tool(title="Wait until indexed", annotations=READ_ONLY)
    @_one_line
    async def wait_until_indexed(
        ctx: Context,
        timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S, description="give up after this many seconds")] = 300,
        paths: Annotated[list[str] | None, Field(description="only these files or folders (absolute, or relative to a root): return once every change seen there is indexed, however busy the agent is elsewhere")] = None,
    ) -> WaitOutput:  # fmt: skip
        """Return once every change the agent has seen (under `paths`, when given) is indexed and searchable,
        reporting progress meanwhile; an error after `timeout_s`, or at once when the agent is paused with work
        to do."""
        rt = get_rt()
        args = wait_verb.WaitArgs(timeout=timeout_s, paths=_tool(tools.inside_roots, rt, paths or []))
        waited = await long_calls.run(
            ctx, "wait_until_indexed", lambda progress: wait_verb.wait(rt, args, progress)
        )
        return WaitOutput(waited_s=waited.get("waited_s", 0.0))

    @server.tool(title="Re-index now", annotations=INDEXING)
    @_one_line
    async def reindex(
        ctx: Context,
        path: Annotated[str | None, Field(description="a file or directory (absolute, or relative to a root); default every root")] = None,
        force: Annotated[bool, Field(description="re-process unchanged files too")] = False,
        timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S, description="stop waiting after this many seconds")] = 600,
    ) -> ReindexOutput:  # fmt: skip
        """Reconcile the index with the files under `path` now (changed files are re-indexed, deleted ones
        leave), and return once that is done, reporting progress meanwhile. Never changes the user's files."""
        rt = get_rt()
        args = sync_verb.SyncArgs(path=path, force=force, wait=True, timeout=timeout_s)
        done = await long_calls.run(ctx, "reindex", lambda progress: sync_verb.sync(rt, args, progress))
        return ReindexOutput(scheduled=done.get("scheduled", 0), waited_s=done.get("waited_s", 0.0))
