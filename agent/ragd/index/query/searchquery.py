"""`SearchQuery`: one search, validated once where it comes in, trusted below.

Every edge builds one (the control verb `search`, the MCP tools, the web page, `ragd search`) from the names of
docs/protocol.md, and the verb and the search service take it as it is: nothing under the edges checks a search
argument again. The names of the version before (`k`, `path`, `scope`) are still accepted for one version; each
use logs a warning.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragctl.protocol import TOP_K
from ragctl.protocol.search_flags import RENAMED_ARGS

from ...errors import RagdError
from ..backend import MAX_K
from ..where import Where, parse_all

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000


def _usage(message: str, hint: str) -> RagdError:
    return RagdError(message, hint, code="usage")


def _tuple(value: Any) -> Any:
    """A JSON list as the tuple a frozen query keeps (anything else is left for the type check to refuse)."""
    return tuple(value) if isinstance(value, list) else value


_WARNED: set[str] = set()  # the older argument names already warned about in this process


class SearchQuery(BaseModel):
    """A search as asked: strict (a number is not a string), unknown arguments refused, frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    query: str  # as given; `text` is what is searched for
    top_k: int = Field(default=TOP_K, ge=1, le=MAX_K)  # how many results
    mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
    path_prefix: tuple[str, ...] = ()  # only under these directories: absolute, or relative to a root
    ext: tuple[str, ...] = ()  # only files with these extensions
    one_per_file: bool = False
    files: bool = False  # documents rather than chunks: `files` in the answer, `results` their best chunks
    reach: Literal["agent", "all"] = "agent"  # "all": every agent's files on a shared index (Milvus)
    # metadata filters, all must match: "tag=invoice", "version^=2." (index/where.py)
    where: tuple[str, ...] = ()
    explain: bool = False  # each result's rank and score on each side, and how fusion combined them

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, raw: Any) -> Any:
        """The older names as the new ones, each with a warning in the log, once per process and name (a client
        that searches with `k` every few seconds filled the journal with it), accepted for one version."""
        if not isinstance(raw, dict) or not RENAMED_ARGS.keys() & raw.keys():
            return raw
        raw = dict(raw)
        for old, new in RENAMED_ARGS.items():
            if old in raw:
                if new in raw:
                    raise _usage(f"search arguments {old!r} and {new!r} are the same: give only {new!r}",
                                 f"{old!r} is the older name (docs/protocol.md)")  # fmt: skip
                if old not in _WARNED:
                    _WARNED.add(old)
                    log.warning("search argument %r is deprecated and will be removed with the next version: use "
                                "%r (said once)", old, new)  # fmt: skip
                raw[new] = raw.pop(old)
        return raw

    @field_validator("path_prefix", "where", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        """One string as a list of one (None as none); a list as the tuple it is kept as."""
        return (value,) if isinstance(value, str) else () if value is None else _tuple(value)

    @field_validator("ext", mode="before")
    @classmethod
    def _many(cls, value: Any) -> Any:
        return _tuple(value)

    @field_validator("query")
    @classmethod
    def _words(cls, value: str) -> str:
        if not value.strip():
            raise _usage("the search query is empty", "give some words to search for")
        if len(value) > MAX_QUERY_CHARS:
            raise _usage(f"the search query is too long ({len(value)} characters)",
                         f"use at most {MAX_QUERY_CHARS} characters")  # fmt: skip
        return value

    @field_validator("path_prefix")
    @classmethod
    def _directories(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Each a directory; whether it stays inside the roots is the verb's to say (it knows them)."""
        if any(not p.strip() for p in value):
            raise _usage("path_prefix may not be empty", "give a directory, absolute or relative to a root")
        return value

    @field_validator("where")
    @classmethod
    def _filters(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        parse_all(value)  # RagdError(usage) naming the filter that is not one
        return value

    @property
    def text(self) -> str:
        """What is searched for: the query without the spaces around it."""
        return self.query.strip()

    @property
    def filters(self) -> tuple[Where, ...]:
        return parse_all(self.where)
