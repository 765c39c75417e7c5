"""`ragd run --once`: reconcile every directory under the roots, in parallel, and summarise."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..config import Config, data_dir
from ..errors import ConfigError, IndexBusy, RagdError
from ..pipeline.dirjob import DirResult, JobContext, run_directory
from ..pipeline.embed import LazyEmbedQueue
from ..pipeline.scan import Expected, Ignore, walk_dirs
from ..pipeline.sidecar import EMBEDDED, FAILED, SKIPPED

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    roots: list[Path]
    dirs: int = 0
    dirs_done: int = 0
    embedded: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    failed_dirs: list[tuple[Path, str]] = field(default_factory=list)
    chunks: int = 0
    texts_embedded: int = 0
    vectors_reused: int = 0
    mushrooms: int = 0
    elapsed: float = 0.0
    expected: dict[str, Expected] = field(default_factory=dict, repr=False)
    index: dict[str, object] = field(default_factory=dict)  # what the index sync did (see sync_index)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.failed_dirs

    def add(self, result: DirResult) -> None:
        self.dirs_done += 1
        self.mushrooms += result.mushroom is not None
        self.expected.update(result.indexable)
        for f in result.files:
            if f.state == EMBEDDED:
                self.embedded += 1
                self.chunks += f.chunks
                self.texts_embedded += f.embedded
                self.vectors_reused += f.reused
            elif f.state == SKIPPED:
                self.skipped += 1
            elif f.state == FAILED:
                self.failed.append((result.directory / f.name, f.reason))
            else:
                self.unchanged += 1

    def to_json(self) -> dict[str, object]:
        return {
            "roots": [str(r) for r in self.roots],
            "dirs": self.dirs,
            "embedded": self.embedded,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "failed": [{"path": str(p), "reason": r} for p, r in self.failed],
            "failed_dirs": [{"path": str(p), "reason": r} for p, r in self.failed_dirs],
            "chunks": self.chunks,
            "texts_embedded": self.texts_embedded,
            "vectors_reused": self.vectors_reused,
            "mushrooms": self.mushrooms,
            "index": self.index,
            "elapsed_s": round(self.elapsed, 3),
        }


def skip_policy(config: Config) -> str:
    lim = config.limits
    return (
        f"ragd {__version__}; max_file_size={lim.max_file_size}; max_text_chars={lim.max_text_chars}; "
        f"soffice={shutil.which('soffice') is not None}"
    )


def check_roots(roots: Sequence[Path]) -> list[Path]:
    if not roots:
        raise ConfigError(
            "no roots to index",
            "name a folder: `ragd run --once ~/Documents`, or set roots in the config file",
        )
    resolved = []
    for r in roots:
        p = Path(r).expanduser().resolve()
        if not p.is_dir():
            raise ConfigError(f"root {p} is not a directory", "check the path")
        resolved.append(p)
    return resolved


Progress = Callable[[RunSummary, DirResult | None], None]


def run_once(
    config: Config,
    *,
    jobs: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
    index: bool = True,
) -> RunSummary:
    roots = check_roots(config.roots)
    started = time.monotonic()
    summary = RunSummary(roots)
    ignore = Ignore(config.ignore)
    dirs = [d for root in roots for d in walk_dirs(root, ignore)]
    summary.dirs = len(dirs)
    queue = LazyEmbedQueue(config.embedding)
    real_roots = tuple(Path(os.path.realpath(r)) for r in roots)
    ctx = JobContext(config, queue.submit, ignore, skip_policy(config), force=force, roots=real_roots)
    try:
        _run_all(ctx, dirs, jobs or config.run.jobs, summary, progress)
    finally:
        queue.close()
    if index:
        summary.index = sync_index(config, roots, dirs, summary.expected if not summary.failed_dirs else None)
    summary.elapsed = time.monotonic() - started
    return summary


def _run_all(
    ctx: JobContext, dirs: list[Path], jobs: int, summary: RunSummary, progress: Progress | None
) -> None:
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="dirjob") as pool:
        pending: dict[Future[DirResult], Path] = {pool.submit(run_directory, ctx, d): d for d in dirs}
        if progress:
            progress(summary, None)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                directory = pending.pop(fut)
                _collect(fut, directory, summary, progress)


def _collect(fut: Future[DirResult], directory: Path, summary: RunSummary, progress: Progress | None) -> None:
    try:
        result = fut.result()
    except FileNotFoundError:
        summary.dirs_done += 1  # removed while we ran: its parent's next job records the deletion
        return
    except (RagdError, OSError) as err:
        log.error("directory %s: %s", directory, err)
        summary.dirs_done += 1
        summary.failed_dirs.append((directory, str(err)))
        return
    except Exception as err:  # the per-directory boundary: record it, the other directories go on
        log.exception("internal error in the job for %s", directory)
        summary.dirs_done += 1
        summary.failed_dirs.append((directory, f"internal error: {type(err).__name__}: {err}"))
        return
    summary.add(result)
    if progress:
        progress(summary, result)


def sync_index(
    config: Config, roots: list[Path], dirs: list[Path], expected: dict[str, Expected] | None
) -> dict[str, object]:
    """Apply pending mushrooms (ours and other producers'), then check the index against the sidecars.

    When a running agent holds the index, it is left to the agent (which consumes the same mushrooms).
    """
    from ..index import open_or_rebuild
    from ..index.sync import IndexSync

    try:
        idx, rebuilt = open_or_rebuild(data_dir(config), config.identity, config.index)
    except IndexBusy as err:
        log.warning("%s; the running agent will apply the changes", err.message)
        return {"held_by_agent": True, "message": err.message}
    try:
        sync = IndexSync(idx, config.identity, roots, Ignore(config.ignore))
        report = sync.apply_pending(dirs)
        checked = sync.reconcile(expected)
        optimized = False
        if idx.needs_optimize:
            idx.optimize()
            optimized = True
        return {"mushrooms_applied": report.mushrooms, "events": report.events,
                "mushrooms_failed": [{"path": str(p), "reason": r} for p, r in report.failed],
                "repaired": checked.repaired, "rebuilt": rebuilt, "optimized": optimized,
                "chunks": idx.count(), "path": str(idx.path)}  # fmt: skip
    finally:
        idx.close()
