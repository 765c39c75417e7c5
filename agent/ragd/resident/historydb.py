"""The history's store: `history.sqlite3`, its schema, the rows it holds, and `HistoryFile`, the file opened.

- `documents`: one row per document id: where it is (or was, when deleted), its content md5, size, state
  (EMBEDDED, SKIPPED, FAILED, or "deleted"), when it was first seen, when its content last changed, when it was
  last indexed, and the file's mtime as indexed.
- `versions`: one row per content (or parser/splitter/embedding identity) the document was indexed with: md5,
  size, mtime, parser, splitter, embedding, chunks, when.
- `events`: created, changed, moved (a rename or a move: `old_path`), deleted, restored, failed, recovered,
  skipped, relabeled (vocabulary.ChangeKind); each with its time, path and a detail (the reason of a failure).

A batch recorded is also told (`Change`, `changes_of`): each file a directory job indexed, failed or skipped, and
each entry it removed, as the agent announces them (resident/changes.py).

A file of another schema, or damaged, is set aside and a new one started (the sidecars refill it); one that cannot
be written (a full disk, a read-only data directory) is kept in memory until the agent stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import HistoryConfig
from ..pipeline.dirjob import DirResult
from ..vocabulary import ChangeKind, FileState, NoteStatus

# the history's log: its lines keep the name they have always had
log = logging.getLogger("ragd.resident.history")

FILE_NAME = "history.sqlite3"
SCHEMA = 1
# the states a query names in its SQL text: a document gone, one indexed (vocabulary's values, never a caller's)
GONE_SQL, EMBEDDED_SQL = f"'{ChangeKind.DELETED}'", f"'{FileState.EMBEDDED}'"
FROM_SIDECAR = "from the sidecar"  # a document first known from its entry, not seen changing
DUPLICATES_TTL = 5.0  # seconds a `has_duplicates` answer is kept (searches ask it every time)

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY, path TEXT NOT NULL, md5 TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT -1,
    state TEXT NOT NULL, first_seen REAL NOT NULL, changed_at REAL, indexed_at REAL, mtime REAL,
    deleted_at REAL);
CREATE INDEX IF NOT EXISTS documents_path ON documents (path);
CREATE INDEX IF NOT EXISTS documents_md5 ON documents (md5) WHERE md5 != '';
CREATE TABLE IF NOT EXISTS versions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, doc TEXT NOT NULL, at REAL NOT NULL, md5 TEXT NOT NULL,
    size INTEGER NOT NULL, mtime REAL, parser TEXT, splitter TEXT, embedding TEXT, chunks INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS versions_doc ON versions (doc, seq);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, doc TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
    path TEXT NOT NULL, old_path TEXT, detail TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS events_doc ON events (doc, seq);
CREATE INDEX IF NOT EXISTS events_at ON events (at);
CREATE INDEX IF NOT EXISTS events_path ON events (path);
"""


@dataclass(frozen=True)
class Document:
    id: str
    path: str
    md5: str
    size: int
    state: FileState | ChangeKind  # EMBEDDED, SKIPPED or FAILED; `deleted` once it is gone
    first_seen: float
    changed_at: float | None
    indexed_at: float | None
    mtime: float | None
    deleted_at: float | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Document:
        """A row of the documents table, its state named by the vocabulary."""
        state = ChangeKind.DELETED if row[4] == ChangeKind.DELETED else FileState(row[4])
        return cls(row[0], row[1], row[2], row[3], state, *row[5:])

    def to_json(self) -> dict[str, Any]:
        return {"document_id": self.id, "path": self.path, "md5": self.md5, "size": self.size,
                "state": self.state, "first_seen": iso(self.first_seen), "changed_at": iso(self.changed_at),
                "indexed_at": iso(self.indexed_at), "modified_at": iso(self.mtime),
                "deleted_at": iso(self.deleted_at)}  # fmt: skip


@dataclass(frozen=True)
class Event:
    seq: int
    document_id: str
    at: float
    kind: ChangeKind
    path: str
    old_path: str | None
    detail: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Event:
        """A row of the events table, its kind named by the vocabulary."""
        return cls(row[0], row[1], row[2], ChangeKind(row[3]), *row[4:])

    def to_json(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "at": iso(self.at), "change": self.kind, "path": self.path,
                "old_path": self.old_path, "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class Change:
    """A change as it is told: to a file (or, `is_dir`, a whole directory) at `at` (time.time())."""

    at: float
    path: Path
    kind: ChangeKind
    is_dir: bool = False  # a directory removed with everything in it
    reason: str = ""  # why it failed or was skipped


_SETTLED_NOW = {FileState.FAILED: ChangeKind.FAILED, FileState.SKIPPED: ChangeKind.SKIPPED}


def changes_of(
    result: DirResult, at: float, recorded: Mapping[str, ChangeKind] | None = None
) -> list[Change]:
    """What a directory job's result tells: each file it indexed, failed or skipped now (not one found as it was),
    each entry it removed. A file indexed now is told with the change the history `recorded` for its path (created,
    moved, restored, changed, recovered), else as `changed` (indexed anew with the same content: its chunks)."""
    recorded = recorded or {}
    found: list[Change] = []
    for f in result.files:
        path = result.directory / f.name
        if f.state == FileState.EMBEDDED:
            found.append(Change(at, path, recorded.get(str(path), ChangeKind.CHANGED)))
        elif f.state in _SETTLED_NOW:
            found.append(Change(at, path, _SETTLED_NOW[f.state], reason=f.reason))
    for ev in result.events:
        if ev.status in (NoteStatus.DELETE, NoteStatus.DIR_DELETE):
            is_dir = ev.status == NoteStatus.DIR_DELETE
            found.append(Change(at, result.directory / ev.file, ChangeKind.DELETED, is_dir=is_dir))
    return found


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def paths_under(prefix: str) -> tuple[str, str]:
    """The range of paths strictly under the directory `prefix` (its path + "/" up to + "0": "/" + 1)."""
    base = prefix.rstrip("/")
    return base + "/", base + "0"


class HistoryFile:
    """The history's SQLite file: opened (in memory until `reopen()`, or when it cannot be written), its schema
    made, a damaged one set aside; one connection, used under a lock."""

    def __init__(
        self,
        data_dir: Path,
        config: HistoryConfig,
        *,
        embedding: str = "",
        splitter: str = "",
        open_file: bool = True,
    ) -> None:
        """`open_file=False`: kept in memory until `reopen()` (the agent opens its file once the data dir is known
        to be its own: a second agent refused leaves no file behind)."""
        self.path = data_dir / FILE_NAME
        self.config = config
        self.embedding = embedding  # "model:dimension", as versions record it
        self.splitter = splitter  # the splitter's fingerprint
        self._lock = threading.RLock()
        self._calls = 0
        self._failing = False
        self._dups, self._dups_at = False, -DUPLICATES_TTL
        # while a batch is recorded (under the lock): the change recorded for each of its paths, told by `record`
        self._recorded: dict[str, ChangeKind] | None = None
        self.error: str | None = None
        self._db = self._open() if open_file else self._connect(None)

    def reopen(self) -> None:
        """Open the history's file (again: after it vanished or was replaced with the data dir while the agent ran,
        a new, empty one at its path)."""
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._dups, self._dups_at, self._failing = False, -DUPLICATES_TTL, False
            self._db = self._open()

    # -- opening --------------------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        self.error = None  # why the history is kept in memory only (its file cannot be written)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                return self._connect(self.path)
            except (
                sqlite3.DatabaseError
            ) as err:  # damaged: keep it aside, start again (the sidecars refill it)
                if isinstance(err, sqlite3.OperationalError) and not self.path.is_file():
                    raise
                aside = self.path.with_name(f"{FILE_NAME}.damaged-{int(time.time())}")
                log.warning("the history %s is damaged (%s); moved to %s, starting a new one", self.path, err,
                            aside)  # fmt: skip
                for suffix in ("", "-wal", "-shm"):
                    src = Path(f"{self.path}{suffix}")
                    if src.exists():
                        src.replace(Path(f"{aside}{suffix}"))
                return self._connect(self.path)
        except (
            OSError,
            sqlite3.Error,
        ) as err:  # a full disk, a read-only data directory: never stop the agent
            self.error = f"cannot write {self.path}: {err}"
            log.error("history: %s; keeping it in memory until the agent stops", self.error)
            return self._connect(None)

    def _connect(self, path: Path | None) -> sqlite3.Connection:
        """A connection to `path` (None: in memory), its tables made."""
        if path is not None:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)  # created private (it names every document)
            os.close(fd)
        db = sqlite3.connect(path or ":memory:", check_same_thread=False, isolation_level=None, timeout=10)
        try:
            if path is not None:
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA quick_check").fetchone()
            db.executescript(_DDL)
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            elif row[0] != str(SCHEMA):
                raise sqlite3.DatabaseError(f"schema {row[0]}, this version reads {SCHEMA}")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
