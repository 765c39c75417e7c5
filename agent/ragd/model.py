"""Typed values that flow between the pipeline stages (parse -> split -> embed -> sidecar).

Stages never import one another; they share only these values. Only the directory job sequences them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Fields = dict[str, tuple[str, ...]]  # a document's metadata: each key's values (pipeline/metadata.py)

ZERO = "zero"
NOT_FINITE = "not finite"


def md5_hex(text: str) -> str:
    """The md5 hex digest of UTF-8 text, as RAG-Storage-Spec v2.4 uses for `content_hash`."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def vector_problem(vector: np.ndarray) -> str | None:
    """None if the vector can be stored and searched, else ZERO or NOT_FINITE: its float32 L2 norm must be finite
    and non-zero (the index's own test). The one definition the embed stage, the sidecars' vector reuse and the
    index sync share, so a vector accepted by one is never refused by another. Many vectors: `vector_problems`."""
    return vector_problems(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]


def vector_problems(vectors: np.ndarray) -> list[str | None]:
    """`vector_problem` of each row of an (n, d) array, their norms computed in one pass. Each numpy operation
    gives up the interpreter lock and waits to take it back, which in the agent's busy process cost far more than
    the arithmetic: a norm per vector took a third of a second of 4,000 vectors on the referee's run."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        norms = np.linalg.norm(np.asarray(vectors, dtype=np.float32), axis=1)
    return [NOT_FINITE if not math.isfinite(n) else ZERO if n == 0.0 else None for n in norms.tolist()]


def fields_json(fields: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Metadata fields as the sidecar and search results show them: `tags` a list, another key a string (a list if
    several)."""
    return {k: list(v) if k == "tags" or len(v) != 1 else v[0] for k, v in fields.items()}


@dataclass(frozen=True)
class Extracted:
    """Metadata as one source gave it (a document's front matter or properties, a folder defaults file)."""

    fields: Fields = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return fields_json(self.fields)


@dataclass(frozen=True)
class PageSpan:
    """Page `number` (1-based) covers `text[start:end]` of the parsed document."""

    number: int
    start: int
    end: int


@dataclass(frozen=True)
class OcrReport:
    """What OCR did for a document: the pages whose text it read, their mean confidence (weighted by characters),
    the pages below `parse.ocr_min_confidence`, and the pages it did not read, each with the reason."""

    pages: tuple[int, ...] = ()
    confidence: float = 0.0
    low_pages: tuple[int, ...] = ()
    not_read: tuple[tuple[int, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The sidecar entry's optional `ocr` key (docs/storage-format.md)."""
        data: dict[str, Any] = {"pages": list(self.pages), "confidence": self.confidence}
        if self.low_pages:
            data["low_confidence_pages"] = list(self.low_pages)
        if self.not_read:
            data["not_read"] = [{"page": n, "reason": why} for n, why in self.not_read]
        return data


@dataclass(frozen=True)
class Document:
    """What `parse` makes of a source file: markdown (or plain) text plus what citations need."""

    path: Path
    text: str
    parser: str  # e.g. "text", "html", "markitdown", "pdfium", "soffice+markitdown"
    title: str | None = None
    is_markdown: bool = True  # whether the text carries markdown structure (headings, fences)
    markup: str | None = None  # of a plain text whose section titles the splitter knows: "rst" or "org"
    pages: tuple[PageSpan, ...] = ()  # empty when the format has no pages
    encoding: str | None = None  # detected encoding of a text source, when it was not UTF-8
    ocr: OcrReport | None = None  # set when some of the text came from OCR (or OCR left pages unread)
    metadata: Extracted | None = None  # the document's own metadata (front matter, document properties)
    warning: str | None = None  # what was read with damage, e.g. "2 undecodable bytes replaced (U+FFFD)"

    def page_at(self, offset: int) -> int | None:
        for span in self.pages:
            if span.start <= offset < span.end:
                return span.number
        return self.pages[-1].number if self.pages and offset >= self.pages[-1].end else None


@dataclass(frozen=True)
class Chunk:
    """One piece of a document, as stored in a `.ragjson` and embedded.

    `content` is what is stored and hashed; `header` is a short context line (file name, title, heading path)
    that is prepended only for embedding and keyword indexing (see `embed_text`).
    """

    content: str
    start_index: int
    end_index: int
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    overlap_size: int = 0  # characters shared with the previous chunk
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    header: str = ""

    @property
    def content_hash(self) -> str:
        return md5_hex(self.content)

    @property
    def embed_text(self) -> str:
        return f"{self.header}\n\n{self.content}" if self.header else self.content


@dataclass(frozen=True)
class SplitterSettings:
    kind: str = "recursive"  # "recursive" | "markdown"
    chunk_size: int = 1000
    chunk_overlap: int = 200

    @property
    def fingerprint(self) -> str:
        return f"{self.kind}:{self.chunk_size}:{self.chunk_overlap}"


@dataclass(frozen=True)
class EmbeddingIdentity:
    """Model name + dimension (+ splitter settings): vectors of different identities are never mixed."""

    model_name: str
    dimension: int
    splitter: SplitterSettings = field(default_factory=SplitterSettings)

    @property
    def fingerprint(self) -> str:
        return f"{self.model_name}:{self.dimension}:{self.splitter.fingerprint}"
