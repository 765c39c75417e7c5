"""What inotify grants this user: whether one more watch can be had now (`inotify_watch_available`, probed with a
separate inotify instance), which inodes this process watches (`watched_inodes`, from /proc/self/fdinfo), and what to
tell the user when a limit is reached (`inotify_hint`). The watcher (watcher.py) uses them to find the roots whose
directories inotify no longer covers; filewatch.py shares the calls into libc and the limits' errnos.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from pathlib import Path

MAX_USER_WATCHES = Path("/proc/sys/fs/inotify/max_user_watches")
_IN_ATTRIB, _IN_ONLYDIR, _IN_DONT_FOLLOW = 0x4, 0x01000000, 0x02000000
# the errnos of a limit reached (watches, instances, open files, kernel memory), as against a path's own failure
LIMIT_ERRORS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.ENOMEM})
libc = ctypes.CDLL(None, use_errno=True)  # inotify_init1, inotify_add_watch, inotify_rm_watch
_FDINFO_WATCH = re.compile(r"^inotify wd:\S+ ino:([0-9a-f]+) ", re.MULTILINE)


def inotify_watch_available(path: Path) -> bool:
    """Whether the kernel grants this user one more inotify watch right now (probed on the directory `path` with a
    separate inotify instance, removed at once). False when the watch limit (max_user_watches) or the instance limit
    is exhausted; other failures (missing or unreadable path) raise OSError."""
    fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0:
        return _refused("inotify_init1", path)
    try:
        wd = libc.inotify_add_watch(fd, os.fsencode(path), _IN_ATTRIB | _IN_ONLYDIR | _IN_DONT_FOLLOW)
        if wd < 0:
            return _refused("inotify_add_watch", path)
        libc.inotify_rm_watch(fd, wd)
        return True
    finally:
        os.close(fd)


def _refused(call: str, path: Path) -> bool:
    """False for a resource limit (the errno of the failed call), OSError for anything else."""
    err = ctypes.get_errno()
    if err in LIMIT_ERRORS:
        return False
    raise OSError(err, f"{call}: {os.strerror(err)}", str(path))


def watched_inodes() -> set[int] | None:
    """Inode numbers watched by the inotify instances of this process (from /proc/self/fdinfo); None if unknown."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    inodes: set[int] = set()
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            text = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue  # closed meanwhile
        inodes.update(int(m[1], 16) for m in _FDINFO_WATCH.finditer(text))
    return inodes


def inotify_hint(err: int | None) -> str:
    if err == errno.EMFILE:
        return "the inotify instance limit (/proc/sys/fs/inotify/max_user_instances) or the open-file limit is reached"
    if err != errno.ENOSPC:
        return "the file system may not support inotify"
    try:
        current = int(MAX_USER_WATCHES.read_text())
    except (OSError, ValueError):
        current = 0
    return (
        f"the per-user inotify watch limit is exhausted ({MAX_USER_WATCHES} = {current or 'unknown'}); "
        f"raise it, e.g. `sudo sysctl fs.inotify.max_user_watches={max(524288, 2 * current)}` "
        "(persist it in /etc/sysctl.d/), then restart ragd for instant updates"
    )
