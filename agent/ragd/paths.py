"""Where a path stands among the roots: the one place that answers "is this under that" for the agent."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath


def is_under(path: PurePath, top: PurePath) -> bool:
    """`path` is `top` or lies below it (by path components: `/a/bc` is not under `/a/b`). By the components' tuples,
    which pathlib keeps: `top in path.parents` made a path object of each parent, and a big folder's job asked this
    three times a file (whether its root was removed meanwhile)."""
    parts, top_parts = path.parts, top.parts
    n = len(top_parts)
    if n == 0:  # "." (relative): every relative path is under it, no absolute one
        return not path.is_absolute()
    return len(parts) >= n and parts[:n] == top_parts


def under_any(path: PurePath, tops: Iterable[PurePath]) -> bool:
    return any(is_under(path, t) for t in tops)


def root_problem(root: Path) -> str | None:
    """Why `root` cannot be a root now ("does not exist", "is not a directory", "cannot be reached: permission
    denied" when a folder above it may not be entered, ...), or None: it is a directory. Never raises (pathlib's
    `is_dir` raises PermissionError under a closed folder)."""
    try:
        st = os.stat(root)
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as err:
        if err.errno == errno.EACCES:
            return "cannot be reached: permission denied"
        return f"cannot be reached: {(err.strerror or str(err)).lower()}"
    return None if stat.S_ISDIR(st.st_mode) else "is not a directory"


def dropped(path: Path, top: Path, keep: Iterable[Path]) -> bool:
    """`path` leaves with the subtree `top`: it is under `top` and under none of `keep` (nested roots that stay)."""
    return is_under(path, top) and not under_any(path, keep)


def outermost(roots: Sequence[Path]) -> list[Path]:
    """The roots that lie under no other root, in their order (a nested root's files are already theirs)."""
    return [r for r in roots if not any(o != r and is_under(r, o) for o in roots)]


def root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    """The outermost root holding `path` (None: under no root). Outermost, so that adding or removing a nested
    root never changes which root a file belongs to."""
    for r in outermost(roots):
        if is_under(path, r):
            return r
    return None


def overlaps(root: Path, roots: Sequence[Path]) -> list[str]:
    """Notes on how `root` nests with the other roots ("inside the root /a", "contains the root /a/b")."""
    notes = [f"{root} is inside the root {r}; its files are already indexed" for r in roots
             if r != root and is_under(root, r)]  # fmt: skip
    notes += [f"{root} contains the root {r}" for r in roots if r != root and is_under(r, root)]
    return notes


@dataclass(frozen=True)
class Within:
    """Part of the roots a caller asks about (`wait PATH ...`): folders with everything below them (`trees`), and
    single folders (`folders`: those holding the files named, whose entries live there)."""

    trees: tuple[Path, ...] = ()
    folders: tuple[Path, ...] = ()

    @classmethod
    def of(cls, paths: Iterable[Path]) -> Within:
        """A real folder stands for its subtree; a file, a symbolic link (its entry is its own, beside it, and a
        linked folder is not descended) or a path that is gone (its parent's job records that) for its folder."""
        paths = list(paths)
        trees = tuple(p for p in paths if p.is_dir() and not p.is_symlink())
        return cls(trees, tuple(p.parent for p in paths if p not in trees))

    def covers(self, directory: PurePath) -> bool:
        """Work on `directory` is work on this part."""
        return directory in self.folders or under_any(directory, self.trees)

    def touches(self, top: PurePath) -> bool:
        """A walk of `top` (a root) may find directories of this part."""
        return any(is_under(p, top) or is_under(top, p) for p in (*self.trees, *self.folders))
