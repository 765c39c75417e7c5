"""The directory job: reconcile one directory with its `.rag/` entries, under the directory's lock.

The only module that sequences the stages: parse -> split -> embed -> sidecar -> mushroom.

A job first plans (classifies every name), writes a mushroom announcing the planned events, then carries
the plan out and rewrites that mushroom with the final events. The index consumer takes the same lock, so it
only ever sees the final mushroom, unless the job died: then the planned events stand, and the sidecars they
point at say how far the job got (the next job picks up from there).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import mushroom, sidecar
from .config import Config
from .errors import EmbedError, FileSkipped, ParseError, RagdError, StorageError
from .model import EmbeddingIdentity
from .mushroom import Event
from .parse import SUPPORTED_EXTENSIONS, parse
from .scan import Change, Ignore, Listing, classify, list_dir, md5_file
from .sidecar import CHUNKED, EMBEDDED, FAILED, SKIPPED, FileEntry, SourceInfo, StoredChunk
from .split import split

log = logging.getLogger(__name__)

EmbedFn = Callable[[Sequence[str]], np.ndarray]
ReuseFn = Callable[[Sequence[str]], dict[str, str]]
RETRY_BASE_S = 60.0
RETRY_MAX_S = 6 * 3600.0


@dataclass(frozen=True)
class JobContext:
    config: Config
    embed: EmbedFn
    ignore: Ignore
    policy: str  # what a SKIPPED verdict depended on; a different policy re-evaluates skipped files
    reuse: ReuseFn | None = (
        None  # extra vector lookup by content_hash (e.g. the index), beyond this directory
    )
    force: bool = False

    @property
    def identity(self) -> EmbeddingIdentity:
        return self.config.identity


@dataclass(frozen=True)
class FileOutcome:
    name: str
    state: str  # EMBEDDED, SKIPPED, FAILED, UNCHANGED, TOUCHED
    chunks: int = 0
    embedded: int = 0  # texts sent to the embedder
    reused: int = 0  # chunk vectors taken from stored entries
    reason: str = ""


@dataclass(frozen=True)
class DirResult:
    directory: Path
    files: tuple[FileOutcome, ...] = ()
    subdirs: tuple[Path, ...] = ()
    events: tuple[Event, ...] = ()
    mushroom: Path | None = None


@dataclass
class _Plan:
    listing: Listing
    entries: dict[str, FileEntry | None]  # live entries by name (None: directory entry)
    deleted: set[str]
    work: list[tuple[str, Change]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def _load_entries(directory: Path) -> tuple[dict[str, FileEntry | None], set[str]]:
    live: dict[str, FileEntry | None] = {}
    deleted: set[str] = set()
    for en in sidecar.list_entries(directory):
        if en.deleted:
            deleted.add(en.name)
            continue
        try:
            live[en.name] = sidecar.read_entry(en.path)
        except StorageError as err:
            log.warning("%s; treating it as new", err.message)
    return live, deleted


def _plan(ctx: JobContext, directory: Path) -> _Plan:
    listing = list_dir(directory, ctx.ignore)
    entries, deleted = _load_entries(directory)
    plan = _Plan(listing, entries, deleted)
    for name, entry in entries.items():
        is_dir_entry = entry is None
        if (is_dir_entry and name not in listing.dirs) or (not is_dir_entry and name not in listing.files):
            plan.events.append(Event(name, mushroom.DIR_DELETE if is_dir_entry else mushroom.DELETE))
    for name in listing.dirs:
        if name in entries and entries[name] is None:
            continue
        if name in deleted and name not in entries:
            plan.events.append(Event(name, mushroom.DIR_RECOVER))
    now = time.time()
    for name, st in listing.files.items():
        entry = entries.get(name)
        recovered = entry is None and name in deleted
        if recovered:
            entry = _read_deleted(directory, name)
        change = (
            Change.RETRY
            if ctx.force
            else classify(entry, directory / name, st, ctx.identity, ctx.policy, now)
        )
        if change in (Change.NEW, Change.CHANGED, Change.RETRY, Change.TOUCHED):
            plan.work.append((name, change))
        else:
            plan.unchanged.append(name)
        if recovered or change in (Change.NEW, Change.CHANGED, Change.RETRY):
            plan.events.append(Event(name, mushroom.UPSERT))
    return plan


def _read_deleted(directory: Path, name: str) -> FileEntry | None:
    try:
        return sidecar.read_entry(sidecar.entry_path(directory, name, deleted=True))
    except StorageError:
        return None


def run_directory(ctx: JobContext, directory: Path) -> DirResult:
    """Reconcile `directory` with its sidecars. Per-file failures are recorded, never raised."""
    with sidecar.DirLock(directory):
        plan = _plan(ctx, directory)
        note = mushroom.write(directory, plan.events) if plan.events else None
        _apply_structure(directory, plan)
        reuse = _ReusePool(ctx, directory, plan)
        outcomes = [FileOutcome(n, "UNCHANGED") for n in plan.unchanged]
        for name, change in plan.work:
            outcomes.append(_run_file(ctx, directory, name, change, plan, reuse))
        final = [ev for ev in plan.events if ev.status != mushroom.UPSERT or (directory / ev.file).exists()]
        note = _finish_mushroom(directory, note, plan.events, final)
    subdirs = tuple(directory / d for d in plan.listing.dirs)
    return DirResult(directory, tuple(outcomes), subdirs, tuple(final), note)


def _finish_mushroom(
    directory: Path, note: Path | None, planned: list[Event], final: list[Event]
) -> Path | None:
    if note is None or final == planned:
        return note
    if not final:
        note.unlink(missing_ok=True)
        return None
    payload = "".join(ev.to_line() + "\n" for ev in mushroom.coalesce(final)).encode("utf-8")
    return sidecar.write_atomic(directory, note.name, payload)


def _apply_structure(directory: Path, plan: _Plan) -> None:
    """Renames for deleted and returning names; entries for new subdirectories."""
    for ev in plan.events:
        if ev.status in (mushroom.DELETE, mushroom.DIR_DELETE):
            sidecar.mark_deleted(directory, ev.file)
        elif ev.status == mushroom.DIR_RECOVER:
            sidecar.recover(directory, ev.file)
    for name in plan.listing.dirs:
        if name not in plan.entries and not any(e.file == name for e in plan.events):
            sidecar.write_dir_entry(directory, name)
        elif name in plan.entries and plan.entries[name] is not None:
            sidecar.write_dir_entry(directory, name)  # a file became a directory of the same name
    for name in plan.listing.files:
        if name not in plan.entries and name in plan.deleted:
            sidecar.recover(directory, name)
            plan.entries[name] = _read_existing(directory, name)


def _read_existing(directory: Path, name: str) -> FileEntry | None:
    try:
        return sidecar.read_entry(sidecar.entry_path(directory, name))
    except StorageError:
        return None


class _ReusePool:
    """content_hash -> stored vector, from this directory's entries (live and deleted) and ctx.reuse."""

    def __init__(self, ctx: JobContext, directory: Path, plan: _Plan) -> None:
        self._ctx, self._dir, self._plan = ctx, directory, plan
        self._pool: dict[str, str] | None = None

    def lookup(self, hashes: Sequence[str]) -> dict[str, str]:
        if self._pool is None:
            entries = [e for e in self._plan.entries.values() if e is not None]
            entries += [e for n in self._plan.deleted if (e := _read_deleted(self._dir, n)) is not None]
            ident = self._ctx.identity
            self._pool = sidecar.vectors_by_hash(entries, ident.model_name, ident.dimension)
        found = {h: self._pool[h] for h in hashes if h in self._pool}
        missing = [h for h in hashes if h not in found]
        if missing and self._ctx.reuse is not None:
            found.update(self._ctx.reuse(missing))
        return found


def _run_file(
    ctx: JobContext, directory: Path, name: str, change: Change, plan: _Plan, reuse: _ReusePool
) -> FileOutcome:
    """Per-file boundary: whatever happens, the file ends in a recorded state and the job goes on."""
    path = directory / name
    old = plan.entries.get(name)
    try:
        st = os.stat(path)
    except OSError:
        return FileOutcome(name, "UNCHANGED", reason="vanished during the job")
    try:
        if change == Change.TOUCHED and old is not None:
            sidecar.write_entry(
                directory, old.with_status(old.status, source=_source(name, st, old.source.md5_hash))
            )
            return FileOutcome(name, "TOUCHED", chunks=len(old.chunks))
        return _process(ctx, directory, name, st, old, reuse)
    except StorageError as err:
        log.error("%s", err)
        return FileOutcome(name, FAILED, reason=str(err))
    except Exception as err:  # the per-file boundary: record, log, go on
        log.exception("internal error while processing %s", path)
        return _record_failure(
            ctx,
            directory,
            name,
            st,
            old,
            None,
            RagdError(
                f"internal error: {type(err).__name__}: {err}",
                "please report this with the log",
                code="internal",
            ),
        )


def _source(name: str, st: os.stat_result, md5: str) -> SourceInfo:
    return SourceInfo(
        file_name=name,
        md5_hash=md5,
        size_bytes=st.st_size,
        mtime=int(st.st_mtime),
        inode=st.st_ino,
        mtime_ns=st.st_mtime_ns,
        ctime_ns=st.st_ctime_ns,
    )


def _new_entry(
    ctx: JobContext, status: str, source: SourceInfo, old: FileEntry | None, **kw: Any
) -> FileEntry:
    stamp = sidecar.utc_stamp()
    ident = ctx.identity
    return FileEntry(
        status=status,
        create_dt=old.create_dt if old and old.create_dt else stamp,
        modify_dt=stamp,
        source=source,
        model_name=ident.model_name,
        dimension=ident.dimension,
        splitter=ident.splitter.fingerprint,
        **kw,
    )


def _precheck(ctx: JobContext, path: Path, st: os.stat_result) -> None:
    """Cheap refusals before the file is read at all (so a video is never hashed)."""
    if path.suffix.lower() not in SUPPORTED_EXTENSIONS:
        raise FileSkipped(f"unsupported file type {path.suffix or '(no extension)'!r}")
    limit = ctx.config.limits.max_file_size
    if st.st_size > limit:
        raise FileSkipped(
            f"file too large: {st.st_size} bytes > limits.max_file_size {limit}",
            "raise limits.max_file_size to index it",
        )


def _process(
    ctx: JobContext, directory: Path, name: str, st: os.stat_result, old: FileEntry | None, reuse: _ReusePool
) -> FileOutcome:
    path = directory / name
    try:
        _precheck(ctx, path, st)
    except FileSkipped as err:
        return _record_skip(ctx, directory, name, st, old, "", err)
    source = _source(name, st, md5_file(path))
    try:
        doc = parse(path, ctx.config.limits)
        chunks = split(doc, ctx.identity.splitter)
        if not chunks:
            raise FileSkipped("no text to index after splitting")
    except FileSkipped as err:
        return _record_skip(ctx, directory, name, st, old, source.md5_hash, err)
    except ParseError as err:
        return _record_failure(ctx, directory, name, st, old, source, err)
    known = reuse.lookup([c.content_hash for c in chunks])
    stored = [
        StoredChunk(c.content, c.content_hash, c.overlap_size, known.get(c.content_hash), _meta(c))
        for c in chunks
    ]
    todo = [i for i, c in enumerate(stored) if c.vector_base64 is None]
    extra = {"parser": doc.parser}
    if todo:
        sidecar.write_entry(directory, _new_entry(ctx, CHUNKED, source, old, chunks=tuple(stored), **extra))
        try:
            vectors = ctx.embed([chunks[i].embed_text for i in todo])
        except EmbedError as err:
            return _record_failure(ctx, directory, name, st, old, source, err, tuple(stored), doc.parser)
        for i, vec in zip(todo, vectors, strict=True):
            stored[i] = StoredChunk(
                stored[i].content,
                stored[i].content_hash,
                stored[i].overlap_size,
                sidecar.encode_vector(vec),
                stored[i].meta,
            )
    sidecar.write_entry(directory, _new_entry(ctx, EMBEDDED, source, old, chunks=tuple(stored), **extra))
    return FileOutcome(name, EMBEDDED, chunks=len(stored), embedded=len(todo), reused=len(stored) - len(todo))


def _meta(chunk: object) -> dict[str, object]:
    c = chunk
    meta = {
        k: getattr(c, k) for k in ("start_index", "end_index", "start_line", "end_line", "page", "header")
    }
    meta["heading_path"] = list(getattr(c, "heading_path", ())) or None
    return meta


def _record_skip(
    ctx: JobContext,
    directory: Path,
    name: str,
    st: os.stat_result,
    old: FileEntry | None,
    md5: str,
    err: FileSkipped,
) -> FileOutcome:
    error = {**err.to_dict(), "policy": ctx.policy}
    sidecar.write_entry(directory, _new_entry(ctx, SKIPPED, _source(name, st, md5), old, error=error))
    return FileOutcome(name, SKIPPED, reason=err.message)


def _record_failure(
    ctx: JobContext,
    directory: Path,
    name: str,
    st: os.stat_result,
    old: FileEntry | None,
    source: SourceInfo | None,
    err: RagdError,
    chunks: tuple[StoredChunk, ...] = (),
    parser: str | None = None,
) -> FileOutcome:
    """FAILED with the error and when it is retried: embed errors back off, others wait for a change."""
    attempts = int((old.error or {}).get("attempts", 0)) + 1 if old and old.status == FAILED else 1
    retry_at = None
    if isinstance(err, EmbedError) or err.code == "internal":
        delay = min(RETRY_BASE_S * 2 ** (attempts - 1), RETRY_MAX_S)
        retry_at = sidecar.utc_stamp(time.time() + delay)
    error = {**err.to_dict(), "at": sidecar.utc_stamp(), "attempts": attempts, "retry_at": retry_at}
    src = source or _source(name, st, "")
    sidecar.write_entry(
        directory, _new_entry(ctx, FAILED, src, old, chunks=chunks, error=error, parser=parser)
    )
    return FileOutcome(name, FAILED, reason=err.message)
