"""File-system watching (DESIGN §5): inotify through watchdog, polling where inotify cannot cover a root.

watchdog's events become `WatchEvent`s for the agent: "dirty" for a directory whose listing or files changed, "gone"
for a directory that left the tree, "mushroom" for a change note another producer dropped into a `.rag/` folder,
"subtree" for a directory whose folder defaults (`.ragd-meta.toml`, a dot-file otherwise ignored) changed, so that
it and every directory below it is looked at again, and "rescan" for a root whose events were lost. What watchdog does not report by itself is detected here:

- a queue overflow is only logged by watchdog: a handler on its logger turns the record into a rescan;
- the per-user watch limit fails silently for subdirectories: `check_coverage()` probes the limit with a separate
  inotify instance and, when it is exhausted, compares the directories of each root with the inodes this process
  watches (/proc/self/fdinfo); a root with unwatched directories is switched to polling and rescanned;
- a directory moved out of a root stays watched under its old path: events below a path reported gone are dropped
  while that path does not exist.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from watchdog import events as wde
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver
from watchdog.utils import UnsupportedLibcError

from ..paths import is_under
from ..pipeline.folder_meta import FOLDER_FILE
from ..pipeline.mushroom import SUFFIX as MUSHROOM_SUFFIX
from ..pipeline.mushroom import pending as pending_notes
from ..pipeline.scan import Ignore, walk_dirs
from ..pipeline.sidecar import RAG_DIR

log = logging.getLogger(__name__)

DIRTY, RESCAN, MUSHROOM, GONE, SUBTREE = "dirty", "rescan", "mushroom", "gone", "subtree"
INOTIFY, POLLING = "inotify", "polling"
WATCHDOG_INOTIFY_LOGGER = "watchdog.observers.inotify_c"
# watchdog 7.x logs "Inotify queue overflowed; filesystem events were lost" (a warning) on this logger, once
OVERFLOW_MESSAGE = "Inotify queue overflowed"
MAX_USER_WATCHES = Path("/proc/sys/fs/inotify/max_user_watches")
GONE_MEMORY = 4096  # directories remembered as gone (oldest forgotten first)
# The events that can mean work. watchdog derives the inotify mask from them, so opening, reading and closing a file
# unwritten (the agent reads every file it indexes) never even reaches the event queue.
EVENT_FILTER: list[type[wde.FileSystemEvent]] = [
    *(wde.FileCreatedEvent, wde.FileModifiedEvent, wde.FileAttribEvent, wde.FileClosedEvent),
    *(wde.FileDeletedEvent, wde.FileMovedEvent, wde.DirCreatedEvent, wde.DirDeletedEvent, wde.DirMovedEvent),
    wde.DirAttribEvent,  # a chmod: a folder the agent can no longer read, or can again
]


@dataclass(frozen=True)
class WatchEvent:
    """What the agent learns from the file system."""

    directory: Path  # needs a job (dirty), left the tree (gone), holds the .rag (mushroom), the root (rescan)
    kind: str  # "dirty" | "rescan" | "mushroom" | "gone" | "subtree"
    path: Path | None = (
        None  # the mushroom file, for kind="mushroom"; the file that changed, for a "dirty" one
    )


# -- the inotify limit probe ----------------------------------------------------------------------------------------
_IN_ATTRIB, _IN_ONLYDIR, _IN_DONT_FOLLOW = 0x4, 0x01000000, 0x02000000
_LIMIT_ERRORS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.ENOMEM})
_libc = ctypes.CDLL(None, use_errno=True)
_FDINFO_WATCH = re.compile(r"^inotify wd:\S+ ino:([0-9a-f]+) ", re.MULTILINE)


def inotify_watch_available(path: Path) -> bool:
    """Whether the kernel grants this user one more inotify watch right now (probed on the directory `path` with a
    separate inotify instance, removed at once). False when the watch limit (max_user_watches) or the instance limit
    is exhausted; other failures (missing or unreadable path) raise OSError."""
    fd = _libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0:
        return _refused("inotify_init1", path)
    try:
        wd = _libc.inotify_add_watch(fd, os.fsencode(path), _IN_ATTRIB | _IN_ONLYDIR | _IN_DONT_FOLLOW)
        if wd < 0:
            return _refused("inotify_add_watch", path)
        _libc.inotify_rm_watch(fd, wd)
        return True
    finally:
        os.close(fd)


def _refused(call: str, path: Path) -> bool:
    """False for a resource limit (the errno of the failed call), OSError for anything else."""
    err = ctypes.get_errno()
    if err in _LIMIT_ERRORS:
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


def _inotify_hint(err: int | None) -> str:
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


# -- event translation ----------------------------------------------------------------------------------------------
class _Translator:
    """Turns one watchdog event of one root into WatchEvents, applying the ignore rules."""

    def __init__(self, root: Path, ignore: Ignore, *, polling: bool) -> None:
        self.root, self.ignore, self.polling = root, ignore, polling

    def __call__(self, event: wde.FileSystemEvent) -> list[WatchEvent]:
        src, dest = _as_path(event.src_path), _as_path(event.dest_path)
        kind = event.event_type
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

    def _dir_left(self, d: Path | None) -> list[WatchEvent]:
        if d is None:
            return []
        if not self._tracked_dir(d):
            return self._reported_by_parent(d)
        parent = [] if d == self.root else [WatchEvent(d.parent, DIRTY)]
        return [WatchEvent(d, GONE), *parent]


def _as_path(p: str | bytes) -> Path | None:
    return Path(os.fsdecode(p)) if p else None


class _Handler(wde.FileSystemEventHandler):
    """watchdog's callback for one root; inactive once the root is removed or switched."""

    def __init__(self, watcher: Watcher, root: Path, ignore: Ignore, *, polling: bool) -> None:
        self.watcher = watcher
        self.translate = _Translator(root, ignore, polling=polling)
        self.active = True

    def dispatch(self, event: wde.FileSystemEvent) -> None:
        if not self.active:
            return
        try:
            for ev in self.translate(event):
                self.watcher._emit(ev)
        except Exception:  # the observer thread's loop boundary: one failed event must not end watching
            log.exception("watch event %r could not be handled", event)


class _OverflowHandler(logging.Handler):
    """watchdog only logs an inotify queue overflow: this handler on its logger reports it."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self._on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.getMessage().startswith(OVERFLOW_MESSAGE):
                self._on_overflow()
        except Exception:  # the logging convention: a handler reports its own failure, never raises
            self.handleError(record)


@dataclass
class _Root:
    path: Path
    mode: str
    poll_interval: float
    handler: _Handler
    observer: BaseObserver  # the shared inotify observer, or this root's own polling observer
    watch: ObservedWatch


# -- the watcher ----------------------------------------------------------------------------------------------------
class Watcher:
    """Watches roots recursively and reports `WatchEvent`s to `sink` (called from watchdog's threads)."""

    def __init__(self, ignore: Ignore, sink: Callable[[WatchEvent], None]) -> None:
        # watchdog warns when a new directory's watch is registered twice (its IN_CREATE raced the parent's walk)
        warnings.filterwarnings("ignore", r"Callback with id .* already exists", RuntimeWarning)
        self.ignore = ignore
        self._sink = sink
        self._lock = threading.RLock()
        self._roots: dict[Path, _Root] = {}
        self.fallbacks: dict[Path, str] = {}  # roots polled because inotify could not cover them, and why
        self._inotify: BaseObserver | None = None
        self._gone: dict[Path, None] = {}  # insertion-ordered set of directories reported gone
        self._gone_lock = threading.Lock()
        self._overflow = _OverflowHandler(self._on_overflow)
        self._logger = logging.getLogger(WATCHDOG_INOTIFY_LOGGER)
        self._logger_level: int | None = None
        self._install_overflow_handler()

    # -- roots ----------------------------------------------------------------------------------------------
    def add_root(self, root: Path, *, poll: bool = False, poll_interval: float = 5.0) -> str:
        """Watch `root` recursively; returns the mode, "inotify" or "polling" (asked for, or inotify unusable)."""
        with self._lock:
            if root not in self._roots:
                entry = None if poll else self._try_inotify(root, poll_interval)
                self._roots[root] = entry or self._start_polling(root, poll_interval)
                if entry is not None and self._lost([root]):
                    self._switch_to_polling(entry, "cannot have every directory watched by inotify")
            return self._roots[root].mode

    def remove_root(self, root: Path) -> None:
        with self._lock:
            entry = self._roots.pop(root, None)
            self.fallbacks.pop(root, None)
        if entry is not None:
            self._unschedule(entry)

    def mode(self, root: Path) -> str:
        """The root's mode, "inotify" or "polling"; "none" for a root that is not watched."""
        with self._lock:
            entry = self._roots.get(root)
            return entry.mode if entry is not None else "none"

    def check_coverage(self) -> list[Path]:
        """Roots whose inotify coverage is lost (watch limit): they are switched to polling and a "rescan" is
        emitted for each. Cheap while the limit is not reached (one probe)."""
        with self._lock:
            lost = self._lost([r for r, e in self._roots.items() if e.mode == INOTIFY])
            for root in lost:
                self._switch_to_polling(self._roots[root], "lost inotify coverage of new directories")
        for root in lost:
            self._sink(WatchEvent(root, RESCAN))
        return lost

    def stop(self) -> None:
        with self._lock:
            entries = list(self._roots.values())
            self._roots.clear()
            inotify, self._inotify = self._inotify, None
        observers = [e.observer for e in entries if e.mode == POLLING] + ([inotify] if inotify else [])
        for e in entries:
            e.handler.active = False
        for obs in observers:
            obs.stop()
        for obs in observers:
            obs.join()
        self._remove_overflow_handler()

    # -- inotify and polling --------------------------------------------------------------------------------
    def _try_inotify(self, root: Path, poll_interval: float) -> _Root | None:
        """Schedule `root` on the shared inotify observer; None (logged) if inotify cannot be used for it."""
        handler = _Handler(self, root, self.ignore, polling=False)
        try:
            observer = self._inotify_observer()
            watch = observer.schedule(handler, str(root), recursive=True, event_filter=EVENT_FILTER)
        except (FileNotFoundError, NotADirectoryError):
            raise
        except OSError as err:
            log.warning("%s cannot be watched by inotify (%s); it is polled every %g s instead: %s",
                        root, err, poll_interval, _inotify_hint(err.errno))  # fmt: skip
            self.fallbacks[root] = f"{err.strerror or err}: {_inotify_hint(err.errno)}"
            return None
        return _Root(root, INOTIFY, poll_interval, handler, observer, watch)

    def _inotify_observer(self) -> BaseObserver:
        if self._inotify is None:
            try:
                from watchdog.observers.inotify import InotifyObserver
            except (ImportError, UnsupportedLibcError) as err:  # a libc without inotify
                raise OSError(errno.ENOSYS, f"inotify unavailable: {err}") from None
            observer = InotifyObserver(generate_full_events=True)  # tells moves in/out from creations
            observer.start()
            self._inotify = observer
        return self._inotify

    def _start_polling(self, root: Path, interval: float) -> _Root:
        handler = _Handler(self, root, self.ignore, polling=True)
        observer = PollingObserver(timeout=interval)
        watch = observer.schedule(handler, str(root), recursive=True, event_filter=EVENT_FILTER)
        observer.start()  # takes the first snapshot before returning
        return _Root(root, POLLING, interval, handler, observer, watch)

    def _switch_to_polling(self, entry: _Root, why: str) -> None:
        log.warning("%s %s; it is polled every %g s instead (and rescanned): %s",
                    entry.path, why, entry.poll_interval, _inotify_hint(errno.ENOSPC))  # fmt: skip
        self.fallbacks[entry.path] = f"{why}: {_inotify_hint(errno.ENOSPC)}"
        self._unschedule(entry)  # frees its watches for the other roots
        self._roots[entry.path] = self._start_polling(entry.path, entry.poll_interval)

    def _unschedule(self, entry: _Root) -> None:
        entry.handler.active = False
        if entry.mode == INOTIFY:
            entry.observer.unschedule(entry.watch)
        else:
            entry.observer.stop()
            entry.observer.join()

    # -- coverage -------------------------------------------------------------------------------------------
    def _lost(self, roots: list[Path]) -> list[Path]:
        """The roots that miss inotify watches; only looked for when the watch limit is exhausted."""
        for root in roots:
            try:
                if inotify_watch_available(root):
                    return []
                return self._lost_coverage(roots)
            except OSError:
                continue  # this root is gone or unreadable: probe on another one
        return []

    def _lost_coverage(self, roots: list[Path]) -> list[Path]:
        """The roots with a tracked directory (or its .rag) that no inotify watch of this process covers."""
        watched = watched_inodes()
        if watched is None:
            return list(roots)
        return [root for root in roots if any(ino not in watched for ino in self._tracked_inodes(root))]

    def _tracked_inodes(self, root: Path) -> Iterator[int]:
        for d in walk_dirs(root, self.ignore):  # what the agent tracks; watchdog also watches ignored dirs
            for p in (d, d / RAG_DIR):
                try:
                    st = os.stat(p, follow_symlinks=False)
                except OSError:
                    continue  # vanished, or no .rag yet
                yield st.st_ino

    # -- events ---------------------------------------------------------------------------------------------
    def _emit(self, ev: WatchEvent) -> None:
        if self._stale(ev.directory):
            return
        if ev.kind == GONE:
            self._remember_gone(ev.directory)
        self._sink(ev)

    def _stale(self, d: Path) -> bool:
        """An event reported under the old path of a directory that left the tree (watchdog keeps its watches)."""
        with self._gone_lock:
            if not self._gone:
                return False
            for a in (d, *d.parents):
                if a in self._gone:
                    if a.exists():  # the path is back (re-created or moved back): no longer gone
                        del self._gone[a]
                        return False
                    return not d.exists()
            return False

    def _remember_gone(self, d: Path) -> None:
        with self._gone_lock:
            for g in [g for g in self._gone if is_under(g, d)]:
                del self._gone[g]
            self._gone[d] = None
            while len(self._gone) > GONE_MEMORY:
                del self._gone[next(iter(self._gone))]

    def _on_overflow(self) -> None:
        with self._lock:
            roots = [r for r, e in self._roots.items() if e.mode == INOTIFY]
        if roots:
            log.warning("inotify queue overflow, events were lost; rescanning %s", ", ".join(map(str, roots)))
        for root in roots:
            self._sink(WatchEvent(root, RESCAN))

    def _install_overflow_handler(self) -> None:
        self._logger.addHandler(self._overflow)
        if not self._logger.isEnabledFor(logging.WARNING):  # a quiet log level must not hide the overflow
            self._logger_level = self._logger.level
            self._logger.setLevel(logging.WARNING)

    def _remove_overflow_handler(self) -> None:
        self._logger.removeHandler(self._overflow)
        if self._logger_level is not None:
            self._logger.setLevel(self._logger_level)
            self._logger_level = None
