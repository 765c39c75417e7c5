"""The stat cache: each sidecar entry's digest, keyed by the entry file's own stat, so that the job of an unchanged
directory stats its `.ragjson` files instead of reading and parsing them.

Where it lives: `<data dir>/sidecars.cache`, beside the index, never in `.rag/`. A `.rag/` folder is shared with
the ragjson tool and holds only what RAG-Storage-Spec v2.4 names (DESIGN §3.1: entries, `.deleted` entries, `tmp/`
and change notes; extra metadata is allowed as additional *keys* in an entry, not as additional files). The cache
is ragd's private, derived state, like the index: each data directory (each agent) has its own, it is 0600 in the
0700 data directory, and deleting it costs one full read of the sidecars.

Why it is safe (nothing in it can make a job miss a change):
- It only ever stands in for reading an entry: the decision is still `scan.classify` on the digest against the
  source's stat now (and its md5 when the stat differs), so a changed source is found exactly as without a cache.
- A digest is used only while the entry file's stat (device, inode, size, mtime_ns, ctime_ns) is the one it was
  read under (`os.fstat` of the very descriptor read). An entry rewritten in place or replaced by a rename (the
  ragjson tool, an editor, a restore) gets a new ctime (or inode) and is read again; a deleted one is not listed.
  Nobody can set a ctime: any change to the file after the read sets it to "now".
- A digest is stored only when the entry's mtime and ctime are more than `RACY_NS` older than the read began, so a
  later change within the same timestamp tick (coarse file-system clocks, 2-second FAT times) cannot keep its key.
- The file carries a format number, ragd's version and the split rules' revision (a digest's `outdated` depends on
  them) and an md5 of its body: a cache of another version, truncated or damaged is ignored as a whole (all entries
  are read, and the cache is written anew). A record that does not decode is a miss.
- A folder renamed or moved keeps its records: they are found under its old path by its store's identity
  (`sidecar.store_id`: the device and inode of its `.rag/tmp/`, which a rename keeps), and each is still used only
  under its entry file's stat, which a rename of the folder above does not change (a 30,000-note folder renamed:
  its job read every entry again).
- Writes are atomic (tmp + rename); several writers (an agent and a `run --once` on the same data directory) lose
  at most each other's records, never correctness. A writer's tmp file is named after its pid; one left by a
  process that died mid-write (a kill, a crash) is removed by the next load.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson

from ragctl.protocol.discovery import pid_alive

from .. import __version__
from ..atomic import atomic_make
from ..errors import StorageError
from ..modes import valid_name
from . import sidecar
from .digest import Digest
from .filestat import Stat
from .sidecar import FileEntry
from .structure import SPLIT_REVISION

log = logging.getLogger(__name__)

FILE_NAME = "sidecars.cache"
FORMAT = 5  # 3: digests carry the metadata basis; 4: and the document id; 5: whether the entry has a lead
WRITE_LINES = 1024  # lines of the cache file written at a time
RACY_NS = 2_000_000_000  # an entry changed this recently may change again without a new stat: not cached
Key = tuple[int, int, int, int, int]
# one entry's record, kept as its JSON bytes (a third of the memory of the decoded lists):
# [key, digest JSON | None (a directory entry)]
Record = bytes


class EntryMode(NamedTuple):
    """What a job needs of an entry file's stat (to narrow its permissions: modes.restrict): a job keeps one for
    each entry of its folder, and a whole `os.stat_result` costs some 600 bytes (18 MiB for 30,000 notes)."""

    st_mode: int
    st_gid: int


def entry_mode(st: os.stat_result) -> EntryMode:
    return EntryMode(st.st_mode, st.st_gid)


def stat_key(st: Stat) -> Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _header() -> dict[str, Any]:
    return {"format": FORMAT, "ragd": __version__, "split_revision": SPLIT_REVISION}


class StatCache:
    """Digests by directory and name. Thread-safe; `save` writes it back to where it was loaded from."""

    def __init__(self, path: Path | None = None, dirs: dict[str, dict[str, Record]] | None = None) -> None:
        self.path = path
        self._dirs: dict[str, dict[str, Record]] = dirs or {}
        # the store each directory's records were found in, by its identity (kept in memory only: a job of each
        # folder sets it, and every folder has one at the agent's start)
        self._stores: dict[sidecar.StoreId, str] = {}
        self._lock = threading.Lock()
        self._saving = threading.Lock()  # one save at a time (they share the tmp file)
        self.hits = 0
        self.misses = 0
        self._dirty = False  # changed since loaded or saved

    def compact(self) -> int:
        """Each record copied, its name interned (resident/memory.py: `compact`); returns how many."""
        with self._lock:
            self._dirs = {
                d: {sys.intern(n): _copy(r) for n, r in records.items()} for d, records in self._dirs.items()
            }
            return sum(map(len, self._dirs.values()))

    @classmethod
    def load(cls, data_dir: Path) -> StatCache:
        """The cache of a data directory; an empty one when it is missing, of another version, or damaged."""
        path = Path(data_dir) / FILE_NAME
        _remove_debris(path)
        try:
            with open(path, "rb") as fh:
                dirs = _read_cache(fh)
        except FileNotFoundError:
            return cls(path)
        except OSError as err:
            log.warning(
                "cannot read the stat cache %s (%s); reading every sidecar", path, err.strerror or err
            )
            return cls(path)
        if dirs is None:
            log.info("the stat cache %s is of another version or damaged; reading every sidecar", path)
            fresh = cls(path)
            fresh._dirty = True  # replaced at the next save, even if nothing is cached by then
            return fresh
        return cls(path, dirs)

    def get(self, directory: str, name: str) -> Record | None:
        return self._dirs.get(directory, {}).get(name)

    def count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    def replace(
        self, directory: str, records: dict[str, Record], store: sidecar.StoreId | None = None
    ) -> None:
        """What a job found in one directory's `.rag/` (only its current entries are kept); `store`: that store's
        identity, by which its records are found again once the folder is renamed or moved (`adopt`)."""
        with self._lock:
            if store is not None and records:
                self._stores[store] = directory
            if self._dirs.get(directory, {}) == records:
                return
            self._dirty = True
            if records:
                self._dirs[directory] = records
            else:
                self._dirs.pop(directory, None)

    def adopt(self, directory: str, store: sidecar.StoreId) -> bool:
        """`directory`, of which nothing is cached, holds the store `store`: if records were found in that
        folder under another path that no longer holds it (the folder renamed or moved), they are `directory`'s
        now. True if they were moved."""
        with self._lock:
            old = self._stores.get(store)
            if directory in self._dirs or old is None or old == directory or old not in self._dirs:
                return False
            if sidecar.store_id(Path(old)) == store:  # still there too (a bind mount): left to its own path
                return False
            self._dirs[directory] = self._dirs.pop(old)
            self._stores[store] = directory
            self._dirty = True
            return True

    def clear(self) -> None:
        """Forget every record (its file vanished with the data directory): entries are read again, and the cache
        is written anew at the next save."""
        with self._lock:
            self._dirs, self._stores, self._dirty = {}, {}, True

    def save(self) -> None:
        """Write the cache if it changed (directories gone since are dropped). A failure costs speed only: logged,
        not raised."""
        if self.path is None or not self._dirty:
            return
        with self._saving:
            # a folder's records are replaced whole, never changed in place: they are written unlocked
            with self._lock:
                dirs = {d: r for d, r in self._dirs.items() if os.path.isdir(d)}
                self._dirs, self._dirty = dirs, False
            try:
                atomic_make(self.path, partial(_write, dirs), tmp=_tmp_path(self.path, os.getpid()))
            except OSError as err:
                log.warning("cannot write the stat cache %s: %s", self.path, err.strerror or err)


def _tmp_path(path: Path, pid: int) -> Path:
    return path.with_name(f"{path.name}.{pid}.tmp")


def _remove_debris(path: Path) -> None:
    """The tmp files of writers that died mid-write (their pid is gone) removed; a live writer's is left."""
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 1 : -len(".tmp")]
        if pid.isdigit() and not pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()
                log.info("removed %s, left by a process that stopped while writing it", tmp)


def _head(md5: str) -> bytes:
    """The file's first line (without its newline): the header and the body's md5, always of the same length."""
    return orjson.dumps({**_header(), "md5": md5})


def _write(dirs: dict[str, dict[str, Record]], at: Path) -> None:
    """The cache file at `at`: the header line, then one line per entry, directory and name as JSON strings (which
    never hold a raw tab or newline), then the record. Written WRITE_LINES lines at a time, the body's md5 written
    into the header last: made whole in memory, the file of 100,000 entries was three copies of ~40 MB at once
    (its lines, their join, the header added)."""
    fd = os.open(at, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as fh:
        placeholder = _head("0" * 32)
        fh.write(placeholder + b"\n")
        md5 = hashlib.md5(usedforsecurity=False)
        block: list[bytes] = []
        sep = b""  # the lines are joined by newlines: none before the first

        def write_block() -> None:
            for data in (sep, b"\n".join(block)):
                md5.update(data)
                fh.write(data)

        for directory, records in dirs.items():
            where = orjson.dumps(directory)
            for name, record in records.items():
                block.append(b"\t".join((where, orjson.dumps(name), record)))
                if len(block) == WRITE_LINES:
                    write_block()
                    block, sep = [], b"\n"
        if block:
            write_block()
        head = _head(md5.hexdigest())
        if len(head) != len(placeholder):  # (an md5 is 32 hex digits: never)
            raise OSError(f"the stat cache's header changed length: {head!r}")
        fh.seek(0)
        fh.write(head)


def _read_cache(fh: BinaryIO) -> dict[str, dict[str, Record]] | None:
    """What `_write` wrote, read a line at a time (the records are all that is kept); None when the header is not
    this version's or the body's md5 does not match (a cache cut short or damaged is ignored whole)."""
    dirs: dict[str, dict[str, Record]] = {}
    records: dict[str, Record] = {}
    try:
        header = orjson.loads(fh.readline())
        if not isinstance(header, dict):
            return None
        want = header.pop("md5", None)
        if header != _header():
            return None
        md5 = hashlib.md5(usedforsecurity=False)
        last = b""
        for line in fh:
            md5.update(line)
            where, name, record = line.removesuffix(b"\n").split(b"\t", 2)
            if where != last:
                last, records = where, dirs.setdefault(orjson.loads(where), {})
            records[orjson.loads(name)] = record
    except (orjson.JSONDecodeError, ValueError, TypeError):
        return None
    return dirs if md5.hexdigest() == want else None


@dataclass
class DirEntries:
    """One `.rag/` folder: live digests by name (None: a directory entry), deleted names, unreadable names (with
    why), each live entry file's mode and group, and the records for the cache. `full`: whole entries a job read again later
    (a recovered one); `load_dir` keeps none of the entries it reads (only their digests): a folder of 30,000
    files held all their chunks and vectors, some 10 KiB a file, for as long as its job ran (docs/benchmarks.md,
    issue 36)."""

    live: dict[str, Digest | None] = field(default_factory=dict)
    full: dict[str, FileEntry | None] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    unreadable: dict[str, str] = field(default_factory=dict)
    modes: dict[str, EntryMode] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    store: sidecar.StoreId | None = None  # the store's identity (None: there is none)


def load_dir(directory: Path, cache: StatCache | None) -> DirEntries:
    """Every entry of `directory/.rag/`: from the cache where the entry file's stat says it is the one cached, else
    read (and offered to the cache). Only its digest is kept: the memory of a job is bounded by its folder's
    names, not by its entries' chunks (a job reads again the few whole entries it needs)."""
    found = DirEntries(store=sidecar.store_id(directory))
    started = time.time_ns()
    where = str(directory)
    if cache is not None and found.store is not None:
        cache.adopt(where, found.store)  # a folder renamed or moved: its records found under its old path
    hits = 0
    for name, path, deleted in _entries(directory):
        if deleted:
            found.deleted.add(name)
            continue
        if cache is not None and valid_name(name) and _from_cache(cache, where, name, path, found):
            hits += 1
            continue
        try:
            entry, st = _read(path)
        except FileNotFoundError:  # gone since the listing (its store being deleted): as if never listed
            continue
        except StorageError as err:
            found.unreadable[name] = err.message
            continue
        found.live[name] = None if entry is None else Digest.of(entry, name)
        found.modes[name] = entry_mode(st)
        if cache is not None and valid_name(name) and max(st.st_mtime_ns, st.st_ctime_ns) < started - RACY_NS:
            found.records[name] = _record(stat_key(st), found.live[name])
    if cache is not None:
        cache.count(hits, len(found.live) - hits)
    return found


def _entries(directory: Path) -> Iterator[tuple[str, str, bool]]:
    """(name, entry file, deleted) of each entry in `directory/.rag/` (sidecar.list_entries, without a Path each)."""
    try:
        with os.scandir(os.path.join(directory, sidecar.RAG_DIR)) as it:
            for de in it:
                if de.name.endswith(sidecar.ENTRY_SUFFIX):
                    yield de.name[: -len(sidecar.ENTRY_SUFFIX)], de.path, False
                elif de.name.endswith(sidecar.DELETED_SUFFIX):
                    yield de.name[: -len(sidecar.DELETED_SUFFIX)], de.path, True
    except (FileNotFoundError, NotADirectoryError):  # no store (a file named .rag fails its own job only)
        return


def _from_cache(cache: StatCache, where: str, name: str, path: str, found: DirEntries) -> bool:
    record = cache.get(where, name)
    if record is None:
        return False
    try:
        st = os.stat(path)
        cached_key, raw = orjson.loads(record)
        if tuple(cached_key) != stat_key(st):
            return False
        found.live[name] = None if raw is None else Digest.from_json(raw)
    except (OSError, TypeError, ValueError):  # (orjson.JSONDecodeError is a ValueError)
        return False  # gone or unreadable (the read says which), or a record this version cannot decode
    found.modes[name] = entry_mode(st)
    found.records[name] = record
    return True


def _record(key: Key, digest: Digest | None) -> Record:
    """A record, copied out of orjson's buffer: the bytes orjson returns keep the 4 KiB it wrote them in, ten
    times the record's size, and the cache keeps a record for every file of the tree (30,000 notes: 120 MiB)."""
    return _copy(orjson.dumps([key, None if digest is None else digest.to_json()]))


def _copy(record: bytes) -> bytes:
    """A new bytes object equal to `record` (`bytes(record)` would return `record` itself)."""
    return bytes(memoryview(record))


def _read(path: str) -> tuple[FileEntry | None, os.stat_result]:
    """The entry and the stat of the very file read (so a replacement between the two is never mixed up).
    FileNotFoundError: it is gone; any other failure to read it is a StorageError."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise sidecar.unreadable(Path(path), err) from None
    return sidecar.parse_entry(Path(path), data), st


def keep(cache: StatCache | None, directory: Path, found: DirEntries, changed: Collection[str]) -> None:
    """Record what a job found, less the entries it changed (their new stat is cached by a later job)."""
    if cache is not None:
        cache.replace(
            str(directory), {n: r for n, r in found.records.items() if n not in changed}, found.store
        )
