"""The agent's directory jobs: `JobRunner` runs one (pipeline/dirjob.py) for the scheduler, with its context,
forced or express, counting the files that wait for vectors, noticing a folder made anew under the name of one that
went; and takes in each step and outcome through the boundary `run --once` shares (jobs.py), unless the job's root
was removed while it ran."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from ..paths import is_under, under_any
from ..pipeline.dirjob import DirResult, JobContext, run_directory
from ..pipeline.scan import changed_since_listed
from ..pipeline.sidecar import RAG_DIR
from . import memory
from .jobs import real_roots
from .runtime import AgentRuntime

# the agent's log: its lines keep the name they have always had (docs/operations.md quotes them)
log = logging.getLogger("ragd.resident.agent")

GONE_KEPT_S = 600.0  # how long a folder that went is remembered, for one of its name made at once


class JobRunner(AgentRuntime):
    """The directory jobs the scheduler runs for the agent, and their outcomes."""

    def _job_context(self, force: bool) -> JobContext:
        return replace(self._ctx, force=force, roots=real_roots(self.roots))

    def _job(self, directory: Path) -> DirResult:
        with self._lock:
            forced = directory in self._forced
            self._forced.discard(directory)
        self._job_dir.path = directory
        self._job_dir.express = express = self.scheduler.express(directory)
        ctx = replace(self._job_context(forced), express=express, dropped=partial(self._unwatched, directory))
        try:
            self._made_anew(directory)
            return run_directory(ctx, directory, partial(self._job_step, directory))
        finally:
            self._job_dir.path = None
            self._job_dir.express = False

    def _note_gone(self, directory: Path) -> None:
        """A watched folder went (deleted, or moved away): remembered a while, in case a folder of its name is made
        at once (`_made_anew`)."""
        now = time.monotonic()
        with self._lock:
            self._gone = {d: t for d, t in self._gone.items() if now - t < GONE_KEPT_S}
            self._gone[directory] = now

    def _made_anew(self, directory: Path) -> None:
        """A folder that went, and a new one made under its name with no pause between (`rm -r d; mkdir d`; a folder
        replaced by a file and the file by a folder again): the parent's listing shows a folder of that name before
        and after, so no job of the parent says the old one went. The new folder has no `.rag/` yet: the index keeps,
        under it, only what its sidecars hold now (the old folder's files leave search) before its first job."""
        with self._lock:
            gone = self._gone.pop(directory, None) is not None
        # (os.path: False where it may not look, below a folder made unreadable; pathlib raised)
        if gone and not os.path.exists(directory / RAG_DIR):
            log.info("%s was made anew: the files of the folder it replaced leave the index", directory)
            self.indexer.call(lambda sync: sync.sync_subtree(directory)).result()

    def _submit(self, texts: Sequence[str]) -> Future[np.ndarray]:
        """The embed queue's submit, counting the files of each directory that wait for their vectors. The texts of
        a job started for a change seen in its directory go to the head of the queue."""
        fut = self.embed.submit(texts, priority=getattr(self._job_dir, "express", False))
        directory = getattr(self._job_dir, "path", None)
        if directory is not None:
            with self._lock:
                self._waiting[directory] = self._waiting.get(directory, 0) + 1
            fut.add_done_callback(lambda _f, d=directory: self._unwait(d))  # type: ignore[misc]
        return fut

    def _unwait(self, directory: Path) -> None:
        with self._lock:
            n = self._waiting.get(directory, 0) - 1
            if n > 0:
                self._waiting[directory] = n
            else:
                self._waiting.pop(directory, None)

    def waiting_files(self, top: Path | None = None) -> int:
        """Files (under `top`) whose texts wait for the embedder now."""
        with self._lock:
            return sum(n for d, n in self._waiting.items() if top is None or is_under(d, top))

    def force_next(self, dirs: Iterable[Path]) -> None:
        """The next job of each of these directories re-processes its files even when unchanged."""
        with self._lock:
            self._forced.update(dirs)

    def _unwatched(self, directory: Path) -> bool:
        """`directory` is under no root (any more: `roots remove` took its root away while its job ran)."""
        return not under_any(directory, list(self.roots))

    def _job_step(self, directory: Path, result: DirResult) -> None:
        """What a big folder's job has finished so far (dirjob.py): recorded and handed to the index writer now.
        Such a job is no edit, even when a change seen in its folder started it: from its first step its texts join
        the embed queue in turn, behind an edit's, and never go to the agent's own copy of the model (an edit's
        express lane), which embedded much of a folder of 30,000 notes one file at a time beside the workers
        (docs/benchmarks.md, the big folder's memory and throughput); nor does the index writer take it for an
        edit on its way (`Scheduler.no_longer_express`): it writes the folder in big batches and flushes seldom.
        Such a job leaves the agent busy for minutes: what its steps freed goes back to the system as it runs
        (`memory.trim_now_and_then`), with the pages of the model's weights its own copy touched, not once the
        agent is idle."""
        if memory.trim_now_and_then():
            self.embed.unmap_pages()  # what the agent's copy of the model touched (pipeline/embed/shared.py)
        self._job_dir.express = False
        self.scheduler.no_longer_express(directory)
        with self._roots_lock:
            if not self._unwatched(directory):
                self._outcomes.step(result)

    def _job_done(self, directory: Path, result: DirResult | None, err: BaseException | None) -> None:
        with self._roots_lock:
            if self._unwatched(directory):  # its root was removed while it ran: its files were left alone
                log.debug("job for %s ended after its root was removed; its outcome is dropped", directory)
                return
            self._outcomes.done(directory, result, err)  # the boundary `run --once` shares (resident/jobs.py)
            if result is not None and os.path.isdir(result.directory):  # (False where it may not look)
                self.links.record(directory, result.shared)
                if changed_since_listed(directory, result.shared):  # its target changed while the job ran
                    self.debouncer.touch(directory)
