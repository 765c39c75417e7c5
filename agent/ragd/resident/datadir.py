"""The agent's data directory kept an eye on while it runs: deleted or replaced, it is noticed and made again.

Everything in the data directory is derived (DESIGN §4.1): the index from the sidecars, the stat cache and the
history from what the agent sees. The roots added with `ragctl roots add` are the one thing the agent's memory then
holds alone. `DataDirGuard` remembers the parts the agent opened (the device and inode of the data directory, of its
`index/`, of the instance lock and of the history; that the collection, its keyword index, roots.json and
served-roots.json are there) and compares them with what is there now: a handful of stat calls, made from the main
loop at each tick, at the start of a verification and after a change note could not be applied. The agent
(`Agent.check_data_dir`) names what vanished in one warning and rebuilds it.

A loss is acted on only once the next check sees the same (a `rm -rf` under way is let finish, not raced); from the
moment it is there (seen by a check or not) until what vanished is made again, the agent is not idle (`suspect`),
so `ragctl wait` does not return before the rebuild is done.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..index.keyword import keywords
from . import rootstate
from .instance import LOCK_NAME

Ident = tuple[int, int]  # (st_dev, st_ino)

WHOLE = "data directory"  # the key of the directory itself: lost, every part is
INDEX = "index"
HISTORY = "history"
ROOTS = "roots.json"
SERVED = "served-roots.json"
LOCK = "instance lock"


def ident(path: Path) -> Ident | None:
    """The device and inode of `path`, None when it is not there (or cannot be looked at)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


@dataclass(frozen=True)
class Part:
    """One thing in the data directory: `key` (what the agent rebuilds), its path, and its identity when opened
    (None: only its presence counts, e.g. a collection a compaction replaces by a copy)."""

    key: str
    path: Path
    known: Ident | None = None
    steady: bool = True  # False: not looked at while `unsteady()` says it is being replaced on purpose

    def lost(self) -> bool:
        now = ident(self.path)
        return now is None or (self.known is not None and now != self.known)


def present(key: str, path: Path, *, inode: bool = True, required: bool = False) -> Part | None:
    """`path` as a part to watch, with its identity (`inode`) or only its presence; None when it is not there,
    unless it is `required` (the agent opened it: missing, it is lost already)."""
    known = ident(path)
    if known is None:
        return Part(key, path, None, steady=inode) if required else None
    return Part(key, path, known if inode else None, steady=inode)


def parts(data_dir: Path, *, collection: Path | None, history: Path | None, roots: bool) -> list[Part]:
    """The parts of the agent's data directory there now: its `index/` with the `collection` (and its keyword
    index) when it is kept there, the `history` file when it is one, roots.json when the agent keeps `roots`,
    served-roots.json and the instance lock."""
    found = []
    if collection is not None:
        # the collection is open, so it is there: missing now (deleted again while it was rebuilt), it is lost
        found += [present(INDEX, data_dir / "index", required=True),
                  present(INDEX, collection, inode=False, required=True),
                  present(INDEX, keywords.place(collection), inode=False)]  # fmt: skip
    if history is not None:
        found.append(present(HISTORY, history))
    if roots:
        found.append(present(ROOTS, data_dir / rootstate.FILE_NAME, inode=False))
    found += [
        present(SERVED, data_dir / rootstate.SERVED_FILE, inode=False),
        present(LOCK, data_dir / LOCK_NAME),
    ]
    return [p for p in found if p is not None]


class DataDirGuard:
    def __init__(self, data_dir: Path, unsteady: Callable[[], bool] = lambda: False) -> None:
        self.data_dir = data_dir
        self._unsteady = unsteady
        self._parts: list[Part] = []
        self._seen: frozenset[str] = frozenset()  # lost at the last check, not acted on yet
        self._lock = threading.Lock()

    def remember(self, parts: Iterable[Part], *, made_again: bool = False) -> None:
        """Watch these parts from now on (the data directory itself is always one). Unless they were `made_again`
        (a recovery), a part watched until now that is lost at this moment stays watched as it was: what is
        remembered while the data directory is being deleted (roots added or removed meanwhile) must not make the
        loss forgotten."""
        with self._lock:
            fresh = [Part(WHOLE, self.data_dir, ident(self.data_dir)), *parts]
            lost = {} if made_again else {(p.key, p.path): p for p in self._parts if p.lost()}
            kept = [lost.pop((p.key, p.path), p) for p in fresh]
            self._parts = kept + list(lost.values())
            self._seen = frozenset()

    @property
    def suspect(self) -> bool:
        """A loss is there and not made good yet: seen by a check and not acted on, being made again (until the
        parts made again are remembered), or not seen by any check yet (the main loop's next tick may be late on a
        loaded machine). A handful of stat calls: `ragctl wait` must not say idle before the rebuild is under way."""
        return bool(self._seen) or bool(self.lost())

    def lost(self) -> frozenset[str]:
        """The keys of the parts vanished or replaced (every key, when the data directory itself was)."""
        with self._lock:
            parts = list(self._parts)
        skip = self._unsteady()
        lost = frozenset(p.key for p in parts if not (skip and not p.steady) and p.lost())
        return frozenset(p.key for p in parts) if WHOLE in lost else lost

    def check(self, *, at_once: bool = False) -> frozenset[str]:
        """The parts to rebuild now: lost at this check and at the one before (or `at_once`); else nothing."""
        lost = self.lost()
        with self._lock:
            if lost and (at_once or lost == self._seen):
                self._seen = frozenset()
                return lost
            self._seen = lost
            return frozenset()


def describe(lost: frozenset[str], data_dir: Path) -> str:
    """The warning's words: what vanished, and what the agent does about it."""
    if WHOLE in lost:
        what = f"the data directory {data_dir}"
    else:
        names = {
            INDEX: "index/",
            HISTORY: "history.sqlite3",
            ROOTS: ROOTS,
            SERVED: SERVED,
            LOCK: "agent.lock",
        }
        what = ", ".join(f"{data_dir}/{names[k]}" for k in sorted(lost, key=list(names).index))
    done = []
    if INDEX in lost:
        done.append("the index is rebuilt from the sidecars")
    if ROOTS in lost or WHOLE in lost:
        done.append("the roots added with ragctl are written back")
    if HISTORY in lost:
        done.append("the document history starts again, empty")
    return f"{what}: deleted or replaced while the agent ran; made again" + "".join(f"; {d}" for d in done)
