"""Which tracked paths share their content with other paths (DESIGN §4.1): symbolic and hard links.

A file reached by several paths (a symbolic link to a file under a root, a file hard-linked into two folders or
roots) is indexed once per path, but the watcher reports a write on one path only: the one it was made through
(inotify watches directories, and a write through a symbolic link is reported on its target's folder). So the agent
keeps, from its directory jobs' listings, which paths lead to which file, and queues the folders of the other paths
when one of them changes, within the same debounce as the change itself.

Only the paths that share are kept: symbolic links (by the real path of their target) and files with more than one
hard link (by device and inode). A tree of ordinary files costs nothing here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ..paths import is_under
from ..pipeline.scan import Shared

Inode = tuple[int, int]
K = TypeVar("K")
MAX_HOPS = 64  # links of links of hard links...: the paths reached from one change, at most


class LinkMap:
    def __init__(self, on_hard_links: Callable[[set[Path], set[Path]], None] | None = None) -> None:
        """`on_hard_links(added, removed)`: the hard-linked paths known changed (filewatch.py watches them)."""
        self._on_hard_links = on_hard_links
        self._lock = threading.Lock()
        self._by_dir: dict[Path, tuple[Shared, ...]] = {}  # only directories that hold links
        self._inodes: dict[Inode, set[Path]] = {}  # hard-linked files: (device, inode) -> their paths
        self._targets: dict[str, set[Path]] = {}  # the real path of a file -> the symbolic links to it
        self._recorded: dict[Path, Inode] = {}  # hard-linked file -> its (device, inode) when last listed

    def record(self, directory: Path, shared: tuple[Shared, ...]) -> None:
        """What a job's listing of `directory` found (replaces what the previous listing found)."""
        with self._lock:
            before = set(self._recorded)
            self._drop(directory)
            self._by_dir[directory] = shared
            for s in shared:
                path = directory / s.name
                if s.target is not None:
                    self._targets.setdefault(s.target, set()).add(path)
                if s.inode is not None:
                    self._inodes.setdefault(s.inode, set()).add(path)
                    self._recorded[path] = s.inode
            if not shared:
                self._by_dir.pop(directory)
            after = set(self._recorded)
        self._hard_links_changed(before, after)

    def forget(self, top: Path, keep: Sequence[Path] = ()) -> None:
        """`top` and everything below it left the tree (deleted, moved away, its root removed), except what is
        under `keep` (the roots nested in a root removed, which stay)."""
        with self._lock:
            before = set(self._recorded)
            for d in [d for d in self._by_dir if is_under(d, top) and not any(is_under(d, k) for k in keep)]:
                self._drop(d)
            after = set(self._recorded)
        self._hard_links_changed(before, after)

    def _hard_links_changed(self, before: set[Path], after: set[Path]) -> None:
        if self._on_hard_links is not None and before != after:
            self._on_hard_links(after - before, before - after)

    def symlink_dirs(self) -> list[Path]:
        """The directories that hold symbolic links (to be judged again when the roots change)."""
        with self._lock:
            return [d for d, shared in self._by_dir.items() if any(s.target is not None for s in shared)]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._by_dir.values())

    def others(self, path: Path) -> set[Path]:
        """The other tracked paths whose content a change to `path` changes: hard links to the same file, symbolic
        links to it, and so on transitively. Costs nothing while no link is known; else a stat and a realpath."""
        with self._lock:
            if not self._by_dir:
                return set()
        found: set[Path] = set()
        todo = [path]
        while todo and len(found) < MAX_HOPS:
            for other in self._sharing(todo.pop()):
                if other != path and other not in found:
                    found.add(other)
                    todo.append(other)
        return found

    def into(self, top: Path) -> set[Path]:
        """The symbolic links whose targets were at or below the folder `top`, which went (moved out of the roots or
        elsewhere): the watcher reported the folder only, not a change for each file in it, and the links now dangle
        or lead somewhere else."""
        real = Path(os.path.realpath(top))
        with self._lock:
            return {
                link
                for target, links in self._targets.items()
                if is_under(Path(target), real)
                for link in links
            }

    def _sharing(self, path: Path) -> set[Path]:
        real = os.path.realpath(path)
        with self._lock:
            recorded, hard_links = self._recorded.get(path), bool(self._inodes)
        inodes = {k for k in (recorded, _inode(path) if hard_links else None) if k is not None}
        with self._lock:
            out = set(self._targets.get(real, ()))
            for key in inodes:
                out |= self._inodes.get(key, set())
        return out

    def _drop(self, directory: Path) -> None:
        for s in self._by_dir.pop(directory, ()):
            path = directory / s.name
            if s.target is not None:
                _discard(self._targets, s.target, path)
            if s.inode is not None:
                _discard(self._inodes, s.inode, path)
                self._recorded.pop(path, None)


def _inode(path: Path) -> Inode | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # gone, or unreadable: its recorded inode (if any) stands
    return (st.st_dev, st.st_ino)


def _discard(index: dict[K, set[Path]], key: K, path: Path) -> None:
    paths = index.get(key)
    if paths is not None:
        paths.discard(path)
        if not paths:
            del index[key]
