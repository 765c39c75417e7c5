"""Roots added or removed at run time (`ragctl roots add|remove`), kept in `<data dir>/roots.json`.

They apply on top of the config file's roots and the command line's, so they survive restarts and reloads:
    effective = (config roots + command-line roots + added) - removed

Beside them, `<data dir>/served-roots.json` records the roots whose sources the agent last had the index hold, so
that at the next start a root new since then (added to the config file while the agent was stopped) is filled from
its sidecars, and one gone since then leaves the index, before the first verification (which would otherwise
repair or remove their sources one by one, each a warning). It also says whether the index holds every source of
those roots (`filled`): a fill of the whole index from the sidecars (a new or rebuilt index) records `false` before
its first write and `true` once it is done, so that a fill cut short (a SIGKILL, a crash) is done again at the next
start instead of leaving files out of search until the verification repairs them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import atomic_write
from ..errors import ConfigError

FILE_NAME = "roots.json"
SERVED_FILE = "served-roots.json"

log = logging.getLogger(__name__)


@dataclass
class RootOverlay:
    added: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def apply(self, base: list[Path]) -> list[Path]:
        out = [r for r in dict.fromkeys([*base, *self.added]) if r not in self.removed]
        return out

    def add(self, root: Path) -> None:
        if root in self.removed:
            self.removed.remove(root)
        if root not in self.added:
            self.added.append(root)

    def remove(self, root: Path, *, configured: bool) -> None:
        if root in self.added:
            self.added.remove(root)
        if configured and root not in self.removed:
            self.removed.append(root)

    def copy(self) -> RootOverlay:
        return RootOverlay(list(self.added), list(self.removed))

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)


class KeptRoots:
    """roots.json and the running agent's copy of it, kept level under one lock: the copy is what the agent last
    read or wrote, and stands for the file while the file has vanished (the data directory deleted under the
    agent); `write_back` then makes the file again from it. Every read, change and write back holds the lock, so
    a `roots add|remove` and the file's deletion (or its writing back) never interleave: neither a change nor the
    copy is lost to a file read half-way through its deletion."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._lock = threading.Lock()
        self._copy = RootOverlay()

    def current(self) -> RootOverlay:
        """roots.json as it is now, or the copy while it has vanished (a copy of its own: change it freely)."""
        with self._lock:
            return self._read().copy()

    def change(self, edit: Callable[[RootOverlay], None]) -> RootOverlay:
        """Read (as `current`), `edit`, write roots.json and keep the result as the copy; returns it."""
        with self._lock:
            overlay = self._read().copy()
            edit(overlay)
            save(self._data_dir, overlay)
            self._copy = overlay
            return overlay.copy()

    def write_back(self) -> bool:
        """roots.json made again from the copy when it has vanished and there is something to keep in it."""
        with self._lock:
            if not self._copy or (self._data_dir / FILE_NAME).exists():
                return False
            save(self._data_dir, self._copy)
            return True

    def any(self) -> bool:
        """Whether roots were added or removed with ragctl (as last read or written)."""
        with self._lock:
            return bool(self._copy)

    def _read(self) -> RootOverlay:
        found = load_if_there(self._data_dir)
        if found is not None:
            self._copy = found
        return self._copy


def load(data_dir: Path) -> RootOverlay:
    """roots.json; nothing added or removed when there is none."""
    found = load_if_there(data_dir)
    return found if found is not None else RootOverlay()


def load_if_there(data_dir: Path) -> RootOverlay | None:
    """roots.json, or None when there is none (ConfigError when it cannot be read or is not ours)."""
    path = data_dir / FILE_NAME
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot read {path}: {err}", f"fix or delete {path} (roots added with ragctl)"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} is not a JSON object", f"fix or delete {path}")
    return RootOverlay([Path(p) for p in raw.get("added", [])], [Path(p) for p in raw.get("removed", [])])


def save(data_dir: Path, overlay: RootOverlay) -> None:
    payload = {"added": [str(p) for p in overlay.added], "removed": [str(p) for p in overlay.removed]}
    _write(data_dir / FILE_NAME, payload)


@dataclass(frozen=True)
class Served:
    """What served-roots.json says: the roots whose sources the index holds, and whether it holds all of them
    (`filled` is False from the start of a fill of the whole index from the sidecars until its end), and the roots
    `entering` it: added, their fill or their jobs' first writes under way, so the index may hold some of their
    sources (recorded before the first of them is written: an agent killed meanwhile, started without such a root,
    drops what it left; started with it, fills it)."""

    roots: list[Path]
    filled: bool
    entering: list[Path] = field(default_factory=list)


def load_served(data_dir: Path, index: str) -> Served | None:
    """The roots the index `index` held the sources of when the agent last changed its roots; None when there is
    no usable record (a new data directory, a record of another index, or a damaged one: the index is then filled
    again from the sidecars)."""
    path = data_dir / SERVED_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("cannot read %s (%s); the index is filled again from the sidecars", path, err)
        return None
    roots = raw.get("roots") if isinstance(raw, dict) else None
    if not isinstance(roots, list) or not all(isinstance(r, str) and r.startswith("/") for r in roots):
        log.warning("%s is not a list of roots; the index is filled again from the sidecars", path)
        return None
    if raw.get("index") != index:  # recorded for another index (the embedding model or the backend changed)
        return None
    # a record without `filled` was written by an older version, before its fill was done: not trusted
    entering = raw.get("entering")
    entering = (
        [Path(r) for r in entering if isinstance(r, str) and r.startswith("/")]
        if isinstance(entering, list)
        else []
    )
    return Served([Path(r) for r in roots], raw.get("filled") is True, entering)


def save_served(
    data_dir: Path, index: str, roots: list[Path], *, filled: bool = True, entering: Iterable[Path] = ()
) -> None:
    _write(data_dir / SERVED_FILE, {"index": index, "roots": [str(r) for r in roots], "filled": filled,
                                    "entering": sorted(str(r) for r in entering)})  # fmt: skip


def _write(path: Path, payload: Mapping[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(payload, ensure_ascii=False, indent=1) + "\n").encode(), mode=0o644)
