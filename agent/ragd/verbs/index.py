"""`index`: the index's statistics (with `sources`, every source with its chunk count), or a rebuild of it."""

from __future__ import annotations

from typing import Any

from .arguments import Args
from .runtime import Progress, Resident, no_progress


class IndexArgs(Args):
    rebuild: bool = False
    sources: bool = False


def index(rt: Resident, args: IndexArgs | None = None, progress: Progress = no_progress) -> dict[str, Any]:
    """The backend's stats, or after `rebuild` {"chunks", "sources", "elapsed_s"} (streaming its progress)."""
    args = args or IndexArgs()
    if args.rebuild:  # a rebuild under way is waited for, not refused
        return rt.rebuild_index(progress)
    rt.ready()
    reader = rt.reader()
    stats = reader.stats()
    if args.sources:
        stats["sources"] = sorted(reader.sources(None))
    return stats
