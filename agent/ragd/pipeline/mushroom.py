"""Mushrooms: durable JSON-lines change notes from the sidecars to the index (DESIGN §3.2).

A mushroom lives in `D/.rag/` and lists events for names in D:
    {"file": "<name in D>", "status": "upsert" | "delete" | "dir_delete" | "dir_recover"}
Names sort in creation order and are unique across writers in the same second:
    20261130T152551.123456Z-<pid>-<seq>.mushroom
(the ragjson tool's `20261130T152551Z.mushroom` names are read too, and sort with ours).
Mushrooms are written 0600: only the index consumer (this agent, or the ragjson tool of the same user) reads them.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import StorageError
from ..modes import valid_name
from ..vocabulary import FOLDER_STATUSES, STATUSES
from .sidecar import rag_dir, write_atomic

SUFFIX = ".mushroom"
MODE = 0o600

_seq = itertools.count()
_last_lock = threading.Lock()
_last_us = 0
# Notes a directory job of this process wrote final and handed over while it still holds the directory's lock
# (dirjob.py, big folders): each announces only changes made, so the index consumer applies it without the lock.
_final: set[Path] = set()
_final_lock = threading.Lock()
_working: dict[Path, int] = {}  # directories whose job in this process holds the lock (how many: nested uses)


@dataclass(frozen=True, slots=True)  # a big folder's job holds one for each of its files
class Event:
    file: str
    status: str

    def to_line(self) -> str:
        return json.dumps({"file": self.file, "status": self.status}, ensure_ascii=False)


@dataclass(frozen=True)
class Mushroom:
    path: Path
    events: tuple[Event, ...]

    @property
    def directory(self) -> Path:
        return self.path.parent.parent


def _now_us() -> int:
    """Microseconds since the epoch, strictly increasing within this process."""
    global _last_us
    with _last_lock:
        now = max(time.time_ns() // 1000, _last_us + 1)
        _last_us = now
        return now


def new_name() -> str:
    us = _now_us()
    stamp = datetime.fromtimestamp(us // 1_000_000, UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}.{us % 1_000_000:06d}Z-{os.getpid()}-{next(_seq)}{SUFFIX}"


def sort_key(name: str) -> tuple[str, str]:
    """Order both name forms by time: `…T163032Z` (ragjson tool) sorts as `…T163032.000000Z`."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    stamp, _, rest = stem.partition("Z")
    if "." not in stamp:
        stamp += ".000000"
    return stamp, rest


def coalesce(events: Iterable[Event]) -> list[Event]:
    """Keep the last event per name and kind (a folder's events, a file's), in the order they were last seen.

    A name that changed kind keeps one event of each: a folder replaced by a file of its name is `dir_delete`
    then `upsert`, and the folder's subtree must still leave the index when the file's event is applied."""
    last: dict[tuple[str, bool], Event] = {}
    for ev in events:
        key = (ev.file, ev.status in FOLDER_STATUSES)
        last.pop(key, None)
        last[key] = ev
    return list(last.values())


def write(directory: Path, events: Iterable[Event]) -> Path | None:
    """Write one mushroom for `directory` (caller holds its DirLock). None when there is nothing to say."""
    evs = coalesce(events)
    if not evs:
        return None
    for ev in evs:
        if ev.status not in STATUSES:
            raise ValueError(f"unknown mushroom status {ev.status!r}")
        if not valid_name(ev.file):
            raise ValueError(f"a mushroom cannot name {ev.file!r}: not valid UTF-8")
    return write_atomic(directory, new_name(), payload(evs), mode=MODE)


def rewrite(path: Path, events: Iterable[Event]) -> Path:
    """Replace the events of the mushroom at `path` (caller holds its directory's DirLock)."""
    return write_atomic(path.parent.parent, path.name, payload(coalesce(events)), mode=MODE)


def hand_over(path: Path) -> None:
    """Mark the note at `path` final: every change it announces is made, and its writer, which holds the
    directory's lock, makes none more to the names it lists until it ends (then `release`)."""
    with _final_lock:
        _final.add(path)


def is_final(path: Path) -> bool:
    """A note handed over by a job still running (`hand_over`): it may be applied without the directory's lock."""
    with _final_lock:
        return path in _final


def release(paths: Iterable[Path]) -> None:
    """The job that handed these notes over ends (its lock is released): the consumer takes the lock again."""
    with _final_lock:
        _final.difference_update(paths)


def working(directory: Path, on: bool) -> None:
    """A job of this process takes (`on`) or leaves the lock of `directory`."""
    with _final_lock:
        n = _working.get(directory, 0) + (1 if on else -1)
        if n > 0:
            _working[directory] = n
        else:
            _working.pop(directory, None)


def held_back(path: Path) -> bool:
    """A note the consumer would wait for: not final, in a directory a job of this process works on (the job
    offers its folder's notes to the writer when it ends, dirjob.py)."""
    with _final_lock:
        return path not in _final and path.parent.parent in _working


def payload(events: Iterable[Event]) -> bytes:
    return "".join(ev.to_line() + "\n" for ev in events).encode("utf-8")


def read(path: Path) -> Mushroom:
    """Parse a mushroom. Blank lines are ignored; a malformed line raises StorageError (the file is kept)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise StorageError(f"cannot read mushroom {path}: {err}", "it is retried on the next sync") from None
    events = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            ev = Event(str(raw["file"]), str(raw["status"]))
        except (ValueError, KeyError, TypeError):
            raise StorageError(f"malformed line {n} in mushroom {path}", "fix or remove the file") from None
        if ev.status not in STATUSES:
            raise StorageError(
                f"unknown status {ev.status!r} at line {n} of mushroom {path}", "fix or remove the file"
            )
        events.append(ev)
    return Mushroom(path, tuple(events))


def pending(directory: Path) -> list[Path]:
    """Mushrooms waiting in directory/.rag/, oldest first (none seen in a folder the agent cannot read: they wait
    there until it can)."""
    try:
        names = [n for n in os.listdir(rag_dir(directory)) if n.endswith(SUFFIX)]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    return [rag_dir(directory) / n for n in sorted(names, key=sort_key)]


def walk_pending(dirs: Iterable[Path]) -> Iterator[Path]:
    """The pending notes of `dirs`, each folder's once however often it is named (a big folder's job reports a
    round at a time: a caller gathering the folders reported names it once per round)."""
    for d in dict.fromkeys(dirs):
        yield from pending(d)


def writer_pid(name: str) -> int | None:
    """The pid in one of our mushroom names (`…Z-<pid>-<seq>.mushroom`); None for other producers' names."""
    rest = sort_key(name)[1]
    parts = rest.split("-")
    if len(parts) == 3 and parts[0] == "" and parts[1].isdigit() and parts[2].isdigit():
        return int(parts[1])
    return None
