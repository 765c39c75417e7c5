"""`ragd run --once`: reconcile every directory under the roots once, in parallel, and summarise.

The resident agent's parts without the watcher and the debouncer: the walk queues every directory on a `Scheduler`,
each job's outcome goes through the shared boundary (`jobs.Outcomes`) into a phase of a `Tracker`, and once the
scheduler is idle the index is synced (`sync_index`). The summary is a view of that phase's tally.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from .. import heap
from ..config import Config, data_dir
from ..errors import ConfigError, IndexBusy, IndexUnavailable
from ..index.keyword import worker_cut
from ..paths import root_problem
from ..pipeline import mushroom
from ..pipeline.dirjob import DirResult, JobContext, run_directory
from ..pipeline.embed import MODELS, LazyEmbedQueue
from ..pipeline.scan import Expected, Ignore, walk_dirs
from ..pipeline.statcache import StatCache
from ..pipeline.workers import Parsers
from . import checked
from .ahead import IndexAhead, Opened
from .history import History, open_history
from .jobs import Outcomes, job_context
from .phase import PhaseTally
from .scheduler import Scheduler, job_slots
from .tracker import Tracker

log = logging.getLogger(__name__)

PHASE = "once"


@dataclass(frozen=True)
class RunSummary:
    """What a run did, as the console prints it and `--json` emits it: a view of the tracker's phase."""

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
    index: dict[str, object] = field(default_factory=dict)  # what the index sync did (see sync_index)
    leads: int = 0  # unchanged entries of an earlier ragd given their lead

    @classmethod
    def of(
        cls,
        phase: PhaseTally,
        roots: list[Path],
        *,
        elapsed: float = 0.0,
        index: dict[str, object] | None = None,
    ) -> RunSummary:
        t = phase.tally
        failed_dirs = [(Path(p), reason) for p, reason in phase.failed_dirs]
        return cls(roots, phase.dirs_total, phase.dirs_done, t.embedded, t.unchanged, t.skipped, t.failed,
                   failed_dirs, t.chunks, t.texts_embedded, t.vectors_reused, t.mushrooms, elapsed,
                   index or {}, t.leads)  # fmt: skip

    @property
    def ok(self) -> bool:
        return not self.failed and not self.failed_dirs

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
            "leads": self.leads,
            "index": self.index,
            "elapsed_s": round(self.elapsed, 3),
        }


def check_roots(roots: Sequence[Path]) -> list[Path]:
    if not roots:
        raise ConfigError(
            "no roots to index",
            "name a folder: `ragd run --once ~/Documents`, or set roots in the config file",
        )
    resolved = []
    for r in roots:
        p = Path(r).expanduser().resolve()
        problem = root_problem(p)
        if problem is not None:
            raise ConfigError(f"root {p} {problem}", "check the path and its permissions")
        resolved.append(p)
    return resolved


Progress = Callable[[RunSummary, DirResult | None], None]
Report = Callable[[DirResult | None], None]


def run_once(
    config: Config,
    *,
    jobs: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
    index: bool = True,
) -> RunSummary:
    roots = check_roots(config.roots)
    if index:
        _check_index(config)
    heap.settle()  # the imports done (the index's too)
    started = time.monotonic()
    ignore = Ignore(config.ignore)
    dirs = [d for root in roots for d in walk_dirs(root, ignore)]
    tracker = Tracker()
    tracker.start_phase(PHASE, expected=index)
    tracker.add_to_phase(dirs)
    home = data_dir(config)
    queue = LazyEmbedQueue(config.embedding, run=config.run, models=home / MODELS)
    cut = worker_cut(config.index.backend) if index else None
    parsers = Parsers(config.run, config.limits, config.parse, cut=cut)
    parsers.when_used(queue.prepare)  # a file to parse: maybe texts to embed soon
    cache = StatCache.load(home)
    history = open_history(config, home)
    ahead = IndexAhead(config, roots) if index else None
    try:
        ctx = job_context(config, queue.submit, ignore, roots, force=force, stat_cache=cache, parsers=parsers,
                          identify=history.identify, moved_from=history.left_from)  # fmt: skip
        report = _reporter(progress, tracker, roots)
        slots = job_slots(jobs or config.run.jobs, config.embedding.provider)
        # with the bundled model the main process has CPU to spare while the workers embed; with an API it is the
        # bound, and an English-only run would build a dictionary it never uses; with the workers cutting the
        # chunks' words, the writer cuts only what they did not (a dictionary built at the first Chinese one)
        warm = index and config.embedding.provider == "local" and cut is None
        _run_all(ctx, Outcomes(tracker, ignore), dirs, slots, report, history, queue, ahead, warm_words=warm)
    except BaseException:
        if ahead is not None:
            ahead.abandon()
        parsers.close()
        raise
    finally:
        queue.close()
        history.close()
    # the parse workers stop while the index takes the last change notes: their pool's stop is mostly waiting
    # (~0.2 s of the pool's own polling), which the run's end no longer waits for first
    with ThreadPoolExecutor(1, thread_name_prefix="parsers-close") as closer:
        closed = closer.submit(parsers.close)
        cache.save()
        phase = tracker.phase_tally()
        synced: dict[str, object] = {}
        if index:
            opened = ahead.finish() if ahead is not None else None
            synced = sync_index(
                config, roots, dirs, phase.expected if not phase.failed_dirs else None, opened
            )
        closed.result()
    return RunSummary.of(phase, roots, elapsed=time.monotonic() - started, index=synced)


def _check_index(config: Config) -> None:
    """A Milvus server too old for ragd, or a collection not made as ragd needs it, refuses the run before any file is
    parsed or embedded (IndexError_), not at its end; a server that does not answer does not (the sidecars are
    written and the change notes wait for it)."""
    from ..index import check_index

    said = check_index(data_dir(config), config.identity, config.index)
    if said is not None:
        log.debug("index: %s", said)


def _reporter(progress: Progress | None, tracker: Tracker, roots: list[Path]) -> Report:
    if progress is None:
        return lambda _result: None
    return lambda result: progress(RunSummary.of(tracker.phase_tally(), roots), result)


def _run_all(ctx: JobContext, outcomes: Outcomes, dirs: list[Path], slots: tuple[int, int | None],
             report: Report, history: History, queue: LazyEmbedQueue, ahead: IndexAhead | None, *,
             warm_words: bool) -> None:  # fmt: skip
    """Every directory's job on the scheduler, each outcome through the shared boundary; back once all are done.

    `ahead`: once texts go to the embedder, the index is opened and each finished folder's change notes applied
    while the others run (ahead.py); a big folder's job then hands its files over in rounds, as the agent's do
    (dirjob.py), so that its notes are applied while it goes on. `warm_words`: once texts go to the embedder (the index will be written at the end), the keyword index's
    Chinese dictionary is built in a thread meanwhile, not at the end, where the run waits for it (words.warm)."""
    lock = threading.Lock()

    def done(directory: Path, result: DirResult | None, err: BaseException | None) -> None:
        with lock:  # the console hears of one outcome at a time, each with the tally up to it
            outcomes.done(directory, result, err)
            if result is not None:
                history.record(result)
            report(result)
        if ahead is not None:
            ahead.dir_done(directory)

    def step(directory: Path, result: DirResult) -> None:  # a big folder's job reports a round of its files
        with lock:
            outcomes.step(result)
            history.record(result)
            report(result)
        if ahead is not None:
            ahead.dir_done(directory)

    def job(directory: Path) -> DirResult:
        return run_directory(ctx, directory, partial(step, directory) if ahead is not None else None)

    scheduler = Scheduler(job, done, *slots)

    def used() -> None:  # texts to embed: more jobs at a time with an embeddings API
        scheduler.widen()
        if ahead is not None:
            ahead.start()
        if warm_words:
            threading.Thread(target=_warm_words, name="words-warm", daemon=True).start()

    queue.when_used(used)
    report(None)
    try:
        scheduler.enqueue(dirs, urgent=False)
        scheduler.wait_idle()
    except KeyboardInterrupt:
        log.warning("interrupted: finishing the directories under way (Ctrl-C again stops them now)")
        raise
    finally:  # no other job starts; those running finish (a second Ctrl-C closes the embedder under them)
        scheduler.close(timeout=None)


def _warm_words() -> None:
    from ..index.keyword import words

    try:
        words.warm()
    except Exception as err:  # the thread's boundary: the index sync meets the same error and reports it
        log.debug("could not build the keyword dictionary ahead: %s", err)


def sync_index(
    config: Config,
    roots: list[Path],
    dirs: list[Path],
    expected: dict[str, Expected] | None,
    opened: Opened | None = None,
) -> dict[str, object]:
    """Apply pending mushrooms (ours and other producers'), then check the index against the sidecars.

    When a running agent holds the index, it is left to the agent (which consumes the same mushrooms). When there
    is nothing to sync and the index is as the last check left it, it is not opened (`checked.py`). `opened`: the
    index as the run's jobs left it (ahead.py), with what was applied to it meanwhile.
    """
    home = data_dir(config)
    if config.index.backend != "zvec":  # a shared index changes without this machine knowing: always checked
        return _open_and_sync(config, roots, dirs, expected, opened)
    if opened is None:  # (the thread that opened it ahead forgot the record before its first write)
        if expected is not None and next(mushroom.walk_pending(dirs), None) is None:
            known = checked.unchanged(home, config.identity, roots, expected)
            if known is not None:
                return known
        checked.forget(home, config.identity)
    report = _open_and_sync(config, roots, dirs, expected, opened)
    chunks = report.get("chunks")
    clean = not any(report.get(k) for k in ("mushrooms_failed", "repaired", "filled", "rebuilt"))
    if expected is not None and report.get("opened") and clean and isinstance(chunks, int):
        checked.remember(home, config.identity, roots, expected, chunks)  # the index equalled the sidecars
    return report


def _open_and_sync(
    config: Config,
    roots: list[Path],
    dirs: list[Path],
    expected: dict[str, Expected] | None,
    opened: Opened | None = None,
) -> dict[str, object]:
    from ..index import open_or_rebuild

    if opened is None:
        try:
            idx, rebuilt = open_or_rebuild(data_dir(config), config.identity, config.index)
        except IndexBusy as err:
            log.warning("%s; the running agent will apply the changes", err.message)
            return {"held_by_agent": True, "message": err.message}
        try:
            opened = Opened(idx, rebuilt, idx.count() == 0)
        except IndexUnavailable as err:
            idx.close()
            return _unavailable(err)
    idx = opened.index
    try:
        return _sync_opened(config, roots, dirs, expected, opened)
    except IndexUnavailable as err:
        return _unavailable(err)
    finally:
        idx.close()


def _unavailable(err: IndexUnavailable) -> dict[str, object]:
    """A Milvus server down: the sidecars are current, the change notes wait for it."""
    log.warning("%s; the change notes wait for it (the next run or the agent applies them)", err.message)
    return {"unavailable": True, "message": err.message}


def _sync_opened(
    config: Config,
    roots: list[Path],
    dirs: list[Path],
    expected: dict[str, Expected] | None,
    opened: Opened,
) -> dict[str, object]:
    """`opened.new`: a new collection (a new index schema, another data dir) is filled, not repaired."""
    from ..index.write.sync import IndexSync

    idx, rebuilt, new = opened.index, opened.rebuilt, opened.new
    sync = IndexSync(idx, config.identity, roots, Ignore(config.ignore))
    report = sync.apply_pending(dirs)
    report.mushrooms += opened.applied.mushrooms
    report.events += opened.applied.events
    checked_ = sync.reconcile(expected)
    optimized = False
    if idx.needs_optimize:
        idx.optimize()
        optimized = True
    return {"mushrooms_applied": report.mushrooms, "events": report.events,
            "mushrooms_failed": [{"path": str(p), "reason": r} for p, r in report.failed],
            "repaired": 0 if new or rebuilt else checked_.repaired,
            "filled": checked_.repaired if new or rebuilt else 0, "rebuilt": rebuilt, "optimized": optimized,
            "chunks": idx.count(), "path": str(idx.path), "opened": True}  # fmt: skip
