"""Each document's history: its identity across renames and moves, its versions and what happened to it.

Kept by the agent in `<data dir>/history.sqlite3` (SQLite, WAL), derived from what it observed: the directory jobs'
results (`record`), roots removed (`removed`). The sidecars stay the source of truth for content; a lost or damaged
history is started again, and the next reconcile records every file it finds as it is (a "created" event at the
time its entry was written, marked `from the sidecar`): what can be known.

- `documents`: one row per document id: where it is (or was, when deleted), its content md5, size, state
  (EMBEDDED, SKIPPED, FAILED, or "deleted"), when it was first seen, when its content last changed, when it was
  last indexed, and the file's mtime as indexed.
- `versions`: one row per content (or parser/splitter/embedding identity) the document was indexed with: md5,
  size, mtime, parser, splitter, embedding, chunks, when.
- `events`: created, changed, moved (a rename or a move: `old_path`), deleted, restored, failed, recovered,
  skipped; each with its time, path and a detail (the reason of a failure).

Identity (`identify`, the directory jobs' `JobContext.identify`): a file with no entry of its own takes the id
of the document that was at its path (deleted: it came back), else of a document with the same content that left
another path within `history.move_window` seconds (deleted then, or its file gone already: a move seen in either
order), else a new id. Files with the same content at several paths at once are duplicates (`duplicates`).

Bounded: at most `history.max_versions` versions and `history.max_events` events a document (the oldest go), and
`history.max_size_mb` in all (the oldest events of all documents go first, then documents deleted longest ago).
One connection, used under a lock, from the job threads and the verbs' threads; a failure to record never fails
a job (it is logged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, HistoryConfig
from ..paths import under_any
from ..pipeline import mushroom
from ..pipeline.dirjob import DirResult
from ..pipeline.identity import derived_id, new_id
from ..pipeline.outcome import ABANDONED, RELABELED, FileOutcome
from ..pipeline.sidecar import EMBEDDED, FAILED, SKIPPED

log = logging.getLogger(__name__)

FILE_NAME = "history.sqlite3"
SCHEMA = 1
DELETED = "deleted"
CREATED, CHANGED, MOVED, REMOVED, RESTORED = "created", "changed", "moved", "deleted", "restored"
FAILED_NOW, RECOVERED, SKIPPED_NOW, RELABELED_NOW = "failed", "recovered", "skipped", "relabeled"
KINDS = (CREATED, CHANGED, MOVED, REMOVED, RESTORED, FAILED_NOW, RECOVERED, SKIPPED_NOW, RELABELED_NOW)
FROM_SIDECAR = "from the sidecar"  # a document first known from its entry, not seen changing
DUPLICATES_TTL = 5.0  # seconds a `has_duplicates` answer is kept (searches ask it every time)
SIZE_CHECK_EVERY = 200  # record() calls between two checks of the file's size
_IDS_PER_QUERY = 500  # documents read per query (SQLite allows 32,766 parameters; older builds 999)
_AT_PATH = "SELECT id FROM documents WHERE path = ? ORDER BY state = 'deleted', first_seen DESC LIMIT 1"

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
    state: str
    first_seen: float
    changed_at: float | None
    indexed_at: float | None
    mtime: float | None
    deleted_at: float | None

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
    kind: str
    path: str
    old_path: str | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "at": iso(self.at), "change": self.kind, "path": self.path,
                "old_path": self.old_path, "detail": self.detail}  # fmt: skip


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _stamp(value: str) -> float | None:
    """A sidecar's UTC stamp ("2026-12-02T11:50:01Z" or with fractions) as seconds, None if unreadable."""
    import calendar

    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except (ValueError, TypeError):
        return None


def _under(prefix: str) -> tuple[str, str]:
    """The range of paths strictly under the directory `prefix` (its path + "/" up to + "0": "/" + 1)."""
    base = prefix.rstrip("/")
    return base + "/", base + "0"


class History:
    """The history store of one data directory (see the module docstring)."""

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

    # -- identity -------------------------------------------------------------------------------------------
    def identify(self, path: str, md5: str, known: str | None, had_entry: bool) -> str:
        """JobContext.identify: the id of the file at `path` (see the module docstring)."""
        if known:
            return known
        try:
            with self._lock:  # the common case, a path the history knows, without a write transaction
                row = self._db.execute(_AT_PATH, (path,)).fetchone()
            if row is not None:
                return str(row[0])
            with self._tx() as db:
                return self._identify(db, path, md5, had_entry)
        except sqlite3.Error as err:
            log.warning("history: cannot look up the identity of %s: %s", path, err)
            return derived_id(path) if had_entry else new_id()

    def _identify(self, db: sqlite3.Connection, path: str, md5: str, had_entry: bool) -> str:
        row = db.execute(_AT_PATH, (path,)).fetchone()
        if row is not None:
            return str(row[0])
        if md5:
            moved = self._left_with(db, md5, path)
            if moved is not None:
                doc_id, old_path = moved
                now = time.time()
                self._undelete(db, doc_id)
                db.execute("UPDATE documents SET path = ?, state = CASE state WHEN 'deleted' THEN 'EMBEDDED' "
                           "ELSE state END, deleted_at = NULL WHERE id = ?", (path, doc_id))  # fmt: skip
                self._event(db, doc_id, now, MOVED, path, old_path)
                return doc_id
        return derived_id(path) if had_entry else new_id()

    def _left_with(self, db: sqlite3.Connection, md5: str, path: str) -> tuple[str, str] | None:
        """A document of content `md5` that left its path: deleted within the move window, or whose file is gone."""
        since = time.time() - self.config.move_window
        rows = db.execute("SELECT id, path, state, deleted_at FROM documents WHERE md5 = ? AND path != ? "
                          "ORDER BY deleted_at DESC", (md5, path)).fetchall()  # fmt: skip
        for doc_id, old_path, state, deleted_at in rows:
            if state == DELETED and deleted_at is not None and deleted_at >= since:
                return str(doc_id), str(old_path)
        for doc_id, old_path, state, _ in rows:
            if state != DELETED and not os.path.lexists(old_path):
                return str(doc_id), str(old_path)
        return None

    # -- recording ------------------------------------------------------------------------------------------
    def record(self, result: DirResult) -> None:
        """A directory job's results: the files it found or (re)indexed, and the entries it removed."""
        try:
            with self._tx() as db:
                now = time.time()
                files = [f for f in result.files if f.document_id and f.state != ABANDONED]
                known = self._known(db, [f.document_id for f in files])
                for f in files:  # (a second file of one id, an entry copied by hand, reads the row afresh)
                    self._file(db, now, str(result.directory / f.name), f, known.pop(f.document_id, None))
                for ev in result.events:
                    if ev.status == mushroom.DELETE:
                        self._deleted(db, now, str(result.directory / ev.file), whole_dir=False)
                    elif ev.status == mushroom.DIR_DELETE:
                        self._deleted(db, now, str(result.directory / ev.file), whole_dir=True)
            self._bound()
            self._failing = False
        except sqlite3.Error as err:  # logged once until a record works again (a full disk fails every one)
            log.log(logging.DEBUG if self._failing else logging.WARNING,
                    "history: cannot record the changes of %s: %s", result.directory, err)  # fmt: skip
            self._failing = True

    def removed(self, directory: Path, detail: str = "", keep: Sequence[Path] = ()) -> list[str]:
        """Every document under `directory` (a root no longer watched, a folder gone) left the knowledge base,
        except those under one of `keep` (roots nested in it that stay); returns their paths."""
        try:
            with self._tx() as db:
                return self._deleted(
                    db, time.time(), str(directory), whole_dir=True, detail=detail, keep=keep
                )
        except sqlite3.Error as err:
            log.warning("history: cannot record the removal of %s: %s", directory, err)
            return []

    @staticmethod
    def _known(db: sqlite3.Connection, ids: list[str]) -> dict[str, Document]:
        """The rows of these documents, in a few queries (a rescan reports every file of a directory)."""
        known: dict[str, Document] = {}
        for i in range(0, len(ids), _IDS_PER_QUERY):
            part = ids[i : i + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(part))
            for row in db.execute(f"SELECT * FROM documents WHERE id IN ({marks})", part):
                known[row[0]] = Document(*row)
        return known

    def _file(
        self, db: sqlite3.Connection, now: float, path: str, f: FileOutcome, seen: Document | None
    ) -> None:
        """One file's outcome; `seen`: its row as read before the batch, if it had one."""
        state = f.final_state
        if state not in (EMBEDDED, SKIPPED, FAILED):
            return
        seen_only = f.state == "UNCHANGED"  # known from its entry: nothing happened now
        if seen_only and seen and (seen.path, seen.state, seen.md5) == (path, state, f.md5 or seen.md5):
            return  # known as it is (every rescan reports every file): nothing to write
        row = db.execute("SELECT * FROM documents WHERE id = ?", (f.document_id,)).fetchone()  # as it is now
        doc = Document(*row) if row is not None else None
        at = (_stamp(f.recorded_at) or now) if seen_only else now
        mtime = _mtime(path) if state == EMBEDDED else None
        if doc is None:
            db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                       (f.document_id, path, f.md5, f.size, state, at, at,
                        at if state == EMBEDDED else None, mtime))  # fmt: skip
            self._event(db, f.document_id, at, CREATED, path, None, FROM_SIDECAR if seen_only else "")
            if state == EMBEDDED:
                self._version(db, f.document_id, at, f, mtime)
            elif state in (FAILED, SKIPPED):
                self._event(db, f.document_id, at, FAILED_NOW if state == FAILED else SKIPPED_NOW, path, None,
                            f.reason)  # fmt: skip
            return
        # another document at this path (its file replaced by one with its own entry): that one is gone
        db.execute("UPDATE documents SET state = 'deleted', deleted_at = ? WHERE path = ? AND id != ? "
                   "AND state != 'deleted'", (now, path, f.document_id))  # fmt: skip
        if doc.path != path:  # its entry came along (a folder renamed or moved with its .rag/)
            if doc.state == DELETED:
                self._undelete(db, doc.id)
            self._event(db, doc.id, now, MOVED, path, doc.path)
        elif doc.state == DELETED:
            self._event(db, doc.id, now, RESTORED, path, None)
        changed = bool(f.md5) and bool(doc.md5) and f.md5 != doc.md5
        if changed and not seen_only:
            self._event(db, doc.id, now, CHANGED, path, None)
        elif changed:  # changed while the agent was away (or its history was): known only from the entry
            self._event(db, doc.id, at, CHANGED, path, None, FROM_SIDECAR)
        if state == FAILED and doc.state != FAILED:
            self._event(db, doc.id, now, FAILED_NOW, path, None, f.reason)
        elif state == SKIPPED and doc.state != SKIPPED:
            self._event(db, doc.id, now, SKIPPED_NOW, path, None, f.reason)
        elif state == EMBEDDED and doc.state == FAILED:
            self._event(db, doc.id, now, RECOVERED, path, None)
        if f.state == RELABELED:  # same content, its metadata made again (docs/metadata.md)
            self._event(db, doc.id, now, RELABELED_NOW, path, None, f.reason)
        indexed = state == EMBEDDED and (not seen_only or doc.indexed_at is None or changed)
        db.execute("UPDATE documents SET path = ?, md5 = ?, size = ?, state = ?, deleted_at = NULL, "
                   "changed_at = CASE WHEN ? THEN ? ELSE changed_at END, "
                   "indexed_at = CASE WHEN ? THEN ? ELSE indexed_at END, mtime = COALESCE(?, mtime) WHERE id = ?",
                   (path, f.md5 or doc.md5, f.size if f.size >= 0 else doc.size, state, changed, at, indexed, at,
                    mtime, doc.id))  # fmt: skip
        if state == EMBEDDED and (indexed or changed):
            self._version(db, doc.id, at, f, mtime)

    def _version(
        self, db: sqlite3.Connection, doc: str, at: float, f: FileOutcome, mtime: float | None
    ) -> None:
        last = db.execute("SELECT md5, parser, splitter, embedding, chunks FROM versions WHERE doc = ? "
                          "ORDER BY seq DESC LIMIT 1", (doc,)).fetchone()  # fmt: skip
        row = (f.md5, f.parser, self.splitter, self.embedding, f.chunks)
        if last is not None and tuple(last) == row:
            return  # the same version indexed again (a retry, a touch)
        db.execute("INSERT INTO versions (doc, at, md5, size, mtime, parser, splitter, embedding, chunks) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (doc, at, f.md5, f.size, mtime, f.parser, self.splitter, self.embedding, f.chunks))  # fmt: skip
        db.execute("DELETE FROM versions WHERE doc = ? AND seq NOT IN (SELECT seq FROM versions WHERE doc = ? "
                   "ORDER BY seq DESC LIMIT ?)", (doc, doc, self.config.max_versions))  # fmt: skip

    def _deleted(
        self, db: sqlite3.Connection, now: float, path: str, *, whole_dir: bool, detail: str = "",
        keep: Sequence[Path] = (),
    ) -> list[str]:  # fmt: skip
        if whole_dir:
            low, high = _under(path)
            rows = db.execute("SELECT id, path FROM documents WHERE path >= ? AND path < ? AND state != 'deleted'",
                              (low, high)).fetchall()  # fmt: skip
        else:
            rows = db.execute("SELECT id, path FROM documents WHERE path = ? AND state != 'deleted'",
                              (path,)).fetchall()  # fmt: skip
        gone = [(doc_id, doc_path) for doc_id, doc_path in rows if not under_any(Path(doc_path), keep)]
        for doc_id, doc_path in gone:
            db.execute("UPDATE documents SET state = 'deleted', deleted_at = ? WHERE id = ?", (now, doc_id))
            self._event(db, doc_id, now, REMOVED, doc_path, None, detail)
        return [doc_path for _, doc_path in gone]

    def _undelete(self, db: sqlite3.Connection, doc: str) -> None:
        """A document recorded as deleted turned up at another path: it moved. Its "deleted" event goes, if it is
        the document's last."""
        db.execute("DELETE FROM events WHERE seq = (SELECT seq FROM events WHERE doc = ? ORDER BY seq DESC LIMIT 1) "
                   "AND kind = 'deleted'", (doc,))  # fmt: skip

    def _event(self, db: sqlite3.Connection, doc: str, at: float, kind: str, path: str, old_path: str | None,
               detail: str = "") -> None:  # fmt: skip
        db.execute("INSERT INTO events (doc, at, kind, path, old_path, detail) VALUES (?, ?, ?, ?, ?, ?)",
                   (doc, at, kind, path, old_path, detail[:2000]))  # fmt: skip
        db.execute("DELETE FROM events WHERE doc = ? AND seq NOT IN (SELECT seq FROM events WHERE doc = ? "
                   "ORDER BY seq DESC LIMIT ?)", (doc, doc, self.config.max_events))  # fmt: skip

    def _bound(self) -> None:
        """Past history.max_size_mb: drop the oldest tenth of the events, then documents deleted longest ago."""
        self._calls += 1
        if self._calls % SIZE_CHECK_EVERY != 1:
            return
        limit = self.config.max_size_mb * 1024 * 1024
        for _ in range(20):
            if self.size_bytes() <= limit:
                return
            with self._tx() as db:
                (count,) = db.execute("SELECT count(*) FROM events").fetchone()
                db.execute("DELETE FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT ?)",
                           (max(count // 10, 1),))  # fmt: skip
                db.execute("DELETE FROM documents WHERE id IN (SELECT id FROM documents WHERE state = 'deleted' "
                           "ORDER BY deleted_at LIMIT 1000)")  # fmt: skip
                db.execute("DELETE FROM versions WHERE doc NOT IN (SELECT id FROM documents)")
            with self._lock:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._db.execute("VACUUM")

    def size_bytes(self) -> int:
        with self._lock:
            (pages,) = self._db.execute("PRAGMA page_count").fetchone()
            (size,) = self._db.execute("PRAGMA page_size").fetchone()
        return int(pages) * int(size)

    # -- reading --------------------------------------------------------------------------------------------
    def changes(self, *, since: float = 0.0, under: Sequence[str] = (), kinds: Iterable[str] = KINDS,
                limit: int = 100, document_id: str | None = None) -> tuple[list[Event], bool]:  # fmt: skip
        """Events since `since` (under one of `under`: a file's own path or a folder's), newest first, at most
        `limit`; and whether more were left out."""
        sql = "SELECT seq, doc, at, kind, path, old_path, detail FROM events WHERE at >= ?"
        args: list[Any] = [since]
        wanted = sorted(set(kinds))
        sql += f" AND kind IN ({','.join('?' * len(wanted))})"
        args += wanted
        if document_id is not None:
            sql += " AND doc = ?"
            args.append(document_id)
        if under:
            parts = []
            for prefix in under:
                low, high = _under(prefix)
                parts.append(
                    "(path = ? OR (path >= ? AND path < ?) OR old_path = ? OR (old_path >= ? AND old_path < ?))"
                )
                args += [prefix, low, high, prefix, low, high]
            sql += " AND (" + " OR ".join(parts) + ")"
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit + 1)
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        events = [Event(*r) for r in rows]
        return events[:limit], len(events) > limit

    def document(self, *, path: str | None = None, document_id: str | None = None) -> Document | None:
        """The document now at `path` (else the one last deleted there), or by its id."""
        with self._lock:
            if document_id is not None:
                row = self._db.execute("SELECT * FROM documents WHERE id = ?", (document_id,)).fetchone()
            else:
                row = self._db.execute("SELECT * FROM documents WHERE path = ? ORDER BY state = 'deleted', "
                                       "deleted_at DESC LIMIT 1", (path,)).fetchone()  # fmt: skip
        return Document(*row) if row is not None else None

    def versions(self, document_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT at, md5, size, mtime, parser, splitter, embedding, chunks FROM versions "
                                    "WHERE doc = ? ORDER BY seq DESC", (document_id,)).fetchall()  # fmt: skip
        return [{"at": iso(at), "md5": md5, "size": size, "modified_at": iso(mtime), "parser": parser,
                 "splitter": splitter, "embedding": emb, "chunks": chunks}
                for at, md5, size, mtime, parser, splitter, emb, chunks in rows]  # fmt: skip

    def live(self, paths: Iterable[str]) -> dict[str, Document]:
        """The live documents at `paths` (those the history knows)."""
        wanted = list(dict.fromkeys(paths))
        out: dict[str, Document] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                rows = self._db.execute(f"SELECT * FROM documents WHERE state != 'deleted' AND path IN "
                                        f"({','.join('?' * len(part))})", part).fetchall()  # fmt: skip
                out.update((row[1], Document(*row)) for row in rows)
        return out

    def same_content(self, md5s: Iterable[str]) -> dict[str, list[str]]:
        """md5 -> the paths of the indexed documents with that content (sorted), for those with two or more."""
        wanted = sorted({m for m in md5s if m})
        out: dict[str, list[str]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                rows = self._db.execute(f"SELECT md5, path FROM documents WHERE state = 'EMBEDDED' AND md5 IN "
                                        f"({','.join('?' * len(part))}) ORDER BY path", part).fetchall()  # fmt: skip
                for md5, path in rows:
                    out.setdefault(md5, []).append(path)
        return {m: p for m, p in out.items() if len(p) > 1}

    def has_duplicates(self) -> bool:
        """Whether two indexed documents share their content (kept for DUPLICATES_TTL seconds)."""
        now = time.monotonic()
        if now - self._dups_at > DUPLICATES_TTL:
            with self._lock:
                row = self._db.execute("SELECT 1 FROM documents WHERE state = 'EMBEDDED' AND md5 != '' "
                                       "GROUP BY md5 HAVING count(*) > 1 LIMIT 1").fetchone()  # fmt: skip
            self._dups, self._dups_at = row is not None, now
        return self._dups

    def summary(self) -> dict[str, Any]:
        """For `status`: documents by state, duplicate groups and files, events, the file's size."""
        with self._lock:
            states = dict(self._db.execute("SELECT state, count(*) FROM documents GROUP BY state").fetchall())
            groups, files = self._db.execute(
                "SELECT count(*), coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM documents "
                "WHERE state = 'EMBEDDED' AND md5 != '' GROUP BY md5 HAVING n > 1)"
            ).fetchone()
            (events,) = self._db.execute("SELECT count(*) FROM events").fetchone()
        return {"path": str(self.path), **({"error": self.error} if self.error else {}),
                "documents": {str(k): int(v) for k, v in states.items()},
                "duplicates": {"groups": int(groups), "files": int(files)}, "events": int(events),
                "size_bytes": self.size_bytes()}  # fmt: skip


def open_history(config: Config, data_dir: Path, *, open_file: bool = True) -> History:
    """The history of the agent's data directory, for its configured embedding and splitter."""
    ident = config.identity
    return History(data_dir, config.history, embedding=f"{ident.model_name}:{ident.dimension}",
                   splitter=ident.splitter.fingerprint, open_file=open_file)  # fmt: skip


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
