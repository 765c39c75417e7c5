"""The one vocabulary of states and changes: what a file is in, what happened to a document, what a change note
says. Every module names them from here; their values are the strings the sidecars, the change notes, the history
and every status surface (the wire, `--json`, MCP, the web page) have always carried, so a `StrEnum` member is
that string wherever it goes (JSON, SQLite, a comparison with the plain string).

- `FileState`: a file's state. The first seven are an entry's `processing.status` (RAG-Storage-Spec v2.4, shared
  with the ragjson tool: never renamed); the next four only a directory job's outcome; the last six only what
  `ragd status` shows of a file read from its sidecars.
- `ChangeKind`: what happened to a document, as its history records it (`ragctl changes`, MCP's
  `recent_changes`, the web page) and as the agent announces it (resident/changes.py).
- `NoteStatus`: an event's `status` in a change note (pipeline/mushroom.py, shared with the ragjson tool).
"""

from __future__ import annotations

from enum import StrEnum


class FileState(StrEnum):
    # an entry's processing.status (the spec's)
    INITIAL = "INITIAL"
    CHUNKING = "CHUNKING"
    CHUNKED = "CHUNKED"
    EMBEDDING = "EMBEDDING"
    EMBEDDED = "EMBEDDED"
    SKIPPED = "SKIPPED"
    FAILED = "FAILED"
    # a directory job's outcome only
    UNCHANGED = "UNCHANGED"  # known from its entry: nothing done (the outcome's `recorded` says which state)
    TOUCHED = "TOUCHED"  # its stat changed, not its content: the entry's stat refreshed
    RELABELED = "RELABELED"  # same content, its metadata made again (the folder defaults or the keys changed)
    ABANDONED = "ABANDONED"  # left as it was: the agent stopped, or its root was removed, while its job ran
    # `ragd status` only (edges/filestatus.py)
    NEW = "NEW"  # no entry yet
    CHANGED = "CHANGED"  # its entry is for other content
    STALE = "STALE"  # embedded with another identity (model, dimension, splitter)
    PENDING = "PENDING"  # processing stopped part-way (an entry still CHUNKED, say)
    DELETED = "DELETED"  # its entry is left, or marked deleted, with the file gone
    TRACKED = "TRACKED"  # a folder with its directory entry


# What a file's job ends with, and what the tracker, the status and the history count.
SETTLED = (FileState.EMBEDDED, FileState.SKIPPED, FileState.FAILED)
# `ragd status`'s states, in the order it lists them
SHOWN = (FileState.EMBEDDED, FileState.NEW, FileState.CHANGED, FileState.STALE, FileState.PENDING,
         FileState.DELETED, FileState.FAILED, FileState.SKIPPED, FileState.TRACKED)  # fmt: skip


class ChangeKind(StrEnum):
    CREATED = "created"
    CHANGED = "changed"  # its content (or, announced, its chunks: indexed anew)
    MOVED = "moved"  # renamed or moved: the event's `old_path` says from where
    DELETED = "deleted"  # also a history document's state once it is gone
    RESTORED = "restored"  # back at its path after it was deleted
    FAILED = "failed"
    RECOVERED = "recovered"  # indexed again after it failed
    SKIPPED = "skipped"
    RELABELED = "relabeled"


KINDS = tuple(ChangeKind)  # in this order in the answers that list them (the web page's filter)


class NoteStatus(StrEnum):
    UPSERT = "upsert"
    DELETE = "delete"
    DIR_DELETE = "dir_delete"
    DIR_RECOVER = "dir_recover"


STATUSES = frozenset(NoteStatus)
FOLDER_STATUSES = frozenset({NoteStatus.DIR_DELETE, NoteStatus.DIR_RECOVER})  # of a folder, not a file
