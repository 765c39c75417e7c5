"""inotify watches on hard-linked files themselves, for the changes made through a path outside every root.

The watcher (watcher.py) watches directories: inotify reports a write, or a `chmod`, on the directory of the path it
was made through. A file with more than one hard link is one inode reached by several paths; when another path lies
in no root (`ln ~/notes/plan.md /srv/backup/plan.md`, a dotfiles manager, `cp -l`), a change made through it reaches
no watched directory, and the tracked path stayed stale in search (its own stat changed, which only the periodic
verification saw). A watch on the file itself is told of every change to the inode, whatever path made it.

One inotify instance for all of them (an instance per file would soon meet the per-user limit of 128), read by one
thread; each watched path's changes are handed to `sink` (the watcher's relay: a DIRTY event for the path's folder,
debounced as any other). Only the hard-linked files of the directory jobs' listings are watched (resident/links.py
says which): a tree of ordinary files costs nothing here. Past MAX_WATCHED files, or when the kernel refuses a watch
(its limit), a file is left to the verification, which compares every source's own stat with its entry's.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import struct
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from .inotify import LIMIT_ERRORS, libc

log = logging.getLogger(__name__)

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_IGNORED, IN_Q_OVERFLOW, IN_DONT_FOLLOW = 0x8000, 0x4000, 0x02000000
MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DONT_FOLLOW  # a write, a chmod or chown, a link count
MAX_WATCHED = 10_000  # files watched at most (each an inotify watch of the user's max_user_watches)
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)


class FileWatch:
    """Watches on files (by path); `sink(path)` for each change to a watched file's inode."""

    def __init__(self, sink: Callable[[Path], None]) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._paths: dict[int, set[Path]] = {}  # watch descriptor -> the watched paths of that inode
        self._wd: dict[Path, int] = {}
        self._fd = -1
        self._thread: threading.Thread | None = None
        self._closed = False
        # a limit of the kernel's refused a watch: said once (more files meet the same)
        self._limit_said = False

    def watch(self, paths: Iterable[Path]) -> None:
        for path in paths:
            with self._lock:
                if self._closed or path in self._wd or len(self._wd) >= MAX_WATCHED or not self._open():
                    continue
                wd = libc.inotify_add_watch(self._fd, os.fsencode(path), MASK)
                if wd < 0:
                    self._refuse(path, ctypes.get_errno())
                    continue
                self._wd[path] = wd
                self._paths.setdefault(wd, set()).add(path)

    def unwatch(self, paths: Iterable[Path]) -> None:
        with self._lock:
            for path in paths:
                wd = self._wd.pop(path, None)
                if wd is None:
                    continue
                sharing = self._paths.get(wd, set())
                sharing.discard(path)
                if not sharing:  # no other watched path of that inode: the watch goes
                    self._paths.pop(wd, None)
                    libc.inotify_rm_watch(self._fd, wd)

    def watched(self) -> set[Path]:
        with self._lock:
            return set(self._wd)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            fd, self._fd = self._fd, -1
            self._paths.clear()
            self._wd.clear()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if fd >= 0:
            os.close(fd)

    # -- (under the lock) -------------------------------------------------------------------------------------
    def _open(self) -> bool:
        if self._fd >= 0:
            return True
        fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if fd < 0:
            self._refuse(None, ctypes.get_errno())
            return False
        self._fd = fd
        self._thread = threading.Thread(target=self._read, args=(fd,), name="file-watch", daemon=True)
        self._thread.start()
        return True

    def _refuse(self, path: Path | None, err: int) -> None:
        """A watch, or the instance, was refused: said once for a limit reached (every later file meets the same),
        each time otherwise (a file gone meanwhile, say); not at all once a limit was said."""
        if self._limit_said:
            return
        self._limit_said = err in LIMIT_ERRORS
        what = f"a watch on {path}" if path is not None else "an inotify instance"
        log.info("hard-linked files are left to the verification: %s was refused (%s)", what,
                 os.strerror(err) if err else "unknown error")  # fmt: skip

    # -- the reader thread ------------------------------------------------------------------------------------
    def _read(self, fd: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not self._closed:
            if not poller.poll(500):
                continue
            try:
                data = os.read(fd, 64 * 1024)
            except BlockingIOError:
                continue
            except OSError:
                return  # closed under us
            for path in self._changed(data):
                try:
                    self._sink(path)
                except Exception:  # the reader's loop boundary: one failed hand-over must not end watching
                    log.exception("a change to the hard-linked file %s could not be handed over", path)

    def _changed(self, data: bytes) -> set[Path]:
        """The watched paths the events in `data` concern (every watched path, after the kernel's queue overflowed)."""
        found: set[Path] = set()
        at = 0
        with self._lock:
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
                at += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    found.update(self._wd)
                elif mask & IN_IGNORED:  # the inode went (its last link removed) or the watch was removed
                    for path in self._paths.pop(wd, set()):
                        self._wd.pop(path, None)
                else:
                    found.update(self._paths.get(wd, ()))
        return found
