"""The verifier's terms with the agent: what a pass needs of it (`VerifyHooks`), what a pass says (`VerifyReport`),
and when what the index holds for a source differs from what its sidecar says (`differs`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sync import IndexSync

MAX_LISTED = 50  # paths listed in a report


@dataclass(frozen=True)
class VerifyReport:
    trigger: str  # "rescan", "periodic", "request", ...
    finished_at: str
    elapsed_s: float
    dirs: int  # directories walked
    sources: int  # sources the sidecars say the index should hold (in the directories checked)
    indexed: int  # sources the index held when the pass began
    busy_dirs: int  # skipped: a job or a change note was pending there (checked again once the agent is idle)
    notes: int  # change notes found on disk that the index writer did not know of (handed to it)
    repaired: tuple[str, ...] = ()  # sources re-synced from their sidecars
    removed: tuple[str, ...] = ()  # indexed sources with no EMBEDDED sidecar under a current root
    unreadable: tuple[str, ...] = ()  # folders that cannot be read: out of search, not compared, not repaired
    redone: tuple[
        str, ...
    ] = ()  # sources changed since their entries were written: their folders' jobs queued

    @property
    def ok(self) -> bool:
        return not self.repaired and not self.removed

    def to_json(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "finished_at": self.finished_at, "elapsed_s": self.elapsed_s,
                "dirs": self.dirs, "sources": self.sources, "indexed": self.indexed,
                "busy_dirs": self.busy_dirs, "notes": self.notes,
                "repaired": len(self.repaired), "removed": len(self.removed),
                "repaired_paths": list(self.repaired[:MAX_LISTED]),
                "removed_paths": list(self.removed[:MAX_LISTED]),
                "unreadable": list(self.unreadable[:MAX_LISTED]),
                "redone": len(self.redone), "redone_paths": list(self.redone[:MAX_LISTED])}  # fmt: skip


@dataclass(frozen=True)
class VerifyHooks:
    """What the verifier needs of the agent."""

    roots: Callable[[], list[Path]]
    write: Callable[[Callable[[IndexSync], Any]], Future[Any]]  # run on the index writer thread
    busy: Callable[[Path], bool]  # a job of this directory is queued, waiting or running
    hand_note: Callable[
        [Path], bool
    ]  # a change note found on disk: the writer applies it (False: it knew it)
    check: Callable[[], None] = lambda: None  # at a pass's start: an index that vanished is rebuilt first
    # the folders the agent holds out of search because it cannot read them
    held_out: Callable[[], set[Path]] = set
    # a folder whose readability is not what the agent holds: its job runs (and holds it out, or brings it back)
    look_at: Callable[[Path], object] = lambda _d: None
    # these sources of this directory changed since their entries were written: its job is queued
    redo: Callable[[Path, list[str]], object] = lambda _d, _names: None
