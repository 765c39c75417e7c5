"""File operations of an installation: atomic writes and link switches, all below DESTDIR when one is set.

A `Writer` takes final paths (as the installed system sees them), writes to `layout.real(path)`, and remembers
the directories it had to create, so that uninstall removes them again when they are empty.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from .layout import Layout


class Writer:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.created_dirs: list[Path] = []

    def mkdirs(self, path: Path, mode: int = 0o755) -> None:
        """Create `path` and its missing parents with `mode` (existing ones are left as they are)."""
        missing: list[Path] = []
        for p in [path, *path.parents]:
            if self.layout.real(p).is_dir():
                break
            missing.append(p)
        for p in reversed(missing):
            real = self.layout.real(p)
            real.mkdir(mode=mode)
            os.chmod(real, mode)  # not left to the umask
            if p != Path(p.anchor):  # DESTDIR itself is the caller's
                self.created_dirs.append(p)

    def write_text(self, path: Path, text: str, mode: int) -> None:
        """Atomically: a temporary file beside the target, fsync'ed, chmod'ed, then renamed over it."""
        self.mkdirs(path.parent)
        real = self.layout.real(path)
        tmp = real.with_name(f".{real.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                os.fchmod(f.fileno(), mode)
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, real)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise

    def symlink(self, path: Path, target: Path | str) -> None:
        """Point `path` at `target`, replacing an existing link in one rename (never a moment without it)."""
        self.mkdirs(path.parent)
        real = self.layout.real(path)
        tmp = real.with_name(f".{real.name}.{os.getpid()}.lnk")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.symlink(target, tmp)
        os.replace(tmp, real)


def remove_tree(path: Path) -> bool:
    """Remove a directory tree or a file or link; False when there was nothing."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return True
    if path.is_dir():
        shutil.rmtree(path)
        return True
    return False


def link_points_into(link: Path, directory: Path) -> bool:
    """Whether `link` is a symlink whose target lies under `directory` (both as final paths)."""
    if not link.is_symlink():
        return False
    target = Path(os.readlink(link))
    return target == directory or directory in target.parents
