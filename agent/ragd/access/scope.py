"""What one answer may show its caller: the files and directories that caller can read, decided at answer time.

A file is readable when the caller has read permission on it and search (x) permission on every directory above
it, both along the path as named and along its real path (symlinks resolved): what opening it as that user would
need. A directory can be entered with x on it and its parents, and listed with r as well. A path that no longer
exists (a removed file, an orphan) is visible when its directory can be listed: its name was there to see.

Nothing is cached between answers, so a chmod takes effect with the next answer; within one answer each
directory is checked once. An unrestricted caller's scope answers yes at once, without a system call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from ragctl import protocol as p

from ..errors import RagdError
from . import perms
from .caller import Caller, current

T = TypeVar("T")
PathLike = str | Path


class NotReadable(RagdError):
    """A scoped caller named a path it may not read (or one that does not exist: the answer is the same)."""

    code = p.NOT_FOUND


class Scope:
    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self._bits: dict[tuple[str, int], bool] = {}
        self._reach: dict[str, bool] = {}

    @property
    def full(self) -> bool:
        return self.caller.full

    # -- questions ------------------------------------------------------------------------------------------------
    def readable(self, path: PathLike) -> bool:
        """The caller can open the file `path` for reading."""
        if self.full:
            return True
        lexical = os.path.abspath(path)
        real = os.path.realpath(lexical)
        return self._reached(os.path.dirname(lexical)) and self._reached(os.path.dirname(real)) \
            and self._allowed(real, perms.R)  # fmt: skip

    def enterable(self, path: PathLike) -> bool:
        """The caller can pass through the directory `path` (x on it and on every directory above it)."""
        if self.full:
            return True
        lexical = os.path.abspath(path)
        return self._reached(lexical) and self._reached(os.path.realpath(lexical))

    def listable(self, path: PathLike) -> bool:
        """The caller can list the directory `path` (r and x on it, x on every directory above it)."""
        return self.full or (self.enterable(path) and self._allowed(os.path.realpath(path), perms.R))

    def visible(self, path: PathLike) -> bool:
        """A file the caller can read, a directory it can enter, or a path gone from a directory it can list."""
        if self.full:
            return True
        if os.path.isdir(path):
            return self.enterable(path)
        if os.path.lexists(path):
            return self.readable(path)
        return self.listable(os.path.dirname(os.path.abspath(path)))

    # -- applying them --------------------------------------------------------------------------------------------
    def keep(self, items: Iterable[T], path_of: Callable[[T], PathLike], *, gone_ok: bool = False) -> list[T]:
        """The items whose path the caller may see: readable (`gone_ok`: or gone from a listable directory)."""
        if self.full:
            return list(items)
        check = self.visible if gone_ok else self.readable
        return [item for item in items if check(path_of(item))]

    def check_readable(self, path: PathLike) -> None:
        """Raise NotReadable unless the caller can read `path`."""
        if not self.readable(path):
            raise self._refused(path)

    def check_visible(self, path: PathLike) -> None:
        """Raise NotReadable unless `path` is visible to the caller (see `visible`)."""
        if not self.visible(path):
            raise self._refused(path)

    def _refused(self, path: PathLike) -> NotReadable:
        return NotReadable(f"path refused: {path} is not readable by {self.caller.describe()}",
                           "ragd answers only with files you can read yourself; ask the file's owner for access")  # fmt: skip

    # -- the checks -------------------------------------------------------------------------------------------
    def _reached(self, directory: str) -> bool:
        """x on `directory` and on every directory above it."""
        known = self._reach.get(directory)
        if known is None:
            parent = os.path.dirname(directory)
            known = (parent == directory or self._reached(parent)) and self._allowed(directory, perms.X)
            self._reach[directory] = known
        return known

    def _allowed(self, path: str, want: int) -> bool:
        key = (path, want)
        known = self._bits.get(key)
        if known is None:
            try:
                st = os.stat(path)
                acl = perms.read_acl(path) if self.caller.uid not in (None, st.st_uid) else None
            except OSError:
                known = False  # gone, or the agent itself cannot see it: nothing to show
            else:
                known = perms.allows(self.caller, st, acl, want)
            self._bits[key] = known
        return known


def scope(caller: Caller | None = None) -> Scope:
    """A fresh scope for one answer, of `caller` (default: the current request's caller)."""
    return Scope(caller if caller is not None else current())
