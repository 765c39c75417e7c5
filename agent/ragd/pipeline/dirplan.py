"""A directory job's plan: the folder listed and its entries read (as digests), every name classified (work,
unchanged, the change note's events), and the structure carried out before any file is read (entries of
deleted names marked, returning ones recovered, new subdirectories' entries written)."""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ..errors import StorageError
from ..modes import valid_name
from ..vocabulary import NoteStatus
from . import folder_meta, mushroom, sidecar, statcache
from .digest import Digest
from .metadata import Labels
from .mushroom import Event
from .outcome import JobContext
from .scan import (
    Change,
    Listing,
    classify,
    entry_basis,
    list_dir,
    rejudge_link,
)
from .sidecar import FileEntry
from .statcache import DirEntries

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """What a directory job found and decided before any file is read."""

    listing: Listing
    entries: dict[str, Digest | None]  # live entries by name (None: directory entry), as digests
    deleted: set[str]
    found: DirEntries  # digests and stats; whole entries are read when needed (`entry`)
    labels: Labels  # the folder defaults and metadata keys in force here
    work: list[tuple[str, Change]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # entries whose names are not valid UTF-8 (written by an older version): removed, never named in a mushroom
    stray: list[str] = field(default_factory=list)

    def entry(self, directory: Path, name: str) -> FileEntry | None:
        """The whole live entry of `name`, read now (not kept: a job over a big folder would hold every one)."""
        if name in self.found.full:
            return self.found.full[name]
        return sidecar.try_read(sidecar.entry_path(directory, name)) if self.entries.get(name) else None


# the changes that keep what a file's entry says of its content (its chunks, its state)
_KEPT = frozenset((Change.UNCHANGED, Change.TOUCHED, Change.RELABEL, Change.LEAD))


def plan_directory(ctx: JobContext, directory: Path) -> Plan:
    listing = list_dir(directory, ctx.ignore)
    labels = Labels(folder_meta.defaults_for(directory, ctx.roots), ctx.config.metadata.keys)
    found = statcache.load_dir(directory, ctx.stat_cache)
    for name, why in found.unreadable.items():
        log.warning("%s; treating %s as new", why, name)
    entries = {n: e for n, e in found.live.items() if valid_name(n)}
    plan = Plan(listing, entries, {n for n in found.deleted if valid_name(n)}, found, labels)
    plan.stray = [n for n in found.live if n not in entries]
    deleted = plan.deleted
    # A folder renamed here is a recover of the new name and a delete of the old, in one note: the recover first,
    # so that the index holds its files under the new path before it drops the old one (a search finds them
    # under one name or both meanwhile; the other way round, a 10,000-file folder was out of search for 5 s).
    for name in listing.dirs:
        if name in entries and entries[name] is None:
            continue
        if name not in entries and (name in deleted or _moved_in(directory / name)):
            plan.events.append(Event(name, NoteStatus.DIR_RECOVER))
    for name, entry in entries.items():
        is_dir_entry = entry is None
        if (is_dir_entry and name not in listing.dirs) or (not is_dir_entry and name not in listing.files):
            plan.events.append(Event(name, NoteStatus.DIR_DELETE if is_dir_entry else NoteStatus.DELETE))
    now, where, identity, basis = time.time(), path_prefix(directory), ctx.identity, labels.basis

    for name, st in listing.files.items():
        entry = entries.get(name)
        recovered = entry is None and name in deleted
        if recovered:
            full = read_deleted(directory, name)
            entry = None if full is None else Digest.of(full, name)
        change = (
            Change.RETRY
            if ctx.force
            else classify(entry, where + name, st, identity, partial(ctx.policy, name), now, basis)
        )
        # a link whose entry no longer says what the roots make of it is done again, whatever its stat says: a
        # file moved out of every root and linked back under its name keeps its inode and content (TOUCHED)
        if change in _KEPT and name in listing.links and rejudge_link(entry, listing.links[name], ctx.roots):
            change = Change.RETRY
        if change in (Change.NEW, Change.CHANGED, Change.RETRY, Change.TOUCHED, Change.RELABEL, Change.LEAD):
            plan.work.append((name, change))
        else:
            plan.unchanged.append(name)
        relabel = change == Change.TOUCHED and entry is not None and entry_basis(entry) != basis
        if (
            recovered
            or relabel
            or change in (Change.NEW, Change.CHANGED, Change.RETRY, Change.RELABEL, Change.LEAD)
        ):
            plan.events.append(Event(name, NoteStatus.UPSERT))
    return plan


def path_prefix(directory: Path) -> str:
    """`directory` as a string to which a name is appended (on the per-file path, faster than Path or join)."""
    return os.path.join(directory, "")


def _moved_in(sub: Path) -> bool:
    """A subdirectory new to this directory arrived with sidecars of its own (renamed, moved from another folder
    or root, or in from outside): its entries still match its files, so its own jobs upsert nothing, and the index
    has to re-sync its subtree. A `.rag/` that only its own first jobs are filling is not that: they announce its
    files themselves (`_announced`)."""
    return not _announced(sub)


def _announced(folder: Path) -> bool:
    """Every entry in `folder`'s store is named by the change notes pending there, or is a subfolder of which the
    same holds (a new tree filled by its own jobs; no entry at all, too). A note left behind in a folder moved
    before the writer deleted it names only the files of its change, not the folder's others."""
    live = [en.name for en in sidecar.list_entries(folder) if not en.deleted]
    if not live:
        return True
    named: set[str] = set()
    for note in mushroom.pending(folder):
        try:
            named.update(ev.file for ev in mushroom.read(note).events)
        except StorageError:  # unreadable, or gone meanwhile: it names nothing
            continue
    return all(name in named or (_is_folder(folder / name) and _announced(folder / name)) for name in live)


def _is_folder(path: Path) -> bool:
    """A folder, not a link to one (os.lstat: never raises)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_deleted(directory: Path, name: str) -> FileEntry | None:
    return sidecar.try_read(sidecar.entry_path(directory, name, deleted=True))


def apply_structure(directory: Path, plan: Plan) -> None:
    """Renames for deleted and returning names; entries for new subdirectories."""
    for name in plan.stray:  # no event can name it, and it can never be tracked again: remove it
        sidecar.entry_path(directory, name).unlink(missing_ok=True)
    for ev in plan.events:
        if ev.status in (NoteStatus.DELETE, NoteStatus.DIR_DELETE):
            sidecar.mark_deleted(directory, ev.file)
        elif ev.status == NoteStatus.DIR_RECOVER and ev.file in plan.deleted:
            sidecar.recover(directory, ev.file)
        elif ev.status == NoteStatus.DIR_RECOVER:
            sidecar.write_dir_entry(directory, ev.file)
    for name in plan.listing.dirs:
        if name not in plan.entries and not any(e.file == name for e in plan.events):
            sidecar.write_dir_entry(directory, name)
        elif name in plan.entries and plan.entries[name] is not None:
            sidecar.write_dir_entry(directory, name)  # a file became a directory of the same name
    for name in plan.listing.files:
        if name not in plan.entries and name in plan.deleted:
            sidecar.recover(directory, name)
            full = plan.found.full[name] = sidecar.try_read(sidecar.entry_path(directory, name))
            plan.entries[name] = None if full is None else Digest.of(full, name)
