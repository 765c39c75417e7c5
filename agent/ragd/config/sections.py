"""The configuration's sections about what is indexed and how: the embedding model, the splitter, the index
backend, ignore rules, limits, parsing (OCR) and metadata keys; with the shared base of every section and the
value parsers (`parse_size`, `expand_paths`) the sections use."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ..metakeys import STANDARD, canonical_key
from ..model import SplitterSettings

LOCAL_MODEL = "use-multilingual-v3"
LOCAL_DIMENSION = 512
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


def parse_size(value: int | float | str) -> int:
    """`1048576`, `"50MB"`, `"64 MiB"` -> bytes."""
    if isinstance(value, int | float):
        return int(value)
    m = _SIZE.match(value)
    if not m or (m.group(2) is None and not m.group(1)):
        raise ValueError(f"not a size: {value!r} (expected bytes or e.g. '50MB', '64 MiB')")
    unit = (m.group(2) or "").lower()
    if unit not in _UNITS:
        raise ValueError(f"unknown size unit in {value!r}")
    return int(float(m.group(1)) * _UNITS[unit])


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingConfig(_Section):
    provider: Literal["local", "openai"] = "local"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str = "OPENAI_API_KEY"
    dimension: int | None = Field(default=None, gt=0)
    send_dimensions: bool = False
    batch_size: int = Field(default=64, ge=1, le=2048)
    concurrency: int = Field(default=4, ge=1, le=64)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=6, ge=0, le=50)
    max_backoff: float = Field(default=60.0, gt=0)
    # an API that failed a batch through all its retries is not sent texts for this long (doubling while it stays
    # down, up to 10 times as long); 0: never held down
    down_pause: float = Field(default=15.0, ge=0)
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _check_provider(self) -> EmbeddingConfig:
        if self.provider == "local":
            if self.model not in (None, LOCAL_MODEL):
                raise ValueError(
                    f"the local provider has one model, {LOCAL_MODEL!r}; set provider = 'openai' "
                    f"to use {self.model!r}"
                )
            if self.dimension not in (None, LOCAL_DIMENSION):
                raise ValueError(f"the local model has dimension {LOCAL_DIMENSION}")
        elif self.dimension is None and (self.model or "text-embedding-3-small") not in KNOWN_DIMENSIONS:
            raise ValueError(f"embedding.dimension is required for model {self.model!r}")
        return self

    @property
    def model_name(self) -> str:
        if self.provider == "local":
            return LOCAL_MODEL
        return self.model or "text-embedding-3-small"

    @property
    def dim(self) -> int:
        if self.provider == "local":
            return LOCAL_DIMENSION
        return self.dimension or KNOWN_DIMENSIONS[self.model_name]

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return (os.environ if environ is None else environ).get(self.api_key_env)


class SplitterConfig(_Section):
    kind: Literal["recursive", "markdown"] = "recursive"
    chunk_size: int = Field(default=1000, ge=50, le=100_000)
    chunk_overlap: int = Field(default=200, ge=0)

    @model_validator(mode="after")
    def _overlap_smaller(self) -> SplitterConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("splitter.chunk_overlap must be smaller than splitter.chunk_size")
        return self

    def settings(self) -> SplitterSettings:
        return SplitterSettings(self.kind, self.chunk_size, self.chunk_overlap)


class IndexConfig(_Section):
    backend: Literal["zvec", "milvus"] = "zvec"
    # "auto": flat (exact) until the collection holds `hnsw_after` chunks, then an HNSW graph, built in the
    # background on a copy while searches go on (docs/zvec-notes.md)
    type: Literal["flat", "hnsw", "auto"] = "auto"
    hnsw_after: int = Field(default=50_000, ge=1_000)
    hnsw_m: int = Field(default=16, ge=4, le=128)
    hnsw_ef_construction: int = Field(default=200, ge=16, le=2000)
    # how wide an HNSW search looks (recall against speed); 0: by size, from 512 to zvec's limit of 2048
    hnsw_ef: int = Field(default=0, ge=0, le=2048)
    optimize_after: int = Field(default=5000, ge=100)
    # backend = "milvus" (docs/scale-out.md): a server or cluster (`http://host:19530`), or a Milvus Lite file
    # (`~/kb.db`; "" is `milvus.db` in the data directory)
    uri: str = ""
    token: SecretStr = SecretStr("")  # "user:password" or an API key; $RAGD_MILVUS_TOKEN when empty
    db_name: str = ""  # "" is the server's default database
    collection_prefix: str = Field(default="ragd_", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    agent_id: str = Field(default="", max_length=200)  # "" is "<host name>:<data directory>"
    timeout: float = Field(default=10.0, gt=0, le=600)  # seconds a call to the Milvus server may take

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        value = value.strip()
        if not value or re.match(r"^(https?|tcp|grpc|unix)://", value) or value.endswith(".db"):
            return value
        raise ValueError("index.uri must be a Milvus server's address (http://host:19530, https://…) or the path "
                         f"of a Milvus Lite file ending in .db, not {value!r}")  # fmt: skip


DEFAULT_IGNORE = (
    "*~",
    ".*.swp",
    ".*.swx",
    ".#*",
    "*.tmp",
    ".goutputstream-*",
    "4913",
    "~$*",
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
)
DEFAULT_SKIP_DIRS = ("node_modules", "__pycache__", "venv", "site-packages")


class IgnoreConfig(_Section):
    patterns: tuple[str, ...] = ()  # extra file-name globs, on top of the built-in editor-temp patterns
    skip_dirs: tuple[str, ...] = DEFAULT_SKIP_DIRS  # directory names never descended into (dot-dirs always)

    @property
    def file_patterns(self) -> tuple[str, ...]:
        return DEFAULT_IGNORE + self.patterns


class LimitsConfig(_Section):
    max_file_size: int = 64 * 1024**2
    max_text_chars: int = Field(default=5_000_000, ge=1000)
    parse_timeout: float = Field(default=120.0, gt=0)

    @field_validator("max_file_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        return parse_size(v)


class ParseConfig(_Section):
    """OCR of images and of PDF pages without a text layer (parse/ocr.py)."""

    ocr: bool = (
        True  # only where rapidocr is installed; off: images are SKIPPED, scanned PDF pages left empty
    )
    ocr_page_timeout: float = Field(
        default=30.0, gt=0, le=3600
    )  # seconds one page may take: then it is stopped, listed as not read, and the next page read
    ocr_max_pages: int = Field(
        default=50, ge=1, le=10_000
    )  # pages OCR'd per file; the rest are listed as skipped
    ocr_min_confidence: float = Field(default=0.8, ge=0, le=1)  # a page whose mean confidence is below: "low"


class MetadataConfig(_Section):
    """Document metadata (docs/metadata.md): the keys, beyond the built-in ones, that become search fields."""

    keys: tuple[
        str, ...
    ] = ()  # e.g. ["customer", "status"]: front matter and folder default keys to filter on

    @field_validator("keys", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple):
            return value
        out = []
        for raw in value:
            key = canonical_key(raw) if isinstance(raw, str) else None
            if key is None:
                raise ValueError(
                    f"{raw!r} is not a metadata key (lower-case letters, digits, _ . -; at most 64)"
                )
            if key not in STANDARD and key not in out:
                out.append(key)
        return tuple(out)


def expand_paths(v: Any) -> Any:
    """A list of paths from the config or the command line: `~` expanded, made absolute and resolved."""
    if isinstance(v, list | tuple):
        return tuple(Path(os.path.expanduser(str(p))).resolve() for p in v)
    return v
