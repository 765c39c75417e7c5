"""The `.rag/` sidecar store (RAG-Storage-Spec v2.4), interoperable with the ragjson tool.

Layout beside each tracked directory D:
    D/.rag/<file>.ragjson           file entry
    D/.rag/<subdir>.ragjson         directory entry: exactly {"ragjson_version": "2.4"}
    D/.rag/<name>.ragjson.deleted   entry of a deleted source (renamed back if it returns)
    D/.rag/tmp/                     staging for atomic writes; its fd is the flock(2) target for D
    D/.rag/*.mushroom               pending change notes for the index (see mushroom.py)
    D/.rag/.gitignore               `*`: the store never shows in `git status` (written when missing)

Every write is tmp + fsync + rename() under the directory's lock (see DirLock). A store left with nothing but deleted
entries in a folder that holds nothing else is removed (`drop_emptied`). An entry is never more readable than
its source, `.rag/` never more open than its directory, `.rag/tmp/` is 0700, and names that are not valid UTF-8 are
never written (see modes.py).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from .. import modes
from ..atomic import atomic_write
from ..errors import StorageError
from ..model import vector_problem
from ..modes import display_name, private_mode, valid_name
from .metadata import EntryMetadata

log = logging.getLogger(__name__)

RAG_DIR = ".rag"
TMP_DIR = "tmp"
VERSION = "2.4"
ENTRY_SUFFIX = ".ragjson"
DELETED_SUFFIX = ".ragjson.deleted"
DIR_ENTRY = {"ragjson_version": VERSION}
GITIGNORE = ".gitignore"
GITIGNORE_TEXT = b"# written by ragd: this folder holds its index sidecars, never to be committed\n*\n"
LOCK_ATTEMPTS = 5  # a store removed (drop_emptied) while its lock was awaited: taken again at most this often

# processing.status values
INITIAL, CHUNKING, CHUNKED, EMBEDDING, EMBEDDED = "INITIAL", "CHUNKING", "CHUNKED", "EMBEDDING", "EMBEDDED"
SKIPPED, FAILED = "SKIPPED", "FAILED"
CHUNK_META_KEYS = ("start_index", "end_index", "start_line", "end_line", "heading_path", "page", "header")


def utc_stamp(ts: float | None = None) -> str:
    """`2026-11-30T16:30:32Z`, the spec's timestamp form."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(value: str) -> float | None:
    """Unix seconds of a `2026-11-30T16:30:32Z` stamp (None if it is not one)."""
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return None


def encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(data: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(data), dtype="<f4")


@dataclass(frozen=True)
class SourceInfo:
    """`source` of a file entry. mtime_ns/ctime_ns are ragd's optional extras (the ragjson tool omits them)."""

    file_name: str
    md5_hash: str
    size_bytes: int
    mtime: int
    inode: int
    mtime_ns: int | None = None
    ctime_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "file_name": self.file_name,
            "md5_hash": self.md5_hash,
            "size_bytes": self.size_bytes,
            "mtime": self.mtime,
            "inode": self.inode,
        }
        if self.mtime_ns is not None:
            data["mtime_ns"] = self.mtime_ns
            data["ctime_ns"] = self.ctime_ns
        return data


@dataclass(frozen=True)
class StoredChunk:
    content: str
    content_hash: str
    overlap_size: int = 0
    vector_base64: str | None = None  # None while the chunk is not embedded yet
    meta: Mapping[str, Any] = field(
        default_factory=dict
    )  # start_index, end_index, start_line, heading_path, ...

    @property
    def vector(self) -> np.ndarray | None:
        return None if self.vector_base64 is None else decode_vector(self.vector_base64)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content": self.content,
            "content_hash": self.content_hash,
            "overlap_size": self.overlap_size,
        }
        if self.vector_base64 is not None:
            data["vector_base64"] = self.vector_base64
        data.update({k: v for k, v in self.meta.items() if v is not None})
        return data


LEAD_KEY = "lead:"  # before a lead's content_hash in a reuse lookup (vectors_by_hash)


@dataclass(frozen=True)
class StoredLead:
    """`lead` of a file entry (ragd's optional extra): the document's lead text (lead.py), its md5 and its vector
    ("" when the text is: a document with no title nor prose has no lead to embed). The index holds the vector with
    each of the document's chunks for hybrid ranking (index/ranking/fusion.py)."""

    content: str
    content_hash: str
    vector_base64: str

    @property
    def vector(self) -> np.ndarray | None:
        return decode_vector(self.vector_base64) if self.vector_base64 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "content_hash": self.content_hash,
            "vector_base64": self.vector_base64,
        }

    @classmethod
    def from_json(cls, raw: object) -> StoredLead | None:
        """The lead a file entry holds; None for none, or for one of another shape (it is made again)."""
        if not isinstance(raw, dict):
            return None
        content, digest, vec = raw.get("content"), raw.get("content_hash"), raw.get("vector_base64")
        if not (isinstance(content, str) and isinstance(digest, str) and isinstance(vec, str)):
            return None
        if bool(vec) != bool(content):  # a text with no vector, or a vector of no text
            return None
        return cls(content, digest, vec)


@dataclass(frozen=True)
class FileEntry:
    status: str
    create_dt: str
    modify_dt: str
    source: SourceInfo
    model_name: str
    dimension: int
    chunks: tuple[StoredChunk, ...] = ()
    parser: str | None = None
    splitter: str | None = None
    split_revision: int | None = (
        None  # of ragd's parse/split rules (structure.SPLIT_REVISION) that made the chunks
    )
    error: Mapping[str, Any] | None = None
    ocr: Mapping[str, Any] | None = None  # what OCR did for the text (model.OcrReport.to_json)
    document_id: str | None = (
        None  # the document's identity, kept across renames and moves (pipeline/identity.py)
    )
    metadata: EntryMetadata | None = None  # the document's metadata fields (metadata.py, docs/metadata.md)
    lead: StoredLead | None = (
        None  # the document's lead and its vector (lead.py); None in another tool's entries
    )
    warning: str | None = None  # what was read with damage, e.g. "2 undecodable bytes replaced (U+FFFD)"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ragjson_version": VERSION,
            "processing": {"status": self.status, "create_dt": self.create_dt, "modify_dt": self.modify_dt},
            "source": self.source.to_json(),
            "embedding": {"model_name": self.model_name, "dimension": self.dimension},
            "chunks": [c.to_json() for c in self.chunks],
        }
        for key in ("parser", "splitter", "split_revision", "error", "ocr", "document_id", "warning"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.metadata is not None:
            data["metadata"] = self.metadata.to_json()
        if self.lead is not None:
            data["lead"] = self.lead.to_json()
        return data

    @property
    def all_vectors(self) -> bool:
        return all(c.vector_base64 is not None for c in self.chunks)

    def with_status(self, status: str, **changes: Any) -> FileEntry:
        return replace(self, status=status, modify_dt=utc_stamp(), **changes)


def _chunk_from_json(raw: Mapping[str, Any]) -> StoredChunk:
    meta = {k: raw[k] for k in CHUNK_META_KEYS if k in raw}
    vec = raw.get("vector_base64")
    return StoredChunk(
        content=raw["content"],
        content_hash=raw["content_hash"],
        overlap_size=int(raw.get("overlap_size", 0)),
        vector_base64=vec if isinstance(vec, str) and vec else None,
        meta=meta,
    )


def entry_from_json(data: Mapping[str, Any]) -> FileEntry | None:
    """A file entry, or None for a directory entry. Raises KeyError/TypeError/ValueError on malformed data."""
    if set(data) == {"ragjson_version"}:
        return None
    proc, src, emb = data["processing"], data["source"], data["embedding"]
    source = SourceInfo(
        file_name=src["file_name"],
        md5_hash=src["md5_hash"],
        size_bytes=int(src["size_bytes"]),
        mtime=int(src["mtime"]),
        inode=int(src["inode"]),
        mtime_ns=src.get("mtime_ns"),
        ctime_ns=src.get("ctime_ns"),
    )
    return FileEntry(
        status=proc["status"],
        create_dt=proc.get("create_dt", ""),
        modify_dt=proc.get("modify_dt", ""),
        source=source,
        model_name=emb["model_name"],
        dimension=int(emb["dimension"]),
        chunks=tuple(_chunk_from_json(c) for c in data.get("chunks") or ()),
        parser=data.get("parser"),
        splitter=data.get("splitter"),
        split_revision=_revision(data.get("split_revision")),
        error=data.get("error"),
        ocr=data["ocr"] if isinstance(data.get("ocr"), dict) else None,
        document_id=_document_id(data.get("document_id")),
        metadata=EntryMetadata.from_json(data.get("metadata")),
        lead=StoredLead.from_json(data.get("lead")),
        warning=data["warning"] if isinstance(data.get("warning"), str) else None,
    )


def _document_id(value: object) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def _revision(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rag_dir(directory: Path) -> Path:
    return directory / RAG_DIR


def entry_path(directory: Path, name: str, *, deleted: bool = False) -> Path:
    return rag_dir(directory) / (name + (DELETED_SUFFIX if deleted else ENTRY_SUFFIX))


def read_entry(path: Path) -> FileEntry | None:
    """Read one entry file; a directory entry gives None. Unreadable or malformed -> StorageError."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise unreadable(path, err) from None
    return parse_entry(path, data)


def parse_entry(path: Path, data: bytes) -> FileEntry | None:
    """The entry in `data` (read from `path`); a directory entry gives None. Malformed -> StorageError."""
    try:
        return entry_from_json(orjson.loads(data))
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError) as err:
        raise unreadable(path, err) from None


def unreadable(path: Path, err: Exception) -> StorageError:
    return StorageError(f"cannot read sidecar {path}: {type(err).__name__}: {err}",
                        "the entry is rebuilt from the source on the next run")  # fmt: skip


def try_read(path: Path) -> FileEntry | None:
    """The file entry at `path`, or None when it is missing, unreadable, or a directory entry."""
    try:
        return read_entry(path)
    except StorageError:
        return None


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


def write_atomic(
    directory: Path,
    target_name: str,
    payload: bytes,
    *,
    like: os.stat_result | None = None,
    mode: int = 0o666,
    sync_folder: bool = True,
) -> Path:
    """Write `.rag/<target_name>` atomically (atomic.py): `.rag/tmp/<name>.tmp`, fsync, rename over the target,
    and, unless `sync_folder` is false, fsync of `.rag/`.

    The file is created with `mode` (less the umask); with `like`, the stat of the file the payload describes, it is
    never more readable than that file (see modes.py)."""
    rd = rag_dir(directory)
    target = rd / target_name
    if not valid_name(target_name):
        raise StorageError(f"cannot write {display_name(str(target))}: the name is not valid UTF-8",
                           "rename the file to a UTF-8 name")  # fmt: skip
    tmp = rd / TMP_DIR / f"{target_name}.{os.getpid()}.tmp"
    try:
        atomic_write(
            target, payload, tmp=tmp, create=lambda p: modes.create(p, mode, like), sync_folder=sync_folder
        )
    except OSError as err:
        raise StorageError(
            f"cannot write {target}: {err.strerror or err}",
            "check free space and write permission on the directory",
        ) from None
    return target


def dumps(data: Mapping[str, Any]) -> bytes:
    """Indented UTF-8 JSON like the ragjson tool's (orjson: the stdlib encoder is pure Python when indenting)."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2)


def write_entry(directory: Path, entry: FileEntry, like: os.stat_result | None = None) -> Path:
    """Write a file entry; `like` is the source's stat (the entry is never more readable than the source). `.rag/`
    is not flushed after each entry (one fsync a file is the cost that counts in a big folder): an entry whose
    rename a power cut undoes is named by its folder's change note, written and flushed before it, and made again."""
    return write_atomic(directory, entry.source.file_name + ENTRY_SUFFIX, dumps(entry.to_json()), like=like,
                        sync_folder=False)  # fmt: skip


def write_dir_entry(directory: Path, name: str) -> Path:
    return write_atomic(directory, name + ENTRY_SUFFIX, json.dumps(DIR_ENTRY).encode())


def mark_deleted(directory: Path, name: str) -> None:
    """Rename `<name>.ragjson` to `<name>.ragjson.deleted` (replacing an older deleted entry)."""
    os.replace(entry_path(directory, name), entry_path(directory, name, deleted=True))


def recover(directory: Path, name: str) -> None:
    """Rename `<name>.ragjson.deleted` back to `<name>.ragjson`."""
    os.replace(entry_path(directory, name, deleted=True), entry_path(directory, name))


class DirLock:
    """flock(2) on `D/.rag/tmp`: serialises work on one directory across threads and processes.

    Taking the lock creates the store when `create` (`.rag/` never more open than D, `.rag/tmp/` 0700; older, wider
    ones are narrowed) and removes `*.tmp` debris left by a crashed writer.
    """

    def __init__(self, directory: Path, *, create: bool = True) -> None:
        self.directory = directory
        self.create = create
        self._fd: int | None = None
        self._making = False  # the store did not exist: this lock made it (or tried)

    def __enter__(self) -> DirLock:
        tmp = rag_dir(self.directory) / TMP_DIR
        self._making = False
        try:
            self._take(tmp)
        except OSError as err:
            self._release()
            rd = rag_dir(self.directory)
            if self._making and not isinstance(err, FileNotFoundError):  # no store, and none can be made here
                raise StorageError(f"cannot write in {self.directory}: {err.strerror or err} (ragd keeps this "
                                   f"folder's sidecars in {rd})", "give the agent's user write permission on "
                                   "the folder, or ignore the folder ([ignore] skip_dirs)") from None  # fmt: skip
            if rd.exists() and not rd.is_dir():
                raise StorageError(f"cannot lock {tmp}: Not a directory ({rd} is a file, where ragd keeps this "
                                   "folder's sidecars)", f"move or rename {rd}: ragd needs a .rag folder there",
                                   ) from None  # fmt: skip
            raise StorageError(
                f"cannot lock {tmp}: {err.strerror or err}", "check write permission on the directory"
            ) from None
        assert self._fd is not None
        if self.create:
            _keep_private(self.directory, self._fd)
            keep_out_of_git(self.directory)
        clean_debris(tmp)
        return self

    def _take(self, tmp: Path) -> None:
        """Open and flock `tmp` (the store made first when `create`). A store removed while its lock was awaited
        (an emptied folder's: `drop_emptied`) is not the one at `tmp` any more: the one there now is taken."""
        lost: OSError | None = None
        for _ in range(LOCK_ATTEMPTS):
            try:
                self._fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                if not self.create:
                    raise
                self._making = True
                try:
                    self._fd = _make_store(self.directory)
                except FileNotFoundError as err:  # `.rag/` removed between its mkdir and tmp's
                    lost = err
                    continue
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            if _is_at(self._fd, tmp):
                return
            self._release()
            lost = FileNotFoundError(errno.ENOENT, "the store was removed meanwhile", str(tmp))
            if not self.create:
                raise lost
        assert lost is not None
        raise lost

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the fd drops the flock
            self._fd = None


def _make_store(directory: Path) -> int:
    """Create `.rag/` (never more open than `directory`) and `.rag/tmp/` (0700); return the fd of tmp. Its
    `.gitignore` is written once the lock is held (keep_out_of_git)."""
    rd = rag_dir(directory)
    like = os.stat(directory)
    with contextlib.suppress(FileExistsError):
        os.mkdir(rd, private_mode(like, like.st_gid, directory=True))  # its group is checked by _keep_private
    with contextlib.suppress(FileExistsError):
        os.mkdir(rd / TMP_DIR, 0o700)
    return os.open(rd / TMP_DIR, os.O_RDONLY | os.O_DIRECTORY)


def _is_at(fd: int, path: Path) -> bool:
    """The directory open as `fd` is the one at `path` now."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def keep_out_of_git(directory: Path) -> None:
    """`.rag/.gitignore` holding `*` (as a Python venv does), written when missing: a store in a git work tree
    never shows in `git status` nor is committed by `git add -A`. One the user edited is left as it is; never
    fatal (the store works without it; a store the agent may lock but not write, another user's, stays as it is)."""
    if os.path.lexists(rag_dir(directory) / GITIGNORE):
        return
    try:
        write_atomic(directory, GITIGNORE, GITIGNORE_TEXT, mode=0o644)
    except StorageError as err:
        log.debug("%s", err.message)


def _keep_private(directory: Path, tmp_fd: int) -> None:
    """Narrow a store made wider than the rules (by an older version or another tool); never fatal."""
    try:
        if os.fstat(tmp_fd).st_mode & 0o077:
            os.fchmod(tmp_fd, 0o700)
        modes.restrict(rag_dir(directory), os.stat(directory))
    except FileNotFoundError:  # the folder was deleted meanwhile: nothing left to narrow
        return
    except OSError as err:
        log.warning("cannot narrow the permissions of %s: %s", rag_dir(directory), err.strerror or err)


def clean_debris(tmp: Path) -> int:
    """Remove the `*.tmp` files in `tmp` (scandir: taken with every lock, so no pathlib glob on this path)."""
    removed = 0
    try:
        with os.scandir(tmp) as it:
            debris = [de.path for de in it if de.name.endswith(".tmp")]
    except (FileNotFoundError, NotADirectoryError):  # removed meanwhile: nothing to clean
        return 0
    for p in debris:
        try:
            os.unlink(p)
            removed += 1
        except (FileNotFoundError, IsADirectoryError):  # gone meanwhile; not ours to remove
            pass
    return removed


def drop_emptied(directory: Path) -> bool:
    """Remove the store of a folder that holds nothing else any more (its documents deleted, `git rm` or a checkout
    of a branch without them): entries of deleted sources, `.gitignore` and `tmp/` only, no change note. The folder
    itself is the user's and stays. Checked again under the lock, which is dropped last; a job waiting for that
    lock takes a new store (DirLock). True if it was removed."""
    if not _only_store(directory) or not _emptied(rag_dir(directory)):
        return False
    try:
        with DirLock(directory, create=False):
            rd = rag_dir(directory)
            if not _only_store(directory) or not _emptied(rd):
                return False
            with os.scandir(rd) as it:
                names = [de.name for de in it if de.name != TMP_DIR]
            for name in names:
                os.unlink(rd / name)
            os.rmdir(rd / TMP_DIR)  # empty: debris was removed as the lock was taken
            os.rmdir(rd)
    except (StorageError, OSError) as err:  # someone else's file, a new entry meanwhile: the store stays
        log.debug("store of %s kept: %s", directory, err)
        return False
    log.info("removed the sidecars of %s: the folder holds nothing any more", directory)
    return True


def _only_store(directory: Path) -> bool:
    """`directory` holds nothing but its `.rag/` (stops at the first other name: cheap in a big folder)."""
    try:
        with os.scandir(directory) as it:
            return all(de.name == RAG_DIR for de in it)
    except OSError:
        return False


def _emptied(rd: Path) -> bool:
    """`.rag/` holds only entries of deleted sources, its `.gitignore` and `tmp/` (with nothing but debris)."""
    try:
        with os.scandir(rd) as it:
            names = [de.name for de in it]
        with os.scandir(rd / TMP_DIR) as it:
            staged = [de.name for de in it if not de.name.endswith(".tmp")]
    except OSError:
        return False
    return not staged and all(n.endswith(DELETED_SUFFIX) or n in (GITIGNORE, TMP_DIR) for n in names)


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
