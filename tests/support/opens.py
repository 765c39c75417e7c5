"""Which files of a directory a process opened, seen from outside it: inotify's IN_OPEN on that directory.

with OpenWatch(root / ".rag") as seen:
    run_something()
assert not seen.names()  # nothing in .rag/ was opened
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path
from types import TracebackType

IN_OPEN = 0x20
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name, NUL-padded)


class OpenWatch:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd = -1
        self._opened: list[str] = []

    def __enter__(self) -> OpenWatch:
        libc = ctypes.CDLL(None, use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0 or libc.inotify_add_watch(self._fd, os.fsencode(self.directory), IN_OPEN) < 0:
            raise OSError(ctypes.get_errno(), f"inotify on {self.directory}")
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._drain()
        os.close(self._fd)
        self._fd = -1

    def names(self) -> list[str]:
        """The names opened so far (one per open, in order; the directory itself is not listed)."""
        self._drain()
        return list(self._opened)

    def _drain(self) -> None:
        while self._fd >= 0:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            at = 0
            while at < len(data):
                _wd, _mask, _cookie, size = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + size].rstrip(b"\0")
                if name:
                    self._opened.append(os.fsdecode(name))
                at += _EVENT.size + size
