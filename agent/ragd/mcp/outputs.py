"""The MCP tools' results as pydantic models: each tool's `outputSchema`, and the shape of its `structuredContent`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


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
    agent: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,  # absent on an index of one agent (zvec)
        description="on an index shared by several machines (Milvus): the agent whose machine holds the file",
    )
    metadata: dict[str, str | list[str]] | None = Field(
        default=None,
        exclude_if=lambda v: v is None,  # absent when the document has no metadata
        description="its document's metadata fields (tags a list; docs/metadata.md)",
    )


class FileHit(BaseModel):
    path: str = Field(description="absolute path of the document")
    rel_path: str
    root: str
    score: float = Field(description="its best passage's score")
    matches: int = Field(description="how many of its passages were among the query's candidates")
    chunks: list[SearchHit] = Field(description="its best passages, best first (up to 3)")
    agent: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,  # absent on an index of one agent (zvec)
        description="on an index shared by several machines (Milvus): the agent whose machine holds the file",
    )
    metadata: dict[str, str | list[str]] | None = Field(
        default=None,
        exclude_if=lambda v: v is None,  # absent when the document has no metadata
        description="its document's metadata fields (tags a list; docs/metadata.md)",
    )


class SearchOutput(BaseModel):
    results: list[SearchHit] = Field(
        description="the passages, best first (with `files`: each document's best)"
    )
    files: list[FileHit] | None = Field(default=None, description="with `files`: the documents, best first")


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


class StatusOutput(BaseModel):
    """As `ragctl status --json` (docs/protocol.md, verb `status`)."""

    agent: dict[str, Any] = Field(
        description="pid, version, state (starting, indexing, idle, paused, ...), uptime"
    )
    progress: dict[str, Any] = Field(description="the current phase: directories done of total, failures")
    roots: list[dict[str, Any]] = Field(description="each root: path, watcher, files, chunks, failures")
    embedder: dict[str, Any] = Field(description="the embedding model or API, its state and throughput")
    parse: dict[str, Any] = Field(
        description="whether OCR reads images and scanned PDF pages (ocr, ocr_off: why not) and its limits"
    )
    index: dict[str, Any] = Field(description="the vector index: chunks, sources, health")
    mcp: dict[str, Any] = Field(description="the MCP endpoint: url, error, requests, calls_running")


ChangeKind = Literal["indexed", "failed", "skipped", "removed"]


class Change(BaseModel):
    path: str
    rel_path: str = Field(description="path relative to its root")
    root: str | None
    change: ChangeKind = Field(description="indexed: new or changed content, now searchable")
    directory: bool = Field(description="a directory removed with everything in it")
    at: str = Field(description="when the agent recorded it (UTC, ISO 8601)")
    reason: str = Field(description="why it failed or was skipped")
    uri: str = Field(description="its ragd://file/ (or ragd://dir/) resource")


class ChangesOutput(BaseModel):
    since: str = Field(description="the start of the period (UTC, ISO 8601)")
    agent_started: str = Field(description="changes before this are not known")
    changes: list[Change]
    truncated: bool = Field(description="more changes than `limit` in the period")


class WaitOutput(BaseModel):
    waited_s: float


class ReindexOutput(BaseModel):
    scheduled: int = Field(description="directories reconciled")
    waited_s: float
