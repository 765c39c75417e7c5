"""The entries this process wrote lately, kept to be read back once without the disk.

A directory job writes a file's entry, and the index writer reads it back moments later to apply the folder's change
note: reading the file, parsing its JSON and building the entry took about a tenth of the agent's interpreter time
in the referee's run (docs/benchmarks.md). The entry written is kept here with the stat of the file it went to; the
first read of that path whose stat is still the same (inode, size, mtime and ctime to the nanosecond: any other
write, by this process or another tool, changes one of them) takes it from here. Bounded by the size of the
entries' JSON (MAX_BYTES), the oldest dropped first: an entry nobody reads back soon is read from the disk as before.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .entry import FileEntry

MAX_BYTES = 8 * 1024 * 1024  # of the kept entries' JSON

_Key = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns


def _key(st: os.stat_result) -> _Key:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class Recent:
    """Entries written, by path, each taken once by a read that finds its file as it was written."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, tuple[_Key, FileEntry, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, path: str, st: os.stat_result, entry: FileEntry, size: int) -> None:
        """`entry` was just written to `path` (`size` bytes of JSON), whose stat is now `st`."""
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._kept.pop(path, None)
            if old is not None:
                self._bytes -= old[2]
            self._kept[path] = (_key(st), entry, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, _, dropped) = self._kept.popitem(last=False)
                self._bytes -= dropped

    def take(self, path: str) -> FileEntry | None:
        """The entry written to `path`, if its file is still the one written (then forgotten here); else None."""
        with self._lock:
            kept = self._kept.pop(path, None)
            if kept is None:
                return None
            self._bytes -= kept[2]
        try:
            st = os.stat(path)
        except OSError:
            return None  # the read meets the same error and says it
        return kept[1] if _key(st) == kept[0] else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)


RECENT = Recent()  # the process's: what write_entry wrote, for read_entry
