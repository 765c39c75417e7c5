"""The history's write side: `HistoryWrites`, each file's identity and what happened to it.

Identity (`identify`, the directory jobs' `JobContext.identify`): a file with no entry of its own takes the id
of the document that was at its path (deleted: it came back), else of a document with the same content that left
another path within `history.move_window` seconds (deleted then, or its file gone already: a move seen in either
order), else a new id. `left_from` answers the same question without recording it: the directory jobs take the
vectors of a file moved in from another folder from the entry it left there (`JobContext.moved_from`).

Recording (`record`: a directory job's results; `removed`: a root or folder gone): the documents' rows, their
versions and events, bounded: at most `history.max_versions` versions and `history.max_events` events a document
(the oldest go), and `history.max_size_mb` in all (the oldest events of all documents go first, then documents
deleted longest ago). A failure to record never fails a job (it is logged).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..paths import under_any
from ..pipeline.dirjob import DirResult
from ..pipeline.identity import derived_id, new_id
from ..pipeline.outcome import FileOutcome
from ..vocabulary import ChangeKind, FileState, NoteStatus
from .historydb import (
    EMBEDDED_SQL,
    FROM_SIDECAR,
    GONE_SQL,
    Change,
    Document,
    HistoryFile,
    changes_of,
    paths_under,
)

# the history's log: its lines keep the name they have always had
log = logging.getLogger("ragd.resident.history")

SIZE_CHECK_EVERY = 200  # record() calls between two checks of the file's size
_IDS_PER_QUERY = 500  # documents read per query (SQLite allows 32,766 parameters; older builds 999)
PAGE = 1000  # rows of a folder's documents read at a time
_AT_PATH = f"SELECT id FROM documents WHERE path = ? ORDER BY state = {GONE_SQL}, first_seen DESC LIMIT 1"
# The documents of a content at another path (`_left_with`'s candidates). `md5 != ''` lets SQLite use the partial
# index `documents_md5`: without it, each query read the whole table (a big folder's new files, one query each: a
# 30,000-row scan for each of the last of 30,000 notes).
_ELSEWHERE = "FROM documents WHERE md5 = ? AND md5 != '' AND path != ?"
_ANY_ELSEWHERE = f"SELECT 1 {_ELSEWHERE} LIMIT 1"  # whether `_left_with` has a candidate at all


class HistoryWrites(HistoryFile):
    """What the directory jobs write to the history: the identity of each file, and what happened to it."""

    # -- identity -------------------------------------------------------------------------------------------
    def identify(self, path: str, md5: str, known: str | None, had_entry: bool) -> str:
        """JobContext.identify: the id of the file at `path` (see the module docstring)."""
        if known:
            return known
        try:
            # the common cases without a write transaction: a path the history knows, or a new file whose content
            # left no other path (a big folder's files, one each)
            with self._lock:
                row = self._db.execute(_AT_PATH, (path,)).fetchone()
                if row is None and not (md5 and self._db.execute(_ANY_ELSEWHERE, (md5, path)).fetchone()):
                    return derived_id(path) if had_entry else new_id()
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
                db.execute(f"UPDATE documents SET path = ?, state = CASE state WHEN {GONE_SQL} THEN {EMBEDDED_SQL} "
                           "ELSE state END, deleted_at = NULL WHERE id = ?", (path, doc_id))  # fmt: skip
                self._event(db, doc_id, now, ChangeKind.MOVED, path, old_path)
                return doc_id
        return derived_id(path) if had_entry else new_id()

    def left_from(self, path: str, md5: str) -> str | None:
        """JobContext.moved_from: the path a document of content `md5` left, by the rules `identify` links a move
        by (None: none, or the history cannot be read). Nothing is written: the file's job identifies it later."""
        if not md5:
            return None
        try:
            with self._lock:
                moved = self._left_with(self._db, md5, path)
        except sqlite3.Error as err:
            log.debug("history: cannot look up where %s came from: %s", path, err)
            return None
        return moved[1] if moved is not None else None

    def _left_with(self, db: sqlite3.Connection, md5: str, path: str) -> tuple[str, str] | None:
        """A document of content `md5` that left its path: deleted within the move window, or whose file is gone."""
        since = time.time() - self.config.move_window
        rows = db.execute(f"SELECT id, path, state, deleted_at {_ELSEWHERE} ORDER BY deleted_at DESC",
                          (md5, path)).fetchall()  # fmt: skip
        for doc_id, old_path, state, deleted_at in rows:
            if state == ChangeKind.DELETED and deleted_at is not None and deleted_at >= since:
                return str(doc_id), str(old_path)
        for doc_id, old_path, state, _ in rows:
            if state != ChangeKind.DELETED and not os.path.lexists(old_path):
                return str(doc_id), str(old_path)
        return None

    # -- recording ------------------------------------------------------------------------------------------
    def record(self, result: DirResult) -> list[Change]:
        """A directory job's results: the files it found or (re)indexed, and the entries it removed; returns the
        changes it tells (historydb.changes_of), each file indexed now as the change recorded for it."""
        now = time.time()  # (taken again once the history is ours: the time its events are recorded at)
        recorded: dict[str, ChangeKind] = {}
        try:
            with self._tx() as db:
                now = time.time()
                self._recorded = recorded  # (under the history's lock, as every _event)
                try:
                    self._record(db, now, result)
                finally:
                    self._recorded = None
            self._bound()
            self._failing = False
        except sqlite3.Error as err:  # logged once until a record works again (a full disk fails every one)
            log.log(logging.DEBUG if self._failing else logging.WARNING,
                    "history: cannot record the changes of %s: %s", result.directory, err)  # fmt: skip
            self._failing = True
            recorded.clear()  # rolled back: told as the result says
        return changes_of(result, now, recorded)

    def _record(self, db: sqlite3.Connection, now: float, result: DirResult) -> None:
        files = [f for f in result.files if f.document_id and f.state != FileState.ABANDONED]
        # a page of rows at a time (a folder of 30,000 renamed); a second file of one id (an entry copied by hand)
        # reads the row afresh
        done: set[str] = set()
        for i in range(0, len(files), _IDS_PER_QUERY):
            page = files[i : i + _IDS_PER_QUERY]
            known = self._known(db, [f.document_id for f in page if f.document_id not in done])
            for f in page:
                self._file(db, now, str(result.directory / f.name), f, known.pop(f.document_id, None))
                done.add(f.document_id)
        for ev in result.events:
            if ev.status == NoteStatus.DELETE:
                self._deleted(db, now, str(result.directory / ev.file), whole_dir=False)
            elif ev.status == NoteStatus.DIR_DELETE:
                self._deleted(db, now, str(result.directory / ev.file), whole_dir=True)

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
        """The rows of these documents (at most _IDS_PER_QUERY), in one query: a rescan reports every file of a
        directory, read a page at a time (30,000 rows at once were ~10 MiB at a big folder's rename's peak)."""
        marks = ", ".join("?" * len(ids))
        rows = db.execute(f"SELECT * FROM documents WHERE id IN ({marks})", ids) if ids else ()
        return {row[0]: Document.from_row(row) for row in rows}

    def _file(
        self, db: sqlite3.Connection, now: float, path: str, f: FileOutcome, seen: Document | None
    ) -> None:
        """One file's outcome; `seen`: its row as read before the batch, if it had one."""
        state = f.final_state
        if state not in (FileState.EMBEDDED, FileState.SKIPPED, FileState.FAILED):
            return
        seen_only = f.state == FileState.UNCHANGED  # known from its entry: nothing happened now
        if seen_only and seen and (seen.path, seen.state, seen.md5) == (path, state, f.md5 or seen.md5):
            return  # known as it is (every rescan reports every file): nothing to write
        row = db.execute("SELECT * FROM documents WHERE id = ?", (f.document_id,)).fetchone()  # as it is now
        doc = Document.from_row(row) if row is not None else None
        at = (_stamp(f.recorded_at) or now) if seen_only else now
        mtime = _mtime(path) if state == FileState.EMBEDDED else None
        if doc is None:
            db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                       (f.document_id, path, f.md5, f.size, state, at, at,
                        at if state == FileState.EMBEDDED else None, mtime))  # fmt: skip
            self._event(
                db, f.document_id, at, ChangeKind.CREATED, path, None, FROM_SIDECAR if seen_only else ""
            )
            if state == FileState.EMBEDDED:
                self._version(db, f.document_id, at, f, mtime)
            elif state in (FileState.FAILED, FileState.SKIPPED):
                self._event(db, f.document_id, at, ChangeKind.FAILED if state == FileState.FAILED else ChangeKind.SKIPPED, path, None,
                            f.reason)  # fmt: skip
            return
        # another document at this path (its file replaced by one with its own entry): that one is gone
        db.execute(f"UPDATE documents SET state = {GONE_SQL}, deleted_at = ? WHERE path = ? AND id != ? "
                   f"AND state != {GONE_SQL}", (now, path, f.document_id))  # fmt: skip
        if doc.path != path:  # its entry came along (a folder renamed or moved with its .rag/)
            if doc.state == ChangeKind.DELETED:
                self._undelete(db, doc.id)
            self._event(db, doc.id, now, ChangeKind.MOVED, path, doc.path)
        elif doc.state == ChangeKind.DELETED:
            self._event(db, doc.id, now, ChangeKind.RESTORED, path, None)
        changed = bool(f.md5) and bool(doc.md5) and f.md5 != doc.md5
        if changed and not seen_only:
            self._event(db, doc.id, now, ChangeKind.CHANGED, path, None)
        elif changed:  # changed while the agent was away (or its history was): known only from the entry
            self._event(db, doc.id, at, ChangeKind.CHANGED, path, None, FROM_SIDECAR)
        if state == FileState.FAILED and doc.state != FileState.FAILED:
            self._event(db, doc.id, now, ChangeKind.FAILED, path, None, f.reason)
        elif state == FileState.SKIPPED and doc.state != FileState.SKIPPED:
            self._event(db, doc.id, now, ChangeKind.SKIPPED, path, None, f.reason)
        elif state == FileState.EMBEDDED and doc.state == FileState.FAILED:
            self._event(db, doc.id, now, ChangeKind.RECOVERED, path, None)
        if f.state == FileState.RELABELED:  # same content, its metadata made again (docs/metadata.md)
            self._event(db, doc.id, now, ChangeKind.RELABELED, path, None, f.reason)
        indexed = state == FileState.EMBEDDED and (not seen_only or doc.indexed_at is None or changed)
        db.execute("UPDATE documents SET path = ?, md5 = ?, size = ?, state = ?, deleted_at = NULL, "
                   "changed_at = CASE WHEN ? THEN ? ELSE changed_at END, "
                   "indexed_at = CASE WHEN ? THEN ? ELSE indexed_at END, mtime = COALESCE(?, mtime) WHERE id = ?",
                   (path, f.md5 or doc.md5, f.size if f.size >= 0 else doc.size, state, changed, at, indexed, at,
                    mtime, doc.id))  # fmt: skip
        if state == FileState.EMBEDDED and (indexed or changed):
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
        gone: list[str] = []
        for doc_id, doc_path in _live_under(db, path) if whole_dir else _live_at(db, path):
            if under_any(Path(doc_path), keep):
                continue
            db.execute(f"UPDATE documents SET state = {GONE_SQL}, deleted_at = ? WHERE id = ?", (now, doc_id))
            self._event(db, doc_id, now, ChangeKind.DELETED, doc_path, None, detail)
            gone.append(doc_path)
        return gone

    def _undelete(self, db: sqlite3.Connection, doc: str) -> None:
        """A document recorded as deleted turned up at another path: it moved. Its "deleted" event goes, if it is
        the document's last."""
        db.execute("DELETE FROM events WHERE seq = (SELECT seq FROM events WHERE doc = ? ORDER BY seq DESC LIMIT 1) "
                   f"AND kind = {GONE_SQL}", (doc,))  # fmt: skip

    def _event(self, db: sqlite3.Connection, doc: str, at: float, kind: ChangeKind, path: str, old_path: str | None,
               detail: str = "") -> None:  # fmt: skip
        db.execute("INSERT INTO events (doc, at, kind, path, old_path, detail) VALUES (?, ?, ?, ?, ?, ?)",
                   (doc, at, kind, path, old_path, detail[:2000]))  # fmt: skip
        if self._recorded is not None:  # a batch being recorded: its files' changes are told as recorded
            self._recorded[path] = kind
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
                db.execute(f"DELETE FROM documents WHERE id IN (SELECT id FROM documents WHERE state = {GONE_SQL} "
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


def _stamp(value: str) -> float | None:
    """A sidecar's UTC stamp ("2026-12-02T11:50:01Z" or with fractions) as seconds, None if unreadable."""
    import calendar

    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except (ValueError, TypeError):
        return None


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _live_at(db: sqlite3.Connection, path: str) -> list[tuple[str, str]]:
    """(id, path) of the documents at `path` not gone."""
    return db.execute(
        f"SELECT id, path FROM documents WHERE path = ? AND state != {GONE_SQL}", (path,)
    ).fetchall()


def _live_under(db: sqlite3.Connection, directory: str) -> Iterator[tuple[str, str]]:
    """(id, path) of the documents under `directory` not gone, PAGE rows at a time in the order of (path, id): a
    folder of 30,000 notes renamed held its 30,000 rows at once (~9 MiB at the rename's peak)."""
    low, high = paths_under(directory)
    after: tuple[str, str] = (low, "")
    while rows := db.execute(f"SELECT id, path FROM documents WHERE (path, id) > (?, ?) AND path < ? AND state != "
                             f"{GONE_SQL} ORDER BY path, id LIMIT ?", (after[0], after[1], high, PAGE)).fetchall():  # fmt: skip
        yield from rows
        after = (rows[-1][1], rows[-1][0])
