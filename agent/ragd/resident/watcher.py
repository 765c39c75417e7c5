"""File-system watching (DESIGN §5): inotify through watchdog, polling where inotify cannot cover a root.

`Watcher` runs the observers: one inotify observer shared by the roots, or a polling one of a root's own; each
watchdog event of a root becomes `WatchEvent`s for the agent (watchevents.py: "dirty", "gone", "mushroom",
"subtree"), and "rescan" for a root whose events were lost. What watchdog does not report by itself is detected here:

- a queue overflow is only logged by watchdog: a handler on its logger turns the record into a rescan;
- the per-user watch limit fails silently for subdirectories: `check_coverage()` probes the limit (inotify.py) and,
  when it is exhausted, compares the directories of each root with the inodes this process watches; a root with unwatched directories is switched to polling and rescanned;
- a directory moved out of a root stays watched under its old path: events below a path reported gone are dropped
  while that path does not exist;
- watchdog's threads end on an exception they do not expect (7.1 ended its inotify reader on a KeyError), after
  which no event arrives: `check_alive()` sees a dead thread, starts inotify anew for the roots and rescans them (a
  third death in a run leaves them polled).

watchdog calls a handler while it holds its observer's lock, which adding or removing a root (`schedule`,
`unschedule`) takes too: the agent's reactions therefore run on a thread of the watcher's own ("watch-events",
`_Relay`), and watchdog's threads only translate and queue. A reaction that took the agent's lock (a folder gone)
while a root was being added under that lock made both wait for ever, and no `ragctl` call was answered again.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdog import events as wde
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver
from watchdog.utils import UnsupportedLibcError

from ..paths import is_under
from ..pipeline.scan import Ignore, walk_dirs
from ..pipeline.sidecar import RAG_DIR
from .filewatch import FileWatch
from .inotify import inotify_hint, inotify_watch_available, watched_inodes
from .watchevents import DIRTY, GONE, RESCAN, Translator, WatchEvent

log = logging.getLogger(__name__)

INOTIFY, POLLING = "inotify", "polling"
WATCHDOG_INOTIFY_LOGGER = "watchdog.observers.inotify_c"
# watchdog 7.x logs "Inotify queue overflowed; filesystem events were lost" (a warning) on this logger, once
OVERFLOW_MESSAGE = "Inotify queue overflowed"
GONE_MEMORY = 4096  # directories remembered as gone (oldest forgotten first)
RESTARTS = 2  # inotify watching started anew after its threads died; the next death leaves the roots polled
# The events that can mean work. watchdog derives the inotify mask from them, so opening, reading and closing a file
# unwritten (the agent reads every file it indexes) never even reaches the event queue.
EVENT_FILTER: list[type[wde.FileSystemEvent]] = [
    *(wde.FileCreatedEvent, wde.FileModifiedEvent, wde.FileAttribEvent, wde.FileClosedEvent),
    *(wde.FileDeletedEvent, wde.FileMovedEvent, wde.DirCreatedEvent, wde.DirDeletedEvent, wde.DirMovedEvent),
    wde.DirAttribEvent,  # a chmod: a folder the agent can no longer read, or can again
]


class _Handler(wde.FileSystemEventHandler):
    """watchdog's callback for one root; inactive once the root is removed or switched."""

    def __init__(self, watcher: Watcher, root: Path, ignore: Ignore, *, polling: bool) -> None:
        self.watcher = watcher
        self.translate = Translator(root, ignore, polling=polling)
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


class _Relay:
    """The sink called on a thread of its own, in the order the events were queued; `pending()` while any waits."""

    def __init__(self, sink: Callable[[WatchEvent], None]) -> None:
        self._sink = sink
        self._queue: queue.SimpleQueue[WatchEvent | Callable[[], None] | None] = queue.SimpleQueue()
        self._count_lock = threading.Lock()
        self._waiting = 0  # queued and not yet handled
        self._thread = threading.Thread(target=self._run, name="watch-events", daemon=True)
        self._thread.start()

    def put(self, item: WatchEvent | Callable[[], None]) -> None:
        with self._count_lock:
            self._waiting += 1
        self._queue.put(item)

    def pending(self) -> bool:
        with self._count_lock:
            return self._waiting > 0

    def stop(self, timeout: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if isinstance(item, WatchEvent):
                    self._sink(item)
                else:
                    item()
            # the thread's loop boundary: one event's failure must not end the agent's watching
            except Exception:
                log.exception("watch event %r could not be handled", item)
            finally:
                with self._count_lock:
                    self._waiting -= 1


# -- the watcher ----------------------------------------------------------------------------------------------------
class Watcher:
    """Watches roots recursively and reports `WatchEvent`s to `sink`: watchdog's, on the watcher's own thread in the
    order watchdog saw them; the rescans of `check_coverage` and `check_alive`, on their caller's."""

    def __init__(self, ignore: Ignore, sink: Callable[[WatchEvent], None]) -> None:
        # watchdog warns when a new directory's watch is registered twice (its IN_CREATE raced the parent's walk)
        warnings.filterwarnings("ignore", r"Callback with id .* already exists", RuntimeWarning)
        self.ignore = ignore
        self._sink = sink
        self._relay = _Relay(sink)  # the reactions to watchdog's events, off its threads
        self._lock = threading.RLock()
        self._roots: dict[Path, _Root] = {}
        self.fallbacks: dict[Path, str] = {}  # roots polled because inotify could not cover them, and why
        self._inotify: BaseObserver | None = None
        self.restarts = 0  # times inotify watching was started anew after a thread of it died
        self._gone: dict[Path, None] = {}  # insertion-ordered set of directories reported gone
        self._gone_lock = threading.Lock()
        self._overflow = _OverflowHandler(self._on_overflow)
        self._logger = logging.getLogger(WATCHDOG_INOTIFY_LOGGER)
        self._logger_level: int | None = None
        self._install_overflow_handler()
        # hard-linked files themselves: a change made through a path outside every root (filewatch.py)
        self.files = FileWatch(lambda path: self._emit(WatchEvent(path.parent, DIRTY, path)))

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

    def watch_below(self, directory: Path) -> int:
        """Watch `directory` and the folders below it again, for each inotify root that holds it: inotify watches only
        a folder its process may read, so one closed when its root's watches were made (the agent's start, a
        move into the root, a rescan after an overflow) has none, and nothing written in it after it is opened
        again would be reported (found by the soak: a note made in such a folder never indexed). Called by a
        folder's job that finds it readable again (jobs.py), before its folders are looked at again. Returns the
        roots whose watches were added (0 for polled roots, which list every folder anyway)."""
        with self._lock:
            entries = [e for r, e in self._roots.items() if e.mode == INOTIFY and is_under(directory, r)]
            added = 0
            for entry in entries:
                try:  # watchdog 7.1's: the root's watch group, which adds a folder's watches under its own lock
                    group = entry.observer._emitter_for_watch[entry.watch]._inotify  # type: ignore[attr-defined]
                except (AttributeError, KeyError):  # no such group (another watchdog, a stopped emitter)
                    continue
                if group is not None:
                    with group._lock:  # a folder this process still cannot read is left out, as at the start
                        group._add_all_callbacks(os.fsencode(directory))
                    added += 1
            return added

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

    def check_alive(self) -> list[Path]:
        """Roots whose inotify watching died with a thread of watchdog's (its reader of the inotify descriptor,
        the dispatcher or a root's emitter): inotify is started anew for them, or after RESTARTS they are polled,
        and a "rescan" is emitted for each (what changed meanwhile was never reported). Cheap: a few `is_alive`."""
        with self._lock:
            observer = self._inotify
            if observer is None or not (dead := _dead_threads(observer)):
                return []
            entries = [e for e in self._roots.values() if e.mode == INOTIFY]
            self._inotify = None
            for e in entries:
                e.handler.active = False
            self.restarts += 1
            polled = self.restarts > RESTARTS
            log.warning("file watching by inotify stopped (watchdog's thread %s ended); %s %s and rescanned",
                        ", ".join(dead), "polling" if polled else "watching anew",
                        ", ".join(str(e.path) for e in entries) or "no root")  # fmt: skip
            for e in entries:
                entry = None if polled else self._try_inotify(e.path, e.poll_interval)
                if entry is None and polled:
                    self.fallbacks[e.path] = f"inotify watching died {self.restarts} times (see the log)"
                self._roots[e.path] = entry or self._start_polling(e.path, e.poll_interval)
        # stopped on a thread of its own: a half-dead watchdog may block in its joins, never the agent's main loop
        threading.Thread(target=_retire, args=(observer,), name="ragd-retire-watch", daemon=True).start()
        for e in entries:
            self._sink(WatchEvent(e.path, RESCAN))
        return [e.path for e in entries]

    def stop(self) -> None:
        self.files.close()
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
        self._relay.stop()
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
                        root, err, poll_interval, inotify_hint(err.errno))  # fmt: skip
            self.fallbacks[root] = f"{err.strerror or err}: {inotify_hint(err.errno)}"
            return None
        return _Root(root, INOTIFY, poll_interval, handler, observer, watch)

    def _inotify_observer(self) -> BaseObserver:
        if self._inotify is None:
            try:
                from watchdog.observers import inotify
                from watchdog.observers.inotify import InotifyObserver
            except (ImportError, UnsupportedLibcError) as err:  # a libc without inotify
                raise OSError(errno.ENOSYS, f"inotify unavailable: {err}") from None
            inotify.InotifyWatchGroup._remove_watch_internally = forget_watch  # type: ignore[method-assign,assignment]
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
                    entry.path, why, entry.poll_interval, inotify_hint(errno.ENOSPC))  # fmt: skip
        self.fallbacks[entry.path] = f"{why}: {inotify_hint(errno.ENOSPC)}"
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
        self._relay.put(ev)

    def pending(self) -> bool:
        """Events seen and not yet handed to the agent."""
        return self._relay.pending()

    def _stale(self, d: Path) -> bool:
        """An event reported under the old path of a directory that left the tree (watchdog keeps its watches)."""
        with self._gone_lock:
            if not self._gone:
                return False
            for a in (d, *d.parents):
                if a in self._gone:
                    # (os.path: False where it may not look, below a folder made unreadable; pathlib raised)
                    if os.path.exists(a):  # the path is back (re-created or moved back): no longer gone
                        del self._gone[a]
                        return False
                    return not os.path.exists(d)
            return False

    def _remember_gone(self, d: Path) -> None:
        with self._gone_lock:
            for g in [g for g in self._gone if is_under(g, d)]:
                del self._gone[g]
            self._gone[d] = None
            while len(self._gone) > GONE_MEMORY:
                del self._gone[next(iter(self._gone))]

    def _on_overflow(self) -> None:
        """(From watchdog's reader, which may hold its own locks: `_rescan_all` runs on the relay's thread.)"""
        self._relay.put(self._rescan_all)

    def _rescan_all(self) -> None:
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


def _dead_threads(observer: BaseObserver) -> list[str]:
    """The names of an inotify observer's threads that ended while it should run."""
    try:  # watchdog's own set, changed under its lock by a root added or removed meanwhile: looked at next time
        emitters = list(observer.emitters)
    except RuntimeError:
        return []
    threads = [observer, getattr(observer, "_inotify_fd", None), *emitters]
    return [t.name for t in threads if isinstance(t, threading.Thread) and not t.is_alive()]


def _retire(observer: BaseObserver) -> None:
    """Stop what is left of a dead observer (its descriptor closed, its live threads ended), never raising."""
    try:
        observer.stop()
    except Exception:  # a half-dead watchdog may fail to stop: its descriptor is left to the process's end
        log.debug("a dead inotify observer did not stop cleanly", exc_info=True)


def forget_watch(group: Any, wd: Any) -> None:
    """watchdog 7.1's `InotifyWatchGroup._remove_watch_internally`, with a watch already forgotten let be. Its own
    raised KeyError when a deleted folder's path no longer named a watch (a `.rag/tmp` removed while its folder
    was moved and made again), and the exception ended watchdog's thread that reads inotify: the agent saw no
    change any more while it said idle (the model-based test, CI seed 3340511851)."""
    path = group._active_callbacks_by_watch.pop(wd, None)
    if path is None:
        return
    other = group._active_callbacks_by_path.pop(path, None)
    if other is not None and other != wd:  # the path belongs to a newer watch: it stays
        group._active_callbacks_by_path[path] = other
