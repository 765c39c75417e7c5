"""`ragd status`: per-file state read from the sidecars (offline; nothing is written)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import Config, data_dir
from ..errors import ConfigError
from ..modes import display_name
from ..paths import under_any
from ..pipeline import scan, sidecar
from ..pipeline.scan import (
    PERMISSION_DENIED,
    Change,
    Ignore,
    classify,
    list_dir,
    outside_links,
    under_real_roots,
    walk_dirs,
)
from ..pipeline.sidecar import FileEntry
from ..resident import rootstate
from ..vocabulary import SHOWN
from ..vocabulary import FileState as State

Policy = Callable[[str], str]  # a file name -> what a SKIPPED verdict of it depends on (resident/jobs.py)


@dataclass(frozen=True)
class FileStatus:
    path: Path
    state: State
    reason: str = ""
    chunks: int = 0
    is_dir: bool = False
    note: str = ""  # e.g. "text from OCR (confidence 0.93; low: p. 3)"
    ocr: Mapping[str, object] | None = None  # the entry's `ocr` key, as stored

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"path": str(self.path), "state": self.state, "is_dir": self.is_dir}
        if self.reason:
            data["reason"] = self.reason
        if self.chunks:
            data["chunks"] = self.chunks
        if self.note:
            data["note"] = self.note
        if self.ocr is not None:
            data["ocr"] = dict(self.ocr)
        return data


def page_list(numbers: Sequence[object]) -> str:
    """`[1, 2, 3, 7]` -> "p. 1-3, 7" (runs of pages shortened: a 50-page scan is one range)."""
    pages = sorted(n for n in numbers if isinstance(n, int))
    runs: list[list[int]] = []
    for n in pages:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return "p. " + ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def ocr_note(entry: FileEntry) -> str:
    """What OCR did for the entry's text, in a few words ("" when it did nothing)."""
    ocr = entry.ocr or {}
    pages, not_read = ocr.get("pages") or [], ocr.get("not_read") or []
    if not pages and not not_read:
        return ""
    where = f" on {page_list(pages)}" if pages and entry.parser != "ocr" else ""  # an image: all of it
    parts = [f"confidence {float(ocr.get('confidence') or 0):.2f}"]
    if ocr.get("low_confidence_pages"):
        parts.append(f"low: {page_list(ocr['low_confidence_pages'])}")
    if not_read:
        parts.append(f"not read: {page_list([p.get('page') for p in not_read if isinstance(p, dict)])}")
    return f"text from OCR{where} ({'; '.join(parts)})"


def _file_state(
    path: Path, entry: FileEntry | None, st: scan.Stat, config: Config, policy: Policy, now: float
) -> FileStatus:
    if entry is None:
        return FileStatus(path, State.NEW)
    change = classify(entry, path, st, config.identity, lambda: policy(path.name), now)
    reason = str((entry.error or {}).get("message", ""))
    if change == Change.CHANGED:
        return FileStatus(path, State.CHANGED)
    if entry.status in (State.FAILED, State.SKIPPED):
        return FileStatus(path, State(entry.status), reason, len(entry.chunks))
    if change == Change.RETRY:
        if entry.status != State.EMBEDDED:
            return FileStatus(path, State.PENDING, f"processing stopped at {entry.status}")
        return FileStatus(
            path,
            State.STALE,
            f"embedded with {entry.model_name}/{entry.dimension} ({entry.splitter or 'unknown splitter'})",
            len(entry.chunks),
        )
    return FileStatus(path, State.EMBEDDED, chunks=len(entry.chunks), note=entry_note(entry), ocr=entry.ocr)


def entry_note(entry: FileEntry) -> str:
    """What the status says of an EMBEDDED file beside its state: what OCR did, what was read with damage."""
    notes = [n for n in (ocr_note(entry), f"with {entry.warning}" if entry.warning else "") if n]
    return "; ".join(notes)


def directory_states(
    directory: Path, config: Config, ignore: Ignore, policy: Policy, roots: tuple[Path, ...] = ()
) -> Iterator[FileStatus]:
    """`roots` (real paths): a symbolic link to a folder outside all of them is SKIPPED, as the agent reports it."""
    if scan.unreadable(directory):  # nothing in it can be listed or read: the folder stands for its files
        yield FileStatus(
            directory, State.FAILED, f"{PERMISSION_DENIED}: its files are out of search", is_dir=True
        )
        return
    listing = list_dir(directory, ignore)
    found = sidecar.load_entries(directory)
    live, deleted, unreadable = found.live, found.deleted, found.unreadable
    now = time.time()
    for name in listing.dirs:
        tracked = name in live and live[name] is None
        yield FileStatus(directory / name, State.TRACKED if tracked else State.NEW, is_dir=True)
    for name, st in sorted(listing.files.items()):
        if name in unreadable:
            yield FileStatus(directory / name, State.CHANGED, unreadable[name])
        else:
            yield _file_state(directory / name, live.get(name), st, config, policy, now)
    for name, why in sorted(
        {**listing.undecodable, **listing.special, **outside_links(listing, roots)}.items()
    ):
        yield FileStatus(
            directory / name, State.SKIPPED, why
        )  # display names: never recorded, safe in --json
    for name, entry in sorted(live.items()):
        if name not in listing.files and name not in listing.dirs:
            yield FileStatus(directory / display_name(name), State.DELETED, "not yet recorded as deleted",
                            is_dir=entry is None)  # fmt: skip
    for name in sorted(deleted - set(live) - set(listing.files) - set(listing.dirs)):
        yield FileStatus(directory / display_name(name), State.DELETED)


def entry_path(path: Path) -> Path:
    """`path` absolute as its entry is named: its folder resolved, its own name kept (a symbolic link's entry is
    its own, beside it, under the link's name, not its target's)."""
    full = Path(os.path.abspath(path.expanduser()))
    return full.parent.resolve() / full.name if full.name else full


def collect(path: Path, config: Config, *, recursive: bool, policy: Policy) -> list[FileStatus]:
    """The states of `path`'s entries: a folder's (and with `recursive` its subfolders'), or one file's or one
    symbolic link's own entry."""
    ignore = Ignore(config.ignore)
    path = entry_path(path)
    # a link shows its own entry; os.path: False (not an error) for one in a folder that cannot be read (the walk
    # says why)
    if os.path.islink(path) or os.path.isfile(path):
        roots = _roots(config, path.parent)
        return [s for s in directory_states(path.parent, config, ignore, policy, roots) if s.path == path]
    roots = _roots(config, path)
    dirs = walk_dirs(path, ignore) if recursive else iter([path])
    states: list[FileStatus] = []
    closed: list[Path] = []  # folders that cannot be read: those below them (mode 0644) are theirs
    for d in dirs:
        if not under_any(d, closed):
            states += directory_states(d, config, ignore, policy, roots)
            if states and states[-1].path == d and states[-1].is_dir and states[-1].state == State.FAILED:
                closed.append(d)
    return states


def _roots(config: Config, directory: Path) -> tuple[Path, ...]:
    """The roots as configured (with those added or removed by `ragctl roots`), real paths; a folder under none of
    them (a root given on `ragd run`'s command line) is taken as a root itself."""
    try:
        roots = rootstate.load(data_dir(config)).apply(list(config.roots))
    except ConfigError:
        roots = list(config.roots)
    known = tuple(Path(os.path.realpath(r)) for r in roots)
    return known if under_real_roots(directory, known) else (directory,)


def counts(states: list[FileStatus]) -> dict[str, int]:
    out = {str(s): 0 for s in SHOWN}  # in the order `ragd status` lists them
    for st in states:
        out[st.state] += 1
    return {k: v for k, v in out.items() if v}
