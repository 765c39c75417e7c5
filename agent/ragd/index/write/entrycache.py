"""The verifier's memory of what each sidecar entry says, so that a pass reads again only the entries that changed.

It holds one record per file of every root for the agent's life, so its form is compact: per directory, per name,
one `bytes` of the entry file's stat and of what the verification needs of the entry (the source's md5 and chunk
count, and the source stat it recorded). Kept as a `Path` per entry with a tuple, an `Expected` and a `SourceInfo`,
30,000 notes held 38 MiB; packed, under 10 MiB (docs/benchmarks.md, the big folder's memory).
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

from ...model import EmbeddingIdentity
from ...pipeline import sidecar
from ...pipeline.scan import Expected
from ...pipeline.sidecar import SourceInfo
from ...vocabulary import FileState
from .sync import servable

# the entry file's stat (device, inode, size, mtime_ns, ctime_ns), then a byte of flags
_HEAD = struct.Struct("<QQQqqB")
# the recorded source: size_bytes, mtime, inode, mtime_ns, ctime_ns (0 where None: the flags say which)
_SOURCE = struct.Struct("<qqqqq")
_CHUNKS = struct.Struct("<q")
_WANT, _SRC, _MTIME_NS, _CTIME_NS = 1, 2, 4, 8
# a record: bytes, or (rarely: a value out of the packed range) the plain (key, want, source) it stands for
Record = bytes | tuple[tuple[int, ...], Expected | None, SourceInfo | None]


def pack(key: tuple[int, ...], want: Expected | None, src: SourceInfo | None) -> Record:
    """One entry's record, as compact as its values allow."""
    flags = (
        (want is not None) * _WANT
        | (src is not None) * _SRC
        | (src is not None and src.mtime_ns is not None) * _MTIME_NS
        | (src is not None and src.ctime_ns is not None) * _CTIME_NS
    )
    try:
        out = _HEAD.pack(*key, flags)
        if want is not None:
            out += _CHUNKS.pack(want.chunk_count)
        if src is not None:
            out += _SOURCE.pack(src.size_bytes, src.mtime, src.inode, src.mtime_ns or 0, src.ctime_ns or 0)
            out += "\0".join((src.md5_hash, src.file_name)).encode("utf-8", "surrogatepass")
        elif want is not None:
            out += want.source_md5.encode("utf-8", "surrogatepass")
    except (struct.error, TypeError):
        return (key, want, src)
    return out


def _copy(record: Record) -> Record:
    return bytes(memoryview(record)) if isinstance(record, bytes) else record


def unpack(record: Record) -> tuple[tuple[int, ...], Expected | None, SourceInfo | None]:
    """The (entry stat, what the index should hold, recorded source) a record was packed from."""
    if isinstance(record, tuple):
        return record
    *key, flags = _HEAD.unpack_from(record)
    at = _HEAD.size
    chunks = None
    if flags & _WANT:
        (chunks,) = _CHUNKS.unpack_from(record, at)
        at += _CHUNKS.size
    src = None
    if flags & _SRC:
        size, mtime, inode, mtime_ns, ctime_ns = _SOURCE.unpack_from(record, at)
        md5, _, name = record[at + _SOURCE.size :].decode("utf-8", "surrogatepass").partition("\0")
        src = SourceInfo(name, md5, size, mtime, inode, mtime_ns if flags & _MTIME_NS else None,
                         ctime_ns if flags & _CTIME_NS else None)  # fmt: skip
    else:
        md5 = record[at:].decode("utf-8", "surrogatepass")
    want = None if chunks is None else Expected(md5, chunks)
    return tuple(key), want, src


class SidecarCache:
    """What each file entry says the index should hold, re-read only when the entry file's stat changes (device,
    inode, size, mtime and ctime: an entry rewritten in place with its mtime put back has a new ctime)."""

    def __init__(self, identity: EmbeddingIdentity) -> None:
        self.identity = identity
        self._seen: dict[Path, dict[str, Record]] = {}  # directory -> file name -> record
        self._next: dict[Path, dict[str, Record]] = {}

    def compact(self) -> int:
        """The records of the last pass copied, each name interned (resident/memory.py: `compact`); returns how many.
        Not while a pass runs (on the verifier's thread): it would swap in its own records at its end anyway."""
        if self._next:
            return 0
        seen = {d: {sys.intern(n): _copy(r) for n, r in records.items()} for d, records in self._seen.items()}
        if self._next:  # a pass began meanwhile
            return 0
        self._seen = seen
        return sum(map(len, seen.values()))

    def expected(self, directory: Path, files: Sequence[str]) -> dict[str, Expected]:
        """path -> Expected for the files (present, not ignored) of `directory` whose entry is indexable."""
        out = {}
        for name in files:
            want = self.of(directory, name)
            if want is not None:
                out[str(directory / name)] = want
        return out

    def one(self, entry: Path) -> Expected | None:
        """What the entry file `entry` (`<directory>/.rag/<name>.ragjson`) says the index should hold."""
        return self.of(entry.parent.parent, entry.name[: -len(sidecar.ENTRY_SUFFIX)])

    def of(self, directory: Path, name: str) -> Expected | None:
        """What the entry of `directory`'s file `name` says the index should hold (None: no indexable entry)."""
        entry = sidecar.entry_path(directory, name)
        try:
            st = os.stat(entry)
        except OSError:
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        seen = self._seen.get(directory, {}).get(name)
        cached = None if seen is None else unpack(seen)
        if seen is None or cached is None or cached[0] != key:
            found = sidecar.try_read(entry)
            want = Expected(found.source.md5_hash, len(found.chunks)) if found and servable(found, self.identity) else None  # fmt: skip
            cached = (key, want, recorded_source(found))
            seen = pack(*cached)
        self._next.setdefault(directory, {})[name] = seen
        return cached[1]

    def recorded(self, directory: Path, name: str) -> SourceInfo | None:
        """The source stat that the entry of `name` (seen by `expected` in this pass) recorded, if it is one a
        directory job keeps up to date (EMBEDDED and SKIPPED entries)."""
        record = self._next.get(directory, {}).get(name)
        return None if record is None else unpack(record)[2]

    def end_pass(self) -> None:
        """Keep only the entries seen in this pass (bounded by the tree, not by its history)."""
        self._seen, self._next = self._next, {}


def recorded_source(entry: sidecar.FileEntry | None) -> SourceInfo | None:
    """What a source's stat is compared with: what its entry recorded, for the states whose entry the next job
    rewrites when the stat differs (a FAILED file whose content is unchanged keeps its old record)."""
    if entry is None or entry.status not in (FileState.EMBEDDED, FileState.SKIPPED):
        return None
    return entry.source
