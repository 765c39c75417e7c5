"""Directory listing, ignore rules and change detection (DESIGN §4) — read-only, shared by jobs and status."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .config import IgnoreConfig
from .model import EmbeddingIdentity
from .sidecar import EMBEDDED, FAILED, RAG_DIR, SKIPPED, FileEntry, parse_stamp

HASH_BLOCK = 1 << 20


@dataclass(frozen=True)
class Listing:
    """What a directory holds that ragd tracks."""

    files: dict[str, os.stat_result]
    dirs: tuple[str, ...]


class Ignore:
    def __init__(self, cfg: IgnoreConfig) -> None:
        self.patterns = cfg.file_patterns
        self.skip_dirs = frozenset(cfg.skip_dirs)

    def file(self, name: str) -> bool:
        return name.startswith(".") or any(fnmatch.fnmatchcase(name, p) for p in self.patterns)

    def dir(self, name: str) -> bool:
        return name.startswith(".") or name in self.skip_dirs or name == RAG_DIR


def list_dir(directory: Path, ignore: Ignore) -> Listing:
    """Regular files (symlinks to files followed) and real subdirectories (symlinked ones are not descended)."""
    files: dict[str, os.stat_result] = {}
    dirs: list[str] = []
    with os.scandir(directory) as it:
        for de in it:
            try:
                if de.is_dir(follow_symlinks=False):
                    if not ignore.dir(de.name):
                        dirs.append(de.name)
                elif not ignore.file(de.name):
                    st = de.stat(follow_symlinks=True)
                    if stat.S_ISREG(st.st_mode):
                        files[de.name] = st
            except OSError:
                continue  # vanished or dangling symlink: gone for this pass
    return Listing(files, tuple(sorted(dirs)))


def walk_dirs(root: Path, ignore: Ignore) -> Iterator[Path]:
    """Every tracked directory under root (root first), without following symlinks."""
    stack = [root]
    while stack:
        d = stack.pop()
        yield d
        try:
            with os.scandir(d) as it:
                subs = [
                    Path(de.path) for de in it if de.is_dir(follow_symlinks=False) and not ignore.dir(de.name)
                ]
        except OSError:
            continue
        stack.extend(sorted(subs, reverse=True))


def md5_file(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while block := fh.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


class Change(Enum):
    NEW = "new"
    UNCHANGED = "unchanged"
    TOUCHED = "touched"  # stat differs but the content (md5) is the same: refresh the recorded stat only
    CHANGED = "changed"
    RETRY = "retry"  # a failed file whose retry time has come, or a skipped one whose policy changed


def stat_matches(entry: FileEntry, st: os.stat_result) -> bool:
    src = entry.source
    if src.size_bytes != st.st_size or src.inode != st.st_ino:
        return False
    if src.mtime_ns is not None:
        return src.mtime_ns == st.st_mtime_ns and src.ctime_ns in (None, st.st_ctime_ns)
    return src.mtime == int(st.st_mtime)


def is_racy(entry: FileEntry, st: os.stat_result) -> bool:
    """The file may have changed again within the second it was recorded in (DESIGN §4)."""
    recorded = parse_stamp(entry.modify_dt)
    return recorded is None or int(st.st_mtime) >= int(recorded)


def identity_matches(entry: FileEntry, identity: EmbeddingIdentity) -> bool:
    if entry.model_name != identity.model_name or entry.dimension != identity.dimension:
        return False
    return entry.splitter is None or entry.splitter == identity.splitter.fingerprint


@dataclass(frozen=True)
class Expected:
    """What the index should hold for one source, according to its sidecar."""

    source_md5: str
    chunk_count: int


def indexable(entry: FileEntry | None, identity: EmbeddingIdentity) -> bool:
    """Whether the entry's chunks belong in the index of `identity` (EMBEDDED, same identity, all vectors)."""
    return (
        entry is not None
        and entry.status == EMBEDDED
        and identity_matches(entry, identity)
        and all(c.vector_base64 is not None for c in entry.chunks)
    )


def classify(
    entry: FileEntry | None,
    path: Path,
    st: os.stat_result,
    identity: EmbeddingIdentity,
    policy: str,
    now: float,
) -> Change:
    """Decide what a file needs. Hashes the file only when the stat fast path cannot decide."""
    if entry is None:
        return Change.NEW
    if entry.status == SKIPPED:
        same = stat_matches(entry, st) and (entry.error or {}).get("policy") == policy
        return Change.UNCHANGED if same else Change.RETRY
    fast = stat_matches(entry, st)
    if fast and not is_racy(entry, st):
        content_same = True
    else:
        content_same = bool(entry.source.md5_hash) and md5_file(path) == entry.source.md5_hash
    if not content_same:
        return Change.CHANGED
    if entry.status == FAILED:
        error = entry.error or {}
        if "retry_at" not in error:  # e.g. written by another tool: try again
            return Change.RETRY
        retry_at = error["retry_at"]  # None: only a change to the file can help
        due = retry_at is not None and (parse_stamp(retry_at) or 0) <= now
        return Change.RETRY if due else Change.UNCHANGED
    if entry.status != EMBEDDED or not identity_matches(entry, identity):
        return Change.RETRY
    return Change.UNCHANGED if fast and not is_racy(entry, st) else Change.TOUCHED
