"""Names and permissions of what ragd writes beside the documents.

- Only names that are valid UTF-8 are ever recorded: sidecars and mushrooms are UTF-8 JSON. A name the OS hands over
  with undecodable bytes (Python decodes them with surrogateescape) is shown by its `display_name`.
- A sidecar holds its document's text, so it is never more readable than its source: ours to read and write, plus
  the source's read bits for the others, and for the group only when the sidecar's group is the source's. The
  `.rag/` folder likewise is never more open than the directory it describes (`.rag/tmp/` is 0700).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Protocol


def valid_name(name: str) -> bool:
    """Whether a name from the OS (decoded with surrogateescape) is valid UTF-8, so it can be recorded in JSON."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def display_name(name: str) -> str:
    """`name` with the bytes that are not UTF-8 shown as `\\xNN`: safe in JSON replies and logs."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


class Mode(Protocol):
    """What `restrict` and `private_mode` read of a path's stat: an `os.stat_result`, or what a job or a listing
    keeps of one."""

    @property
    def st_mode(self) -> int: ...

    @property
    def st_gid(self) -> int: ...


def private_mode(like: Mode, gid: int, *, directory: bool = False) -> int:
    """The permission bits a file (or directory) of ours in group `gid` may have so that it is never more readable
    than `like`: ours to read and write (and search), and `like`'s read (and search) bits for the others, and for the
    group only when it is the same group."""
    shared = stat.S_IMODE(like.st_mode) & (0o055 if directory else 0o044)
    if gid != like.st_gid:
        shared &= 0o007
    return (0o700 if directory else 0o600) | shared


def restrict(path: Path | str, like: Mode, current: Mode | None = None) -> bool:
    """Narrow the mode of an existing file or directory to `private_mode` (never widens; the special bits such as a
    directory's setgid stay). True if it changed. `current`: the path's stat, when the caller has just taken it."""
    st = os.stat(path) if current is None else current
    mode = stat.S_IMODE(st.st_mode)
    narrowed = mode & (private_mode(like, st.st_gid, directory=stat.S_ISDIR(st.st_mode)) | 0o7000)
    if narrowed == mode:
        return False
    os.chmod(path, narrowed)
    return True


def create(path: Path, mode: int, like: os.stat_result | None = None) -> int:
    """A new file at `path` for writing (a stale one of that name is replaced): with `mode` less the umask, or,
    with `like`, never more readable than `like` (its mode is set on the descriptor, before anyone can open it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    if like is not None:
        mode = private_mode(like, like.st_gid)
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        path.unlink()
        fd = os.open(path, flags, mode)
    if like is not None:
        st = os.fstat(fd)  # its group may not be the source's (a setgid directory, another primary group)
        allowed = private_mode(like, st.st_gid)
        if stat.S_IMODE(st.st_mode) & ~allowed:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & allowed)
    return fd
