"""`sync`: run the jobs of a root's (or a path's) directories now, as a phase followed by a verification."""

from __future__ import annotations

import time
from typing import TypedDict

from pydantic import Field

from ..pipeline.scan import walk_dirs
from .arguments import Args, under_a_root
from .runtime import Progress, Resident, no_progress
from .wait import until_idle


class Synced(TypedDict, total=False):
    scheduled: int  # directory jobs run
    waited_s: float  # with `wait`


class SyncArgs(Args):
    path: str | None = None
    force: bool = False
    wait: bool = False
    timeout: float | None = Field(default=None, ge=0)


def sync(rt: Resident, args: SyncArgs | None = None, progress: Progress = no_progress) -> Synced:
    """{"scheduled": directories} (+ "waited_s" with `wait`). `force` re-processes unchanged files too."""
    args = args or SyncArgs()
    rt.ready()
    since = time.monotonic()
    path = under_a_root(args.path, rt.roots)
    if path is not None and path.is_file():
        dirs = [path.parent]
    else:
        tops = [path] if path is not None else list(rt.roots)
        dirs = [d for t in tops if t.is_dir() for d in walk_dirs(t, rt.ignore)]
    rt.embed.try_now()  # an embeddings API held down after an outage: a person asks to try it now
    rt.run_dirs(dirs, "sync", force=args.force)
    result: Synced = {"scheduled": len(dirs)}
    if args.wait:
        result.update(until_idle(rt, args.timeout, since, progress))
    return result
