"""A document's identity: an id that stays with the document across renames and moves.

Every entry ragd writes carries it as the extra sidecar key `document_id` (docs/storage-format.md; readers of the
spec ignore it). A file with no entry yet gets a new random id, unless the agent's history (resident/history.py)
knows it as a document that was at another path with the same content (a move or rename: `JobContext.identify`).
An entry written before ids existed, or by the ragjson tool, has none: until it is written again its id is
derived from its path (`derived_id`), the same on every reading, and the history keeps what it was known as.
"""

from __future__ import annotations

import os
import uuid
from typing import Protocol

_NAMESPACE = uuid.UUID("5f0c39e6-6d2a-5a4e-9c8e-7a1e0d2b9c41")  # ragd's own namespace for derived ids


def new_id() -> str:
    return str(uuid.uuid4())


def derived_id(path: str | os.PathLike[str]) -> str:
    """The id of an entry that has none, from the file's path (stable while the file stays where it is)."""
    return str(uuid.uuid5(_NAMESPACE, os.fspath(path)))


class Identify(Protocol):
    def __call__(self, path: str, md5: str, known: str | None, had_entry: bool) -> str:
        """The id of the file at `path` (content `md5`, "" when not read): `known` when its entry has one; else
        what the history knows of this path, or of a document with this content that left another path."""
        ...


def fallback(path: str, md5: str, known: str | None, had_entry: bool) -> str:
    """The id without a history: the entry's own, else derived from the path (an entry without one) or new."""
    return known or (derived_id(path) if had_entry else new_id())
