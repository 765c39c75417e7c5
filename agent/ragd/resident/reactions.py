"""The agent's reactions to what it sees: `Reactions`.

A watch event queues its folder (after the debounce) and the folders of the other paths to the same file, hands a
change note to the index writer, forgets a folder that went, or walks a tree again; a rescan walks the roots in a
thread and queues a job for every directory, as a phase whose end has the index verified.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from ..index.write.writer import EDITING_S
from ..paths import root_of
from ..pipeline.mushroom import writer_pid
from ..pipeline.scan import walk_dirs
from .jobrunner import JobRunner
from .watchevents import WatchEvent

# the agent's log: its lines keep the name they have always had (docs/operations.md quotes them)
log = logging.getLogger("ragd.resident.agent")


class Reactions(JobRunner):
    """What a watch event, a rescan, a phase's end and the verification's findings set going."""

    def on_watch_event(self, ev: WatchEvent) -> None:
        self.last_event = time.monotonic()
        if ev.kind == "mushroom":
            if ev.path is not None and writer_pid(ev.path.name) != os.getpid():
                self.indexer.put_mushroom(ev.path)
        elif ev.kind == "rescan":
            self.rescan([ev.directory], "rescan")
        elif ev.kind == "gone":
            for link in self.links.into(ev.directory):  # links into it, in other folders, dangle now
                if root_of(link.parent, self.roots):
                    self.debouncer.touch(link.parent)
            self._note_gone(ev.directory)
            self.tracker.forget(ev.directory)
            self.links.forget(ev.directory)
            self.scheduler.discard_under(ev.directory)
            self.debouncer.discard_under(ev.directory)
            # (os.path.isdir: False where the parent may not be read, in a folder made unreadable; pathlib raised)
            if os.path.isdir(ev.directory.parent) and root_of(ev.directory.parent, self.roots):
                self.debouncer.touch(ev.directory.parent)
        elif ev.kind == "subtree":  # folder defaults changed: the files they label, here and below
            if root_of(ev.directory, self.roots):
                for d in walk_dirs(ev.directory, self.ignore):
                    self.debouncer.touch(d)
        elif root := root_of(ev.directory, self.roots):
            self._event_in[root] = self.last_event
            self.debouncer.touch(ev.directory)
            if ev.path is not None:
                self._touch_links(ev.path)
            self.parsers.keep_one_free(EDITING_S)  # for the edited files, during an initial index
            self.embed.warm()

    def _redo(self, directory: Path, names: list[str]) -> None:
        """The verification found these files changed though no event said so: their folder's job runs again."""
        for name in names:
            log.info("%s changed since its entry was written, unseen by the watcher; indexing it again",
                     directory / name)  # fmt: skip
        self.scheduler.enqueue([directory], urgent=True)

    def _touch_links(self, path: Path) -> None:
        """The folders of the other paths to the file that changed (hard links, symbolic links to it): inotify
        reported the write on one path only."""
        for other in self.links.others(path):
            if root_of(other.parent, self.roots):
                self.debouncer.touch(other.parent)

    def _schedule_loop(self) -> None:
        while True:
            due = self.debouncer.wait_due(timeout=0.5)
            if self.state in ("stopping", "stopped"):
                return
            if due:
                self.scheduler.enqueue([d for d, _ in due], express=True, seen=dict(due))

    def rescan(self, roots: list[Path], phase: str = "rescan", *, urgent: bool = False) -> None:
        """Walk the roots (stat only) in a thread and queue a job for every directory."""
        with self._lock:
            self._rescans += 1
            self._walking.extend(roots)
            if self.tracker.progress.phase is None:
                self.tracker.start_phase(phase)
        threading.Thread(target=self._walk, args=(roots, urgent), name="rescan", daemon=True).start()

    def _walk(self, roots: list[Path], urgent: bool) -> None:
        try:
            dirs = [d for root in roots if os.path.isdir(root) for d in walk_dirs(root, self.ignore)]
            self.indexer.call(
                lambda s: s.apply_pending(dirs)
            )  # notes left by a stopped agent or another tool
            self.tracker.add_to_phase(dirs)
            self.scheduler.enqueue(dirs, urgent=urgent)
        except OSError as err:
            log.error("rescan of %s failed: %s", ", ".join(map(str, roots)), err)
        finally:
            with self._lock:
                self._rescans -= 1
                for root in roots:
                    self._walking.remove(root)

    def run_dirs(self, dirs: list[Path], phase: str, *, force: bool = False) -> None:
        """Run these directories' jobs now, as a phase: when they are done, the index is verified. `force`: their
        files are re-processed even when unchanged."""
        if force:
            self.force_next(dirs)
        with self._lock:
            if self.tracker.progress.phase is None:
                self.tracker.start_phase(phase)
            self.tracker.add_to_phase(dirs)
        self.scheduler.enqueue(dirs, urgent=True)

    def check_phase(self) -> None:
        """End a rescan phase once its jobs are done; then have the index verified against every root."""
        with self._lock:
            if self.tracker.progress.phase is None or self._rescans or self.scheduler.busy():
                return
            self.tracker.end_phase()
            # requested before the phase's end can be seen: between the two, `wait` would find the agent idle
            # and return before its first verification (the cache's save takes a while on a big tree)
            self.verifier.request("rescan")
        self.stat_cache.save()

    def dir_busy(self, directory: Path) -> bool:
        """Work on `directory` is under way or due: its index entries may lag its sidecars for now."""
        return self.scheduler.has(directory) or self.debouncer.is_pending(directory)
