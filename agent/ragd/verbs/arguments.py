"""The verbs' arguments: one pydantic model per verb (in its module), parsed here with one kind of error message.

Every model is strict (a number is not a string, a flag is a boolean) and refuses unknown arguments, so a typo is
an error rather than a default. One name per concept on every surface (docs/protocol.md): `top_k`, `path_prefix`,
`reach`, `path`, `timeout`. `search`'s model is the `SearchQuery` itself (index/query/searchquery.py), which also
takes the older names (`k`, `path`, `scope`) for a version, with a warning in the log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ragctl import protocol as p

from ..errors import RagdError
from ..paths import root_of

A = TypeVar("A", bound=BaseModel)


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


def bad(message: str, hint: str = "") -> RagdError:
    return RagdError(message, hint, code=p.BAD_REQUEST)


def parse(model: type[A], raw: Mapping[str, Any] | None) -> A:
    """`raw` (a request's args) as `model`; RagdError(bad_request) naming the argument and what it must be."""
    try:
        return model.model_validate(dict(raw or {}))
    except ValidationError as err:
        raise bad(describe(err), "see docs/protocol.md for the verb's arguments") from None


def describe(err: ValidationError) -> str:
    """A validation error as one sentence per problem: "argument 'top_k' must be less than or equal to 100"."""
    parts = []
    for e in err.errors(include_url=False):
        name = ".".join(str(x) for x in e["loc"]) or "arguments"
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown argument {name!r}")
        elif e["type"] == "missing":
            parts.append(f"argument {name!r} is required")
        else:
            msg = e["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
            parts.append(
                f"argument {name!r} must be {msg}" if msg != e["msg"] else f"argument {name!r}: {msg}"
            )
    return "; ".join(parts)


def absolute(raw: str, name: str = "path") -> Path:
    """A path argument: absolute (the caller resolves relative paths against its own working directory)."""
    if "\0" in raw:
        raise bad(f"{name} contains a NUL byte")
    path = Path(os.path.normpath(raw))
    if not path.is_absolute():
        raise bad(f"{name} must be an absolute path: {raw}")
    return path


def under_a_root(raw: str | None, roots: Sequence[Path], name: str = "path") -> Path | None:
    """An optional path argument that must lie under one of `roots` (not_found otherwise, naming the roots)."""
    if raw is None:
        return None
    path = absolute(raw, name)
    if root_of(path, roots) is None:
        raise RagdError(f"{path} is not under any root of this agent",
                        "see `ragctl roots list`; add it with `ragctl roots add`", code=p.NOT_FOUND)  # fmt: skip
    return path
