"""Each document's history: its identity across renames and moves, its versions and what happened to it.

Kept by the agent in `<data dir>/history.sqlite3` (SQLite, WAL), derived from what it observed: the directory jobs'
results (`record`), roots removed (`removed`). The sidecars stay the source of truth for content; a lost or damaged
history is started again, and the next reconcile records every file it finds as it is (a "created" event at the
time its entry was written, marked `from the sidecar`): what can be known.

`History` is built in three layers: the file, its schema and its rows (historydb.py); what the directory jobs write,
each file's identity and what happened to it, bounded (historywrite.py); and here what the verbs read: the events,
a document, its versions, the live documents at some paths, files with the same content at several paths at once
(duplicates), a summary for `status`. One connection, used under a lock, from the job threads and the verbs'
threads; a failure to record never fails a job (it is logged).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..vocabulary import KINDS
from .historydb import DUPLICATES_TTL, EMBEDDED_SQL, GONE_SQL, Document, Event, iso, paths_under
from .historywrite import HistoryWrites


class History(HistoryWrites):
    """The history store of one data directory (see the module docstring)."""

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
                low, high = paths_under(prefix)
                parts.append(
                    "(path = ? OR (path >= ? AND path < ?) OR old_path = ? OR (old_path >= ? AND old_path < ?))"
                )
                args += [prefix, low, high, prefix, low, high]
            sql += " AND (" + " OR ".join(parts) + ")"
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit + 1)
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        events = [Event.from_row(r) for r in rows]
        return events[:limit], len(events) > limit

    def document(self, *, path: str | None = None, document_id: str | None = None) -> Document | None:
        """The document now at `path` (else the one last deleted there), or by its id."""
        with self._lock:
            if document_id is not None:
                row = self._db.execute("SELECT * FROM documents WHERE id = ?", (document_id,)).fetchone()
            else:
                row = self._db.execute(f"SELECT * FROM documents WHERE path = ? ORDER BY state = {GONE_SQL}, "
                                       "deleted_at DESC LIMIT 1", (path,)).fetchone()  # fmt: skip
        return Document.from_row(row) if row is not None else None

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
                rows = self._db.execute(f"SELECT * FROM documents WHERE state != {GONE_SQL} AND path IN "
                                        f"({','.join('?' * len(part))})", part).fetchall()  # fmt: skip
                out.update((row[1], Document.from_row(row)) for row in rows)
        return out

    def same_content(self, md5s: Iterable[str]) -> dict[str, list[str]]:
        """md5 -> the paths of the indexed documents with that content (sorted), for those with two or more. (`md5 !=
        ''` lets SQLite use the partial index `documents_md5`: without it, every search read the whole table.)"""
        wanted = sorted({m for m in md5s if m})
        out: dict[str, list[str]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                rows = self._db.execute(f"SELECT md5, path FROM documents WHERE state = {EMBEDDED_SQL} AND md5 != '' AND md5 IN "
                                        f"({','.join('?' * len(part))}) ORDER BY path", part).fetchall()  # fmt: skip
                for md5, path in rows:
                    out.setdefault(md5, []).append(path)
        return {m: p for m, p in out.items() if len(p) > 1}

    def has_duplicates(self) -> bool:
        """Whether two indexed documents share their content (kept for DUPLICATES_TTL seconds)."""
        now = time.monotonic()
        if now - self._dups_at > DUPLICATES_TTL:
            with self._lock:
                row = self._db.execute(f"SELECT 1 FROM documents WHERE state = {EMBEDDED_SQL} AND md5 != '' "
                                       "GROUP BY md5 HAVING count(*) > 1 LIMIT 1").fetchone()  # fmt: skip
            self._dups, self._dups_at = row is not None, now
        return self._dups

    def summary(self) -> dict[str, Any]:
        """For `status`: documents by state, duplicate groups and files, events, the file's size."""
        with self._lock:
            states = dict(self._db.execute("SELECT state, count(*) FROM documents GROUP BY state").fetchall())
            groups, files = self._db.execute(
                "SELECT count(*), coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM documents "
                f"WHERE state = {EMBEDDED_SQL} AND md5 != '' GROUP BY md5 HAVING n > 1)"
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
