"""Self-verification: the index checked against the sidecars of every root, and repaired where they differ.

A pass walks the directories of every root (a stat of each file, and the sidecars, which are read again only when
they changed since the previous pass), compares each source's md5 and chunk count with what the index holds, and
lists the differences: sources missing from the index or stale there, and indexed sources that no EMBEDDED sidecar
under a current root accounts for. Every difference is checked again on the index writer thread, with the
directory's lock held, before it is repaired, so work in progress (a running job, a change note not applied yet)
never passes for damage; such directories are left for the next pass. A repair means a bug somewhere: each one is
logged as a warning with its path.

The walk runs on its own thread and reads only, so search goes on while it runs; the index writer lists the index
at the start of a pass (so a rebuild never swaps the index under the listing) and makes the repairs.

The directories a pass left for want of quiet (`Verifier.skipped`) are checked again on their own by a "recheck"
pass, which the agent asks for once it is idle (edges/lifecycle.py), not left to the next periodic pass.

What a pass needs of the agent, and the report it gives, are in verification.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ...model import EmbeddingIdentity
from ...paths import is_under, outermost, under_any
from ...pipeline import mushroom, sidecar
from ...pipeline.filestat import Stat
from ...pipeline.scan import (
    PERMISSION_DENIED,
    Expected,
    Ignore,
    files_of,
    source_matches,
    unreadable,
    walk_dirs,
)
from ...pipeline.sidecar import SourceInfo
from ..backend import SourceSummary
from .entrycache import SidecarCache
from .sync import IndexSync, differs, servable
from .verification import VerifyHooks, VerifyReport

log = logging.getLogger(__name__)

# A folder changed this recently may hold a change the watcher has not told the agent of yet (inotify's events reach
# the debouncer a little later, more so on a loaded machine): a pass lets such a change settle before it repairs.
SETTLE_S = 1.0

T = TypeVar("T")
YIELD_EVERY = 64  # directories walked between two short pauses (the walk never hogs the interpreter)


@dataclass
class _Pass:
    dirs: int = 0
    sources: int = 0
    busy: set[Path] = field(default_factory=set)  # directories left for want of quiet
    notes: int = 0
    suspects: list[str] = field(default_factory=list)
    unreadable: dict[Path, str] = field(default_factory=dict)  # folders out of search: not compared, and why
    redone: list[str] = field(default_factory=list)  # sources whose own stat is not the one recorded


class Verifier:
    def __init__(self, identity: EmbeddingIdentity, ignore: Ignore, hooks: VerifyHooks) -> None:
        self.identity = identity
        self.ignore = ignore
        self.hooks = hooks
        self.cache = SidecarCache(identity)
        self.last: VerifyReport | None = None
        self.repaired_total = 0
        self.passes = 0
        self._lock = threading.Lock()  # one pass at a time
        self._state = threading.Lock()
        self._running = False
        self._again: str | None = None
        self.skipped: frozenset[Path] = frozenset()  # the directories the last pass left (work under way)

    # -- triggers ---------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._running

    def request(self, trigger: str) -> None:
        """Verify in the background; a request during a pass runs one more pass after it."""
        with self._state:
            if self._running:
                self._again = trigger
                return
            self._running = True
        threading.Thread(target=self._background, args=(trigger,), name="verify", daemon=True).start()

    def _background(self, trigger: str) -> None:
        while True:
            try:
                self.run(trigger)
            except Exception:  # the verify thread's boundary: report it, the next pass tries again
                log.exception("internal error while verifying the index")
            with self._state:
                if self._again is None:
                    self._running = False
                    return
                trigger, self._again = self._again, None

    # -- a pass -----------------------------------------------------------------------------------------------
    def run(self, trigger: str, progress: Callable[[int], None] | None = None) -> VerifyReport:
        """A pass over every root; trigger "recheck": over the directories the last pass left only."""
        with self._lock:
            started = time.monotonic()
            self.hooks.check()
            roots = list(self.hooks.roots())
            if trigger == "recheck":
                dirs = sorted(d for d in self.skipped if self._tracked(d, roots, directory=True))
                # listed on the writer thread: a rebuild (which swaps the index) never runs under the listing
                indexed = self.hooks.write(lambda s: _listing(s, dirs)).result()
            else:
                indexed = self.hooks.write(lambda s: s.index.sources(None)).result()
            # by folder from here on, the listing by path dropped (100,000 sources: ~5 MiB)
            listed, by_dir = len(indexed), _by_dir(indexed)
            del indexed
            if trigger == "recheck":
                found = self._check_dirs(dirs, by_dir)
            else:
                found = self._walk(roots, by_dir, progress)
            _settle(found.suspects)
            repaired, removed = self.hooks.write(lambda s: self._repair(s, found)).result()
            if trigger != "recheck":
                self.cache.end_pass()
            self.skipped = frozenset(found.busy)
            report = VerifyReport(trigger, sidecar.utc_stamp(), round(time.monotonic() - started, 3),
                                  found.dirs, found.sources, listed, len(found.busy), found.notes,
                                  tuple(repaired), tuple(removed), tuple(map(str, sorted(found.unreadable))),
                                  tuple(found.redone))  # fmt: skip
            self.last = report
            self.passes += 1
            self.repaired_total += len(repaired) + len(removed)
        if report.ok:
            log.debug(
                "index verified: %d sources in %d directories, nothing to repair", report.sources, report.dirs
            )
        else:
            log.warning(
                "index verified (%s): %d sources repaired, %d removed", trigger, len(repaired), len(removed)
            )
        return report

    def _check_dirs(self, dirs: list[Path], by_dir: dict[Path, dict[str, SourceSummary]]) -> _Pass:
        found = _Pass()
        held = self.hooks.held_out()
        for d in dirs:
            found.dirs += 1
            have = by_dir.pop(d, {})
            if not self._out_of_search(d, held, found):
                self._check_dir(d, have, found)
        return found

    def _walk(
        self,
        roots: list[Path],
        by_dir: dict[Path, dict[str, SourceSummary]],
        progress: Callable[[int], None] | None,
    ) -> _Pass:
        found = _Pass()
        held = self.hooks.held_out()
        for root in outermost(roots):
            for d in walk_dirs(root, self.ignore):
                found.dirs += 1
                if found.dirs % YIELD_EVERY == 0:
                    time.sleep(0.001)
                    if progress:
                        progress(found.dirs)
                have = by_dir.pop(d, {})  # each folder's taken as it is walked: what is left was not walked
                if not self._out_of_search(d, held, found):
                    self._check_dir(d, have, found)
        for d, have in by_dir.items():  # outside every root, in an ignored directory, or a directory now gone
            if not under_any(d, found.unreadable):
                found.suspects += have
        return found

    def _out_of_search(self, d: Path, held: set[Path], found: _Pass) -> bool:
        """`d` is not compared: it cannot be read (nor anything below it), or lies in a folder the agent holds out
        of search for that. Neither is damage, nor a repair: a folder found unreadable, or readable again while
        held out, is handed to the agent, whose job there holds it out or brings it back from its sidecars."""
        if under_any(d, found.unreadable):  # below a folder it cannot read (whose names it could list)
            return True
        top = next((h for h in held if is_under(d, h)), None)
        if unreadable(d):
            found.unreadable[top or d] = PERMISSION_DENIED
            if top is None:
                self.hooks.look_at(d)
            return True
        if top is None:
            return False
        if d == top:  # readable again: its job brings it back; checked again once the agent is idle
            self.hooks.look_at(d)
            found.busy.add(d)
        return True

    def _check_dir(self, d: Path, have: dict[str, SourceSummary], found: _Pass) -> None:
        """Compare `d`; an OS error on the way (the folder changed under the pass) leaves it to the next pass."""
        try:
            self._compare_dir(d, have, found)
        except OSError as err:
            log.info("verify: %s left for the next pass: %s", d, err)
            found.busy.add(d)

    def _compare_dir(self, d: Path, have: dict[str, SourceSummary], found: _Pass) -> None:
        if self.hooks.busy(d):
            found.busy.add(d)
            return
        notes = mushroom.pending(d)
        if notes:  # not applied yet: the index may lag here for now. Notes the watcher missed are handed over
            found.notes += sum(1 for note in notes if self.hooks.hand_note(note))
            found.busy.add(d)
            return
        # file by file as the folder is read, each path made as it is compared, the index's summaries taken from
        # `have` as they are met (what is left is indexed and gone): a folder of 100,000 files held its listing
        # (~34 MiB) and, before, the sidecars' answers by path beside the index's (~25 MiB)
        where = os.path.join(d, "")
        changed: list[str] = []
        try:
            for name, st in files_of(d, self.ignore):
                want = self.cache.of(d, name)
                if want is not None:
                    found.sources += 1
                if differs(want, have.pop(path := where + name, None)):
                    found.suspects.append(path)
                if _source_changed(self.cache.recorded(d, name), st):
                    changed.append(name)
        except OSError:
            pass  # gone meanwhile: its indexed sources not met are suspects, checked again by the repair
        found.suspects += have  # indexed, gone from the folder
        self._redo_changed(d, changed, found)

    def _redo_changed(self, d: Path, changed: list[str], found: _Pass) -> None:
        """Sources whose own stat is no longer the one their entries recorded, though no job saw them change (a
        write through a hard link outside the roots, an event the watcher missed): the sidecar is as stale as the
        index, so the directory's job is queued to parse and embed them again."""
        if changed:
            found.redone += [str(d / name) for name in changed]
            self.hooks.redo(d, changed)

    # -- repairs, on the index writer thread ------------------------------------------------------------------
    def _repair(self, sync: IndexSync, found: _Pass) -> tuple[list[str], list[str]]:
        repaired: list[str] = []
        removed: list[str] = []
        roots = outermost(self.hooks.roots())
        for path in sorted(found.suspects):
            p = Path(path)
            with _try_lock(p.parent) as locked:
                if not locked or self._in_progress(p.parent):
                    # work in progress there: looked at again (a folder gone: its parent's job records it)
                    if p.parent.is_dir():
                        found.busy.add(p.parent)
                    continue
                want = self._expected_now(p, roots)
                have = sync.index.sources(path).get(path)
                if not differs(want, have):
                    continue
                if want is None:
                    sync.index.delete_source(path)
                    removed.append(path)
                    log.warning(
                        "verify: %s was in the index with no EMBEDDED sidecar under a root; removed", path
                    )
                else:
                    sync.sync_source(p.parent, p.name, have, listed=True)
                    repaired.append(path)
                    what = "missing from" if have is None else "stale in"
                    log.warning("verify: %s was %s the index; re-synced from its sidecar", path, what)
        if repaired or removed:
            sync.flush()
        return repaired, removed

    def _in_progress(self, directory: Path) -> bool:
        """Work on `directory` is under way or due; for a directory that is gone (deleted, renamed, moved away), on
        the nearest folder still there, whose job records the deletion or the move and updates the index."""
        directory = _nearest_dir(directory)
        return bool(mushroom.pending(directory)) or self.hooks.busy(directory)

    def _expected_now(self, path: Path, roots: list[Path]) -> Expected | None:
        if not self._tracked(path, roots) or not path.is_file():
            return None
        entry = sidecar.try_read(sidecar.entry_path(path.parent, path.name))
        if entry is None or not servable(entry, self.identity):
            return None
        return Expected(entry.source.md5_hash, len(entry.chunks))

    def _tracked(self, path: Path, roots: list[Path], *, directory: bool = False) -> bool:
        """Under a root, with no ignored folder between the root and the file, and not an ignored name; for a
        `directory`, the root itself counts, and the path must still be a directory."""
        for root in roots:
            if directory and path == root:
                return os.path.isdir(path)  # False in a folder it cannot read
            if is_under(path, root) and path != root:
                parts = path.relative_to(root).parts
                if directory:
                    return not any(self.ignore.dir(x) for x in parts) and os.path.isdir(path)
                return not self.ignore.file(parts[-1]) and not any(self.ignore.dir(x) for x in parts[:-1])
        return False


def _source_changed(recorded: SourceInfo | None, st: Stat) -> bool:
    return recorded is not None and not source_matches(recorded, st)


def _by_dir(indexed: dict[str, SourceSummary]) -> dict[Path, dict[str, SourceSummary]]:
    by_dir: dict[Path, dict[str, SourceSummary]] = {}
    for path, summary in indexed.items():
        by_dir.setdefault(Path(path).parent, {})[path] = summary
    return by_dir


def _listing(sync: IndexSync, dirs: list[Path]) -> dict[str, SourceSummary]:
    """What the index holds for the files directly in each of `dirs`."""
    out: dict[str, SourceSummary] = {}
    for d in dirs:
        out.update((p, s) for p, s in sync.index.sources(str(d)).items() if Path(p).parent == d)
    return out


@contextlib.contextmanager
def _try_lock(directory: Path) -> Iterator[bool]:
    """The directory's lock if it is free now (True), or False if a job holds it. A directory without a `.rag/`
    has no job to wait for: True without a lock."""
    tmp = sidecar.rag_dir(directory) / sidecar.TMP_DIR
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _nearest_dir(directory: Path) -> Path:
    """`directory`, or for one that is gone (deleted, renamed, moved away) the nearest folder above it still there."""
    while not directory.is_dir() and directory.parent != directory:
        directory = directory.parent
    return directory


def _settle(suspects: Sequence[str]) -> None:
    """Wait until the folders of `suspects` (the nearest one still there) changed at least SETTLE_S ago, at most
    SETTLE_S: a change made while the pass walked is then known to the agent (its folder busy), not repaired."""
    newest = 0.0
    for directory in {_nearest_dir(Path(p).parent) for p in suspects}:
        with contextlib.suppress(OSError):
            st = os.stat(directory)
            newest = max(newest, st.st_mtime, st.st_ctime)
    wait = SETTLE_S - (time.time() - newest)
    if wait > 0:
        time.sleep(min(wait, SETTLE_S))
