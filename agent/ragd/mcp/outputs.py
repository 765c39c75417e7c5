"""The MCP tools' results as pydantic models: each tool's `outputSchema`, and the shape of its `structuredContent`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..vocabulary import ChangeKind


def _absent_when_none(description: str) -> Any:
    """An optional field left out of the answer when it has no value."""
    return Field(default=None, exclude_if=lambda v: v is None, description=description)


class _Document(BaseModel):
    """What a passage and a document hit both say of their document, each left out when unknown."""

    agent: str | None = _absent_when_none(
        "on an index shared by several machines (Milvus): the agent whose machine holds the file"
    )  # absent on an index of one agent (zvec)
    document_id: str | None = _absent_when_none(
        "the document's identity, kept across renames and moves (absent when not yet known)"
    )
    modified_at: str | None = _absent_when_none(
        "when the file's indexed version was last modified (UTC, ISO 8601)"
    )
    indexed_at: str | None = _absent_when_none("when that version was indexed (UTC, ISO 8601)")
    metadata: dict[str, str | list[str]] | None = _absent_when_none(
        "its document's metadata fields (tags a list; docs/metadata.md)"
    )  # absent when the document has no metadata


class SearchHit(_Document):
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
    duplicates: list[str] | None = _absent_when_none(
        "other files with the same content, folded into this hit"
    )
    explain: dict[str, Any] | None = _absent_when_none(
        "with `explain`: per side (vector, keyword, glosses, lead) the document's rank and score there and its "
        "share of the fused score (null: not found on that side), the document's fused rank and score, the "
        "passage's place among its document's, and the result's score (docs/protocol.md)"
    )


class FileHit(_Document):
    path: str = Field(description="absolute path of the document")
    rel_path: str
    root: str
    score: float = Field(description="its best passage's score")
    matches: int = Field(description="how many of its passages were among the query's candidates")
    chunks: list[SearchHit] = Field(description="its best passages, best first (up to 3)")


class SearchOutput(BaseModel):
    results: list[SearchHit] = Field(
        description="the passages, best first (with `files`: each document's best)"
    )
    files: list[FileHit] | None = Field(default=None, description="with `files`: the documents, best first")
    explain: dict[str, Any] | None = Field(
        default=None, description="with `explain`: how the sides were fused (weights, constants, floors)"
    )


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
    history: dict[str, Any] = Field(
        description="the documents' history: documents by state, duplicates (groups, files), events, size"
    )
    index: dict[str, Any] = Field(description="the vector index: chunks, sources, health")
    mcp: dict[str, Any] = Field(
        description="the MCP endpoint: url, ui_url (the web page), error, requests, calls_running"
    )
    health: dict[str, Any] = Field(
        default_factory=dict,
        description="what works on this machine: ocr, legacy_office, watching, http, folders, embeddings, disk, "
        "each with its state (ok, degraded, unavailable; starting) and the reason",
    )


# every ChangeKind (tests/unit/core/test_vocabulary.py holds them level), spelled out as the schema's enum
ChangeName = Literal[
    ChangeKind.CREATED,
    ChangeKind.CHANGED,
    ChangeKind.MOVED,
    ChangeKind.DELETED,
    ChangeKind.RESTORED,
    ChangeKind.FAILED,
    ChangeKind.RECOVERED,
    ChangeKind.SKIPPED,
    ChangeKind.RELABELED,
]


class Change(BaseModel):
    path: str
    rel_path: str = Field(description="path relative to its root")
    root: str | None
    change: ChangeName = Field(
        description="created (new document), changed (new content, now searchable), moved (renamed or moved: "
        "old_path), deleted, restored, failed, recovered (indexed again after failing), skipped (not indexable)"
    )
    directory: bool = Field(description="always false (a folder removed is a deleted event per document)")
    at: str = Field(description="when it happened (UTC, ISO 8601)")
    reason: str = Field(description="why it failed or was skipped")
    uri: str = Field(description="its ragd://file/ resource")
    document_id: str = Field(description="the document's identity, kept across renames and moves")
    old_path: str | None = Field(description="for moved: where the document was before")


class ChangesOutput(BaseModel):
    since: str = Field(description="the start of the period (UTC, ISO 8601)")
    agent_started: str = Field(description="when the agent started (its history goes back further)")
    changes: list[Change]
    truncated: bool = Field(description="more changes than `limit` in the period")


class WaitOutput(BaseModel):
    waited_s: float


class ReindexOutput(BaseModel):
    scheduled: int = Field(description="directories reconciled")
    waited_s: float
