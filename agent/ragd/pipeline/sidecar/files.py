"""Where the entries of a directory live (`D/.rag/`) and reading and writing them: one entry read (a malformed
one is a StorageError), an entry written atomically under `.rag/tmp/` and never more readable than its
source, an entry marked deleted and recovered."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import orjson

from ... import modes
from ...atomic import atomic_write
from ...errors import StorageError
from ...modes import display_name, valid_name
from .entry import DIR_ENTRY, FileEntry, dumps, entry_from_json
from .recent import RECENT

RAG_DIR = ".rag"
TMP_DIR = "tmp"


ENTRY_SUFFIX = ".ragjson"
DELETED_SUFFIX = ".ragjson.deleted"


GITIGNORE = ".gitignore"
GITIGNORE_TEXT = b"# written by ragd: this folder holds its index sidecars, never to be committed\n*\n"


def rag_dir(directory: Path) -> Path:
    return directory / RAG_DIR


def entry_path(directory: Path, name: str, *, deleted: bool = False) -> Path:
    return rag_dir(directory) / (name + (DELETED_SUFFIX if deleted else ENTRY_SUFFIX))


def read_entry(path: Path) -> FileEntry | None:
    """Read one entry file; a directory entry gives None. Unreadable or malformed -> StorageError. An entry this
    process just wrote, its file unchanged since, is taken as written (recent.py)."""
    kept = RECENT.take(str(path))
    if kept is not None:
        return kept
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
            errno=err.errno,
        ) from None
    return target


def write_entry(directory: Path, entry: FileEntry, like: os.stat_result | None = None) -> Path:
    """Write a file entry; `like` is the source's stat (the entry is never more readable than the source). `.rag/`
    is not flushed after each entry (one fsync a file is the cost that counts in a big folder): an entry whose
    rename a power cut undoes is named by its folder's change note, written and flushed before it, and made again."""
    payload = dumps(entry.to_json())
    target = write_atomic(
        directory, entry.source.file_name + ENTRY_SUFFIX, payload, like=like, sync_folder=False
    )
    # kept for the index writer's read (recent.py); a file gone already is read from the disk, as any entry
    with contextlib.suppress(OSError):
        RECENT.put(str(target), os.stat(target), entry, len(payload))
    return target


def write_dir_entry(directory: Path, name: str) -> Path:
    return write_atomic(directory, name + ENTRY_SUFFIX, json.dumps(DIR_ENTRY).encode())


def mark_deleted(directory: Path, name: str) -> None:
    """Rename `<name>.ragjson` to `<name>.ragjson.deleted` (replacing an older deleted entry)."""
    os.replace(entry_path(directory, name), entry_path(directory, name, deleted=True))


def recover(directory: Path, name: str) -> None:
    """Rename `<name>.ragjson.deleted` back to `<name>.ragjson`."""
    os.replace(entry_path(directory, name, deleted=True), entry_path(directory, name))
