"""What the watcher reports, and how a watchdog event becomes it: `WatchEvent` and `Translator`.

One watchdog event of one root becomes `WatchEvent`s for the agent, the ignore rules applied: "dirty" for a
directory whose listing or files changed, "gone" for a directory that left the tree, "mushroom" for a change note
another producer dropped into a `.rag/` folder, "subtree" for a directory whose folder defaults (`.ragd-meta.toml`, a
dot-file otherwise ignored) changed, so that it and every directory below it is looked at again; "rescan" (a root
whose events were lost) comes from the watcher itself (watcher.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from watchdog import events as wde

from ..pipeline.folder_meta import FOLDER_FILE
from ..pipeline.mushroom import SUFFIX as MUSHROOM_SUFFIX
from ..pipeline.mushroom import pending as pending_notes
from ..pipeline.scan import Ignore
from ..pipeline.sidecar import RAG_DIR

DIRTY, RESCAN, MUSHROOM, GONE, SUBTREE = "dirty", "rescan", "mushroom", "gone", "subtree"


@dataclass(frozen=True)
class WatchEvent:
    """What the agent learns from the file system."""

    directory: Path  # needs a job (dirty), left the tree (gone), holds the .rag (mushroom), the root (rescan)
    kind: str  # "dirty" | "rescan" | "mushroom" | "gone" | "subtree"
    path: Path | None = (
        None  # the mushroom file, for kind="mushroom"; the file that changed, for a "dirty" one
    )


class Translator:
    """Turns one watchdog event of one root into WatchEvents, applying the ignore rules."""

    def __init__(self, root: Path, ignore: Ignore, *, polling: bool) -> None:
        self.root, self.ignore, self.polling = root, ignore, polling

    def __call__(self, event: wde.FileSystemEvent) -> list[WatchEvent]:
        src, dest = _as_path(event.src_path), _as_path(event.dest_path)
        kind = event.event_type
        if event.is_synthetic and kind == "created":  # what a folder moved in holds
            return self._arrived_with(src, directory=event.is_directory)
        if event.is_synthetic and kind == "moved" and not event.is_directory:
            return []  # a file of a folder moved within the root (`_arrived_with`)
        if event.is_directory:
            if kind == "created":
                return self._dir_arrived(src)
            if kind == "deleted":
                return self._dir_left(src)
            if kind == "moved":
                return self._dir_left(src) + self._dir_arrived(dest)
            if kind == "attrib" and src is not None and self._tracked_dir(src):
                # its permissions may have changed: its job says what that means
                return [WatchEvent(src, DIRTY)]
            return []  # modified: its file events say what changed
        if kind in ("modified", "attrib", "deleted") or (kind == "created" and not self.polling):
            return self._file_changed(src)  # an inotify IN_CREATE: the mushroom is reported once closed
        if kind in ("closed", "created"):
            return self._mushroom(src) or self._file_changed(src)
        if kind == "moved":
            return self._file_changed(src) + (self._mushroom(dest) or self._file_changed(dest))
        return []  # opened / closed_no_write: reading never triggers work

    def _tracked_dir(self, d: Path) -> bool:
        """`d` is the root or below it with no ignored directory (dot-dir, skip_dirs, .rag) on the way."""
        try:
            rel = d.relative_to(self.root)
        except ValueError:
            return False
        return not any(self.ignore.dir(part) for part in rel.parts)

    def _file_changed(self, p: Path | None) -> list[WatchEvent]:
        if p is not None and p.name == FOLDER_FILE and self._tracked_dir(p.parent):
            return [WatchEvent(p.parent, SUBTREE)]  # its defaults label the files of the folder and below
        if p is None or self.ignore.file(p.name) or not self._tracked_dir(p.parent):
            return []
        return [WatchEvent(p.parent, DIRTY, p)]

    def _reported_by_parent(self, d: Path) -> list[WatchEvent]:
        """An untracked directory whose name is not valid UTF-8 (not one the rules ignore): its parent's job reports
        it SKIPPED, or withdraws that when it leaves, so the parent is told."""
        if self.ignore.dir_rule(d.name) or d == self.root or not self._tracked_dir(d.parent):
            return []
        return [WatchEvent(d.parent, DIRTY)]

    def _mushroom(self, p: Path | None) -> list[WatchEvent]:
        if p is None or not p.name.endswith(MUSHROOM_SUFFIX) or p.parent.name != RAG_DIR:
            return []
        tracked = p.parent.parent
        return [WatchEvent(tracked, MUSHROOM, p)] if self._tracked_dir(tracked) else []

    def _dir_arrived(self, d: Path | None) -> list[WatchEvent]:
        if d is None or d == self.root:
            return []
        if d.name == RAG_DIR and self._tracked_dir(d.parent):
            # a .rag folder that arrived whole (a new folder written before its watch was added, or one moved in):
            # the notes already in it came without events of their own
            return [WatchEvent(d.parent, MUSHROOM, note) for note in pending_notes(d.parent)]
        if not self._tracked_dir(d):
            return self._reported_by_parent(d)
        return [WatchEvent(d.parent, DIRTY), WatchEvent(d, DIRTY)]

    def _arrived_with(self, p: Path | None, *, directory: bool) -> list[WatchEvent]:
        """What watchdog says was in a folder moved in from outside, a "created" event for each file and folder in
        it (`is_synthetic`): nothing the folder's own arrival does not bring, whose job lists it whole and queues
        its folders, but the notes in a `.rag/` that came with it. As "dirty" events, the files' came to the
        debouncer during the folder's job, when they were many, and ran it once more after (a 100,000-note folder
        moved in: its second job read every entry again, the agent's peak; docs/benchmarks/history.md).

        Of a folder moved *within* a root, watchdog reports a "moved" event for each file and folder in it: those
        of its folders are kept (they queue the moved folder's subfolders at once, which the verification leaves
        alone as work in progress, and a `.rag/` among them brings its notes), those of its files are dropped
        (`__call__`): each made two "dirty" events taken for edits (a 30,000-note folder renamed: 60,000, while
        watchdog's queue of them held ~20 MiB at the rename's peak), and the folder's own arrival brings them."""
        if directory and p is not None and p.name == RAG_DIR and self._tracked_dir(p.parent):
            return self._dir_arrived(p)
        return []

    def _dir_left(self, d: Path | None) -> list[WatchEvent]:
        if d is None:
            return []
        if not self._tracked_dir(d):
            return self._reported_by_parent(d)
        parent = [] if d == self.root else [WatchEvent(d.parent, DIRTY)]
        return [WatchEvent(d, GONE), *parent]


def _as_path(p: str | bytes) -> Path | None:
    return Path(os.fsdecode(p)) if p else None
