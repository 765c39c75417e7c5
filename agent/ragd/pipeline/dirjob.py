"""The directory job: reconcile one directory with its `.rag/` entries, under the directory's lock.

The only module that sequences the stages: parse -> split -> embed -> sidecar -> mushroom.

A job first plans (classifies every name), writes a mushroom announcing the planned events, then carries
the plan out and rewrites that mushroom with the final events. The index consumer takes the same lock, so it
only ever sees the final mushroom, unless the job died: then the planned events stand, and the sidecars they
point at say how far the job got (the next job picks up from there).

A big directory is made searchable as it goes (DESIGN §4.1, big folders). Given a `report` callback (the resident
agent), the job hands over what it has finished in steps, each with a change note of its own, final when it is
written: first the structure (deletions, returning and new subdirectories, unchanged files), then each round of
FILES_PER_ROUND files once all of them are recorded. The planned note keeps announcing every planned event until
the job ends (it is then rewritten with the events not handed over yet, or removed), so that at every moment each
change made and not yet applied is named by a note on disk: a round's note is written after its files' entries,
which the planned note announced before they were written; a SIGKILL leaves both, and applying both is harmless
(idempotent, order-insensitive).

The lock. The job holds the directory's lock from its plan to its end, and the index consumer takes the same lock
to apply a note, so that it never applies (and then deletes) a planned note whose changes are still being made.
A round's note is different: it announces only changes already made, that this job will not touch again, and it
re-reads the current entries when applied (an entry is replaced by a rename: whole, old or new), so applying it
does not need the lock. The job marks each note it hands over as final (`mushroom.hand_over`), and the consumer
applies a note so marked without waiting for the lock (`mushroom.is_final`): the writer thread never waits for a
running job. The job cannot release the lock between rounds instead: the planned note would then be there for the
taking (a rescan's `apply_pending`, another tool), and applied and deleted while its remaining changes are made.
Another process's job on the same directory (the ragjson tool) is still kept out by the lock for the whole job.
Nor does the writer wait for such a job's planned note (a rescan applies every note it finds, and waited for the
lock until the job's end, its rounds' notes queued behind): it leaves the note (`mushroom.held_back`), which the
agent offers it again, with the folder's other notes, once the job has ended.

Without `report` (`ragd run --once --no-index`, whose notes wait for a later sync) the job reports once, at the end.

Names that cannot be recorded (not valid UTF-8: sidecars and mushrooms are UTF-8 JSON) and entries that are not
regular files (FIFOs, sockets, devices, dangling links, link loops) are never opened nor recorded: each gets a SKIPPED
outcome with the reason, under its display name (undecodable bytes as `\\xNN`), and the rest of the directory goes
on. A directory whose own path is not valid UTF-8 is not tracked: its parent's job reports it SKIPPED.

This module holds the job and its steps; dirplan.py the plan and the structure it carries out, rounds.py the
files in rounds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import modes
from ..modes import valid_name
from ..vocabulary import FileState, NoteStatus
from . import mushroom, sidecar, statcache
from .dirplan import Plan, apply_structure, path_prefix, plan_directory
from .mushroom import Event
from .outcome import VANISHED, FileOutcome, JobContext
from .rounds import FILES_PER_ROUND, run_files
from .scan import (
    Change,
    Expected,
    FileStat,
    Listing,
    Shared,
    indexable,
    outside_links,
    shared_files,
)

__all__ = ["DirResult", "FileOutcome", "JobContext", "run_directory"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DirResult:
    directory: Path
    files: tuple[FileOutcome, ...] = ()
    subdirs: tuple[Path, ...] = ()
    events: tuple[Event, ...] = ()
    mushroom: Path | None = None
    indexable: dict[str, Expected] = field(default_factory=dict)  # what the index should hold, by source path
    new_subdirs: tuple[Path, ...] = ()  # subdirectories this job began tracking (new, moved in or recovered)
    shared: tuple[Shared, ...] = ()  # its files that another path can change (symbolic and hard links)
    # its store held no entry as the job began: none made yet (a new folder), or gone with the folder (replaced by
    # another of the same name) or with `.rag/` alone, while the agent did not look: the index may hold sources
    # below it that no job can name any more (`IndexSync.prune_gone`)
    storeless: bool = False
    # A job that reports in steps (`report`): `step` numbers its reports from 1, its result being the last (0: it
    # reported nothing before its result, which names every file); `planned`: the files it names in all
    step: int = 0
    planned: int = 0
    retries: tuple[
        str, ...
    ] = ()  # (in the result of a job that reported in steps) its FAILED files' retry times


Report = Callable[[DirResult], object]


def run_directory(ctx: JobContext, directory: Path, report: Report | None = None) -> DirResult:
    """Reconcile `directory` with its sidecars. Per-file failures are recorded, never raised. Given `report`, what
    is done is reported (and its change note handed over) in steps as the job goes, each step's result passed to
    `report` under the directory's lock; the returned result then holds only what no step reported."""
    if not valid_name(str(directory)):
        log.debug("%s is not tracked: its path is not valid UTF-8", modes.display_name(str(directory)))
        return DirResult(directory)
    with sidecar.DirLock(directory):
        plan = plan_directory(ctx, directory)
        fresh = tuple(
            directory / d for d in plan.listing.dirs if not (d in plan.entries and plan.entries[d] is None)
        )
        note = mushroom.write(directory, plan.events) if plan.events else None
        steps = _Steps(ctx, directory, plan, report)
        if steps.on:  # the writer does not wait for the planned note meanwhile (`mushroom.held_back`)
            mushroom.working(directory, True)
        try:
            apply_structure(directory, plan)
            outcomes = [_unchanged(directory, n, plan, ctx) for n in plan.unchanged]
            outcomes += _not_tracked(directory, plan.listing, ctx.roots)
            outcomes = steps.structure(outcomes)
            outcomes += run_files(ctx, directory, plan, steps.round)
            gone = _unrecorded(outcomes)
            final = [ev for ev in steps.left() if ev.status != NoteStatus.UPSERT or ev.file not in gone]
            final += _done_again(steps.touched, outcomes)
            note = _finish_mushroom(directory, note, plan.events, final)
        finally:
            mushroom.release(steps.notes)
            if steps.on:
                mushroom.working(directory, False)
        changed = {n for n, _ in plan.work} | {ev.file for ev in plan.events}
        statcache.keep(ctx.stat_cache, directory, plan.found, changed)
    subdirs = tuple(directory / d for d in plan.listing.dirs)
    expected = _expected(ctx, directory, plan, outcomes)
    storeless = not (plan.found.live or plan.found.deleted or plan.found.unreadable)
    return DirResult(directory, tuple(outcomes), subdirs, tuple(final), note, expected, fresh,
                     step=steps.step + 1 if steps.step else 0, retries=tuple(steps.retries),
                     shared=shared_files(plan.listing), storeless=storeless)  # fmt: skip


class _Steps:
    """What a job reporting in steps (`report`) has handed over so far: the names its notes announced, the notes
    (final, marked so until the job ends), and its FAILED files' retry times; and the files its plan found only
    touched (`touched`, for `_done_again`)."""

    def __init__(self, ctx: JobContext, directory: Path, plan: Plan, report: Report | None) -> None:
        self._ctx, self._dir, self._plan, self._report = ctx, directory, plan, report
        self.touched = _touched_only(plan)
        self._handed: set[str] = set()
        self.notes: list[Path] = []
        self.retries: list[str] = []
        self.step = 0
        # a tuple each: most files have one event, and a big folder's job holds them for 100,000 files
        self._by_name: dict[str, tuple[Event, ...]] = {}
        for ev in plan.events:
            self._by_name[ev.file] = (*self._by_name.get(ev.file, ()), ev)

    @property
    def on(self) -> bool:
        return self._report is not None and len(self._plan.work) > FILES_PER_ROUND

    def structure(self, outcomes: list[FileOutcome]) -> list[FileOutcome]:
        """The first step, before any file is read: what the plan made final (entries of deleted or returning
        names, subdirectories) and the files found unchanged. Returns what is left to report at the end."""
        if not self.on:
            return outcomes
        work = {n for n, _ in self._plan.work}
        self._hand([ev for ev in self._plan.events if ev.file not in work], outcomes)
        return []

    def round(self, outcomes: list[FileOutcome]) -> list[FileOutcome]:
        """A round's files, all recorded: reported, with a note for their events. Returns what is left to report."""
        if not self.on:
            return outcomes
        names = [f.name for f in outcomes if f.name not in self._handed]
        by_name, gone = self._by_name, _unrecorded(outcomes)
        events = [
            ev for n in names for ev in by_name.get(n, ()) if ev.status != NoteStatus.UPSERT or n not in gone
        ]
        self._hand(events + _done_again(self.touched, outcomes), outcomes)
        self._handed.update(names)  # an upsert of a file gone before its entry was written is in no note
        return []

    def left(self) -> list[Event]:
        """The planned events no step handed over."""
        return [ev for ev in self._plan.events if ev.file not in self._handed]

    def _hand(self, events: list[Event], outcomes: list[FileOutcome]) -> None:
        assert self._report is not None
        note = mushroom.write(self._dir, events) if events else None
        if note is not None:
            mushroom.hand_over(note)
            self.notes.append(note)
        self._handed.update(ev.file for ev in events)
        self.retries += [f.retry_at for f in outcomes if f.final_state == FileState.FAILED and f.retry_at]
        self.step += 1
        listing = self._plan.listing
        planned = len(listing.files) + len(listing.undecodable) + len(listing.special)
        expected = _expected(self._ctx, self._dir, self._plan, outcomes)
        self._report(DirResult(self._dir, tuple(outcomes), events=tuple(events), mushroom=note, indexable=expected,
                               step=self.step, planned=planned))  # fmt: skip


def _expected(
    ctx: JobContext, directory: Path, plan: Plan, outcomes: list[FileOutcome]
) -> dict[str, Expected]:
    out: dict[str, Expected] = {}
    where, identity = path_prefix(directory), ctx.identity
    for f in outcomes:
        path = where + f.name
        if f.state in (FileState.EMBEDDED, FileState.TOUCHED, FileState.RELABELED) and f.md5:
            out[path] = Expected(f.md5, f.chunks)
        elif f.state == FileState.UNCHANGED:
            entry = plan.entries.get(f.name)
            if entry is not None and indexable(entry, identity):
                out[path] = Expected(entry.source.md5_hash, entry.chunk_count)
    return out


def _unchanged(directory: Path, name: str, plan: Plan, ctx: JobContext) -> FileOutcome:
    entry = plan.entries.get(name)
    _keep_private(directory, name, plan.listing.files[name], plan.found.modes.get(name))
    if entry is None:
        return FileOutcome(name, FileState.UNCHANGED, recorded=FileState.EMBEDDED)
    src = entry.source
    known = ctx.identify(str(directory / name), src.md5_hash, entry.document_id, True)
    error = entry.error or {}
    embedded = entry.status == FileState.EMBEDDED
    return FileOutcome(name, FileState.UNCHANGED, recorded=FileState(entry.status), chunks=entry.chunk_count if embedded else 0,
                       reason="" if embedded else str(error.get("message", "")),
                       retry_at=None if embedded else error.get("retry_at"), md5=src.md5_hash,
                       document_id=known, size=src.size_bytes, parser=entry.parser,
                       recorded_at=entry.modify_dt)  # fmt: skip


def _keep_private(directory: Path, name: str, st: FileStat, now: modes.Mode | None) -> None:
    """Narrow an entry written more readable than its source (by an older version or another tool); `now`: the
    entry's mode and group, if its stat was taken already."""
    try:
        modes.restrict(os.path.join(directory, sidecar.RAG_DIR, name + sidecar.ENTRY_SUFFIX), st, now)
    except OSError as err:
        log.warning(
            "cannot narrow the permissions of the entry of %s: %s", directory / name, err.strerror or err
        )


def _not_tracked(directory: Path, listing: Listing, roots: tuple[Path, ...]) -> list[FileOutcome]:
    for name, why in listing.undecodable.items():  # only a rename by the user helps: say so in the log too
        log.warning("%s/%s: %s", directory, name, why)
    skipped = {**listing.undecodable, **listing.special, **outside_links(listing, roots)}
    return [FileOutcome(name, FileState.SKIPPED, reason=why) for name, why in skipped.items()]


def _unrecorded(outcomes: list[FileOutcome]) -> set[str]:
    """The files that went before their entries were written (vanished, abandoned): their planned upserts are in no
    note. Asked of the outcome, not of the file system: a file whose entry was written and that is away for a moment
    at the hand-over (a `git checkout` deletes and writes it again, the same text) keeps its upsert, or its entry is
    never applied (its next job finds it only touched, with no change note; found by the soak)."""
    return {f.name for f in outcomes if f.reason == VANISHED or f.state == FileState.ABANDONED}


def _touched_only(plan: Plan) -> set[str]:
    """The files planned as only touched (a new stat, the same md5), with no upsert in the plan's note. Once a job
    (not once a round: for a big folder's 469 rounds, that was the whole plan read 469 times)."""
    announced = {ev.file for ev in plan.events if ev.status == NoteStatus.UPSERT}
    return {name for name, change in plan.work if change == Change.TOUCHED and name not in announced}


def _done_again(touched: set[str], outcomes: list[FileOutcome]) -> list[Event]:
    """Upserts for the files planned as only touched (`_touched_only`: no change note) that were edited before the
    job got to them (FileTask._edited_since) and so were done again whole: their new entries need a note as any
    change does, or the index keeps their old text."""
    if not touched:
        return []
    done = (FileState.EMBEDDED, FileState.SKIPPED, FileState.FAILED)
    return [Event(f.name, NoteStatus.UPSERT) for f in outcomes if f.name in touched and f.state in done]


def _finish_mushroom(
    directory: Path, note: Path | None, planned: list[Event], final: list[Event]
) -> Path | None:
    if final == planned:
        return note
    if not final:
        if note is not None:
            note.unlink(missing_ok=True)
        return None
    return mushroom.rewrite(note, final) if note is not None else mushroom.write(directory, final)
