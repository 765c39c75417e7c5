"""The `status` verb's result (docs/protocol.md): built from memory, never from a walk of the disk."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ..pipeline.sidecar import utc_stamp

if TYPE_CHECKING:
    from ..edges.lifecycle import Lifecycle


def status_result(life: Lifecycle) -> dict[str, Any]:
    agent = life.agent
    return {
        "agent": _agent(life),
        "progress": agent.tracker.progress_json(),
        "roots": [_root(life, r) for r in list(agent.roots)] + _missing(life),
        "embedder": _embedder(life),
        "index": _index(life),
        "mcp": life.mcp.status(),
    }


def _agent(life: Lifecycle) -> dict[str, Any]:
    agent = life.agent
    state = agent.current_state()
    return {
        "version": agent.version(),
        "pid": os.getpid(),
        "started_at": utc_stamp(agent.started),
        "uptime_s": round(time.time() - agent.started, 1),
        "ready": state not in ("starting",),
        "state": state,
        "paused": agent.scheduler.paused,
        "idle": state == "idle",
        "socket": str(life.socket_path),
        "data_dir": str(agent.data_dir),
        "config": life.config.source,
        "reload_error": life.reload_error,
    }


def _root(life: Lifecycle, root: Any) -> dict[str, Any]:
    agent = life.agent
    pending, running = agent.scheduler.counts_under(root)
    summary = agent.tracker.root_summary(root)
    return {
        "path": str(root),
        "watcher": agent.watcher.mode(root),
        "pending_dirs": pending + agent.debouncer.pending_under(root),
        "running_dirs": running,
        "waiting_files": agent.waiting_files(root),
        **summary,
    }


def _missing(life: Lifecycle) -> list[dict[str, Any]]:
    return [{"path": str(r), "watcher": "off", "pending_dirs": 0, "running_dirs": 0, "files": {},
             "failures": [], "error": f"{r} {why}"} for r, why in life.agent.missing_roots.items()]  # fmt: skip


def _embedder(life: Lifecycle) -> dict[str, Any]:
    agent = life.agent
    cfg = agent.config.embedding
    stats = agent.embed.stats
    return {
        "provider": cfg.provider,
        "model": cfg.model_name,
        "dimension": cfg.dim,
        "loaded": agent.embed.loaded,
        "queued": stats.queued,
        "in_flight": stats.in_flight,
        "waiting_files": agent.waiting_files(),
        "requests": stats.requests,
        "texts": stats.texts_embedded,
        "retries": stats.retries,
        "errors": stats.failed_batches,
        "rejected": stats.rejected,
        "last_error": stats.last_error,
    }


def _index(life: Lifecycle) -> dict[str, Any]:
    agent = life.agent
    if agent.state == "starting" or not hasattr(agent, "indexer"):
        return {"state": "opening"}
    indexer = agent.indexer
    return {
        "chunks": indexer.chunks,
        "pending_mushrooms": indexer.pending(),
        "failed_mushrooms": indexer.failed(),
        "optimizing": indexer.optimizing,
        "verify": _verify(life),
        "rebuilding": agent.rebuilding,
        "path": str(indexer.index.path),
    }


def _verify(life: Lifecycle) -> dict[str, Any]:
    """When the index was last checked against the sidecars, and what was repaired (a repair means a bug)."""
    verifier = life.agent.verifier
    last = verifier.last
    return {
        "running": verifier.running,
        "passes": verifier.passes,
        "repaired_total": verifier.repaired_total,
        "last": last.to_json() if last is not None else None,
    }
