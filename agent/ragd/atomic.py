"""One way to replace a file whole: the agent's every small state file and sidecar is written by `atomic_write`
(bytes), and a file that a library writes at a path (SQLite) by `atomic_make`.

The bytes go to a temporary file beside the target (or in a folder of temporaries on the same file system), are
flushed to disk, and the temporary file is renamed over the target, so a reader sees the old file or the new one,
never a part; the folder is then flushed too, so that the rename itself survives a power cut. A failure removes the
temporary file and raises the OSError: each caller says what the failure costs.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

Create = Callable[[Path], int]  # opens the temporary file for writing, with the mode the caller wants: its fd


def atomic_write(
    path: Path,
    data: bytes,
    *,
    tmp: Path | None = None,
    mode: int = 0o600,
    create: Create | None = None,
    sync_folder: bool = True,
) -> Path:
    """Replace `path` with `data`. `tmp`: where the temporary file goes (default: beside `path`, hidden); `create`:
    how it is opened (default: a new file with `mode` less the umask); `sync_folder=False` leaves the rename to the
    file system's next flush (for files that something else on disk announces, and that are made again if lost)."""
    tmp = tmp or path.with_name(f".{path.name}.{os.getpid()}.{threading.get_native_id()}.tmp")

    def write(at: Path) -> None:
        fd = create(at) if create else os.open(at, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    return _replace(path, tmp, write, sync_folder)


def atomic_make(path: Path, make: Callable[[Path], object], *, tmp: Path, sync_folder: bool = True) -> Path:
    """Replace `path` with the file `make(tmp)` writes at the temporary path `tmp`, for a writer that needs a path
    rather than bytes (SQLite); it is flushed to disk before the rename, as `atomic_write`'s bytes are."""

    def made(at: Path) -> None:
        make(at)
        fd = os.open(at, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    return _replace(path, tmp, made, sync_folder)


def _replace(path: Path, tmp: Path, write: Callable[[Path], None], sync_folder: bool) -> Path:
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync_folder:
        sync_dir(path.parent)
    return path


def sync_dir(directory: Path) -> None:
    """Flush `directory`'s entries (a rename or a new name in it) to disk; a file system that cannot is let be."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
