"""What a directory's store holds, asked of it: the names of its entries without reading them, every entry of the
folder read at once (`load_entries`), and the vectors its entries hold for reuse (`vectors_by_hash`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import StorageError
from ...model import vector_problem
from .entry import FileEntry
from .files import DELETED_SUFFIX, ENTRY_SUFFIX, rag_dir, read_entry

LEAD_KEY = "lead:"  # before a lead's content_hash in a reuse lookup (vectors_by_hash)


@dataclass(frozen=True)
class EntryName:
    """One name found in a `.rag/` folder."""

    name: str  # the source's name in the directory
    path: Path
    deleted: bool


def list_entries(directory: Path) -> Iterator[EntryName]:
    """Names of the entries (live and .deleted) in directory/.rag/, without reading them."""
    try:
        with os.scandir(rag_dir(directory)) as it:
            for de in it:
                if de.name.endswith(ENTRY_SUFFIX):
                    yield EntryName(de.name[: -len(ENTRY_SUFFIX)], Path(de.path), False)
                elif de.name.endswith(DELETED_SUFFIX):
                    yield EntryName(de.name[: -len(DELETED_SUFFIX)], Path(de.path), True)
    except (FileNotFoundError, NotADirectoryError):  # no store (a file named .rag fails its own job only)
        return
    except PermissionError:  # a folder the agent cannot read: nothing in it can be served (its job says why)
        return


@dataclass
class Entries:
    """Everything in one `.rag/` folder: live entries by name (None: a directory entry), deleted names, and the
    names whose entry could not be read (with why)."""

    live: dict[str, FileEntry | None] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    unreadable: dict[str, str] = field(default_factory=dict)


def load_entries(directory: Path) -> Entries:
    found = Entries()
    for en in list_entries(directory):
        if en.deleted:
            found.deleted.add(en.name)
            continue
        try:
            found.live[en.name] = read_entry(en.path)
        except StorageError as err:
            found.unreadable[en.name] = err.message
    return found


def vectors_by_hash(entries: Iterable[FileEntry], model_name: str, dimension: int) -> dict[str, str]:
    """content_hash -> vector_base64 from entries of the same embedding identity (for reuse), and LEAD_KEY +
    content_hash for their leads (a lead's text may be a chunk's, whose vector is of its text with its header); a
    vector that is zero, not finite or of the wrong length (another tool's, or an older version's) is never passed
    on."""
    found: dict[str, str] = {}
    for entry in entries:
        if entry.model_name != model_name or entry.dimension != dimension:
            continue
        for chunk in entry.chunks:
            vec = chunk.vector
            if vec is not None and vec.shape[0] == dimension and vector_problem(vec) is None:
                found.setdefault(chunk.content_hash, chunk.vector_base64)  # type: ignore[arg-type]
        if (lead := entry.lead) is not None and lead.vector_base64:
            with contextlib.suppress(ValueError):  # not base64: not passed on
                vec = lead.vector
                if vec is not None and vec.shape[0] == dimension and vector_problem(vec) is None:
                    found.setdefault(LEAD_KEY + lead.content_hash, lead.vector_base64)
    return found
