"""`status`: the running agent at a glance (docs/protocol.md), built from memory, never from a walk of the disk.

With `watch`, a status line is streamed every `interval` seconds until the caller goes away or the agent stops.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TypedDict

from pydantic import Field

from ..access import scope
from ..access.status import limit_status
from ..pipeline.parse.ocr import unavailable as ocr_unavailable
from ..pipeline.sidecar import utc_stamp
from .arguments import Args
from .runtime import Progress, Resident, no_progress


class StatusArgs(Args):
    watch: bool = False
    interval: float = Field(default=1.0, gt=0, le=3600)


class Status(TypedDict):
    agent: dict[str, Any]
    progress: dict[str, Any]
    roots: list[dict[str, Any]]
    embedder: dict[str, Any]
    parse: dict[str, Any]
    history: dict[str, Any]
    index: dict[str, Any]
    mcp: dict[str, Any]
    health: dict[str, Any]


def status(rt: Resident, args: StatusArgs | None = None, progress: Progress = no_progress) -> Status:
    args = args or StatusArgs()
    if args.watch:
        while progress(snapshot(rt)) and not _stopped_within(rt, max(0.1, args.interval)):
            pass
    return snapshot(rt)


def _stopped_within(rt: Resident, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if rt.host.stopping():
            return True
        time.sleep(min(0.1, seconds))
    return rt.host.stopping()


def snapshot(rt: Resident) -> Status:
    """The status as the current caller may see it (access scope: docs/access.md)."""
    return limit_status(_snapshot(rt), scope())  # type: ignore[return-value]


def _snapshot(rt: Resident) -> Status:
    return {
        "agent": _agent(rt),
        "progress": rt.tracker.progress_json(),
        "roots": [_root(rt, r) for r in list(rt.roots)] + _missing(rt),
        "embedder": _embedder(rt),
        "parse": _parse(rt),
        "history": _history(rt),
        "index": _index(rt),
        "mcp": rt.host.mcp_status(),
        "health": {name: cap.to_json() for name, cap in rt.health.check(rt).items()},
    }


def _agent(rt: Resident) -> dict[str, Any]:
    state = rt.current_state()
    return {
        "version": rt.version(),
        "pid": os.getpid(),
        "started_at": utc_stamp(rt.started),
        "uptime_s": round(time.time() - rt.started, 1),
        "ready": state != "starting",
        "state": state,
        "paused": rt.scheduler.paused,
        "idle": state == "idle",
        "socket": str(rt.host.socket_path),
        "data_dir": str(rt.data_dir),
        "data_dir_rebuilt": rt.data_dir_rebuilt,  # deleted or replaced while running: {"at", "lost", "done"}
        "config": rt.config.source,
        "reload_error": rt.host.reload_error,
    }


def _root(rt: Resident, root: Path) -> dict[str, Any]:
    pending, running = rt.scheduler.counts_under(root)
    return {
        "path": str(root),
        "watcher": rt.watch_mode(root),
        "pending_dirs": pending + rt.debouncer.pending_under(root),
        "running_dirs": running,
        "waiting_files": rt.waiting_files(root),
        **rt.tracker.root_summary(root),
    }


def _missing(rt: Resident) -> list[dict[str, Any]]:
    return [{"path": str(r), "watcher": "off", "pending_dirs": 0, "running_dirs": 0, "files": {},
             "failures": [], "error": f"{r} {why}"} for r, why in rt.missing_roots.items()]  # fmt: skip


def _embedder(rt: Resident) -> dict[str, Any]:
    cfg = rt.config.embedding
    stats = rt.embed.stats
    return {
        "provider": cfg.provider,
        "model": cfg.model_name,
        "dimension": cfg.dim,
        "loaded": rt.embed.loaded,
        "queued": stats.queued,
        "in_flight": stats.in_flight,
        "waiting_files": rt.waiting_files(),
        "requests": stats.requests,
        "texts": stats.texts_embedded,
        "retries": stats.retries,
        "errors": stats.failed_batches,
        "rejected": stats.rejected,
        "last_error": stats.last_error,
    }


def _parse(rt: Resident) -> dict[str, Any]:
    options = rt.config.parse
    off = ocr_unavailable(options)
    return {
        "ocr": off is None,
        "ocr_off": off,
        "ocr_page_timeout": options.ocr_page_timeout,
        "ocr_max_pages": options.ocr_max_pages,
        "ocr_min_confidence": options.ocr_min_confidence,
    }


def _history(rt: Resident) -> dict[str, Any]:
    try:
        return rt.history.summary()
    except Exception as err:  # sqlite3.Error, or closed while stopping: the rest of the status still answers
        return {"error": str(err)}


def _index(rt: Resident) -> dict[str, Any]:
    writer = rt.writer
    if writer is None:
        return {"state": "opening"}
    return {
        "chunks": writer.chunks,
        "pending_mushrooms": writer.pending(),
        "failed_mushrooms": writer.failed(),
        "optimizing": writer.optimizing,
        "resting": writer.index.resting,
        "verify": _verify(rt),
        "rebuilding": rt.rebuilding,
        "path": str(writer.index.path),
        "backend": writer.index.health(),
    }


def _verify(rt: Resident) -> dict[str, Any]:
    """When the index was last checked against the sidecars, and what was repaired (a repair means a bug)."""
    verifier = rt.verifier
    last = verifier.last
    return {
        "running": verifier.running,
        "passes": verifier.passes,
        "repaired_total": verifier.repaired_total,
        "last": last.to_json() if last is not None else None,
    }


def busy(rt: Resident) -> dict[str, Any]:
    """The short line streamed while a caller waits: what is still to do."""
    pending, running = rt.dirs_to_do()
    stats = rt.embed.stats
    writer = rt.writer
    prog = rt.tracker.progress
    return {"pending_dirs": pending, "running_dirs": running,
            "queued_texts": stats.queued + stats.in_flight,
            "pending_mushrooms": writer.pending() if writer is not None else 0,
            "phase": prog.phase, "dirs_done": prog.dirs_done, "dirs_total": prog.dirs_total}  # fmt: skip
