"""The index writer: one thread that applies every change to the zvec collection (DESIGN §5, index sync).

zvec allows one writer or many readers; queries run on the control and MCP threads, every write runs here, in
order: mushrooms as directory jobs hand them over (or the watcher finds other producers' ones), and requested
operations (reconcile, orphan clean-up, rebuild) as callables. A mushroom that fails stays on disk and is retried
with backoff. When the unoptimized share of the collection grows (HNSW), the collection is optimized here too,
and when a flat collection's flushes have piled up blocks, it is compacted (rewritten as one), while queries go
on: in a pause, or during a long stream of writes once the blocks pass a lower bound of their own.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...errors import RagdError
from ..backend import IndexBackend
from .sync import BATCH, IndexSync, SyncReport, note_there

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_MIN_S, RETRY_MAX_S = 2.0, 300.0
# While more work is on its way (an initial index, a burst of changes), applied change notes are flushed (then
# deleted) at most this often; once nothing else is on its way, at once. Every flush that wrote documents adds a
# block zvec keeps in memory until the collection is compacted (docs/zvec-notes.md), and searches see writes before
# their flush. A crash loses nothing: the notes not yet flushed are still on disk and applied again at the start.
FLUSH_EVERY_S = 30.0
# ... doubled at each such flush while the stream goes on without a pause (a big folder's job), up to this: a job of
# 30,000 notes flushed ~30 times, each flush a block of memory, and folding them during the job (a compaction)
# copies the whole index, a passing peak of ~200 MiB at 50,000 chunks (docs/benchmarks/history.md).
FLUSH_LONG_S = 240.0
# ... or sooner, once sync.FLUSH_CHUNKS chunks were written since the last flush (see there).
# ... and while an edit is on its way (its change note comes within a second or two), the periodic flush waits for
# it, up to this much longer: a flush during an initial index took 0.6-3.4 s, which the edit's note waited out.
FLUSH_DEFER_S = 15.0
# A flush that failed (the index's files deleted under it, a full disk) is tried again this long after, doubled at
# each further failure up to the second figure.
FLUSH_RETRY_MIN_S, FLUSH_RETRY_MAX_S = 1.0, 60.0
# While someone edits (an edit seen in the last EDITING_S seconds), the writer works in smaller steps, so that the
# next edit's note waits less for the one under way: batches of at most EDITING_BATCH notes, and the flush every
# FLUSH_EDITING_S (zvec's full-text field costs about 1 ms a chunk to write and as much to flush: docs/zvec-notes.md).
EDITING_S = 60.0
EDITING_BATCH = 16
FLUSH_EDITING_S = 10.0
# A folder's deletion in a change note (its folder gone: deleted, or moved into another folder) waits until nothing
# else is on its way, or this long: a folder moved elsewhere is recovered under its new name by another folder's
# note, which comes in its own time; deleted first, its files were out of search meanwhile (IndexSync.apply_batch).
DELETE_WAIT_S = 30.0


@dataclass
class _Call:
    fn: Callable[[IndexSync], Any]
    future: Future[Any]


_STOP = object()


class Indexer:
    def __init__(
        self,
        sync: IndexSync,
        more_coming: Callable[[], bool] = lambda: False,
        edit_coming: Callable[[], bool] = lambda: False,
        failing: Callable[[], bool] = lambda: False,
        compacted: Callable[[], object] = lambda: None,
    ) -> None:
        """`more_coming`: whether more changes are on their way to the writer (directory jobs queued or running,
        texts waiting for vectors): flushes and compactions wait for a pause, or FLUSH_EVERY_S. `edit_coming`:
        whether one of them is a change seen in a folder (an edit to make searchable soon): the periodic flush
        waits for it too, up to FLUSH_DEFER_S more. `failing`: called when change notes could not be applied: whether
        the index vanished (with the agent's data directory) and is to be rebuilt, the notes applied after it.
        `compacted`: called after a compaction during a long job, to give the memory it freed back to the system at
        once (the agent's allocator otherwise keeps it until the agent is idle: 75 MiB after a compaction of 50,000
        chunks)."""
        self.sync = sync
        self._more_coming = more_coming
        self._edit_coming = edit_coming
        self._failing = failing
        self._compacted = compacted
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._queued: set[Path] = set()
        self._failed: dict[Path, tuple[str, float, int]] = {}  # path -> (reason, retry at, attempts)
        self._unflushed: list[Path] = []  # applied, awaiting the next flush (then deleted)
        # applied but for their folder deletions (DELETE_WAIT_S), and since when (time.monotonic)
        self._waiting: dict[Path, float] = {}
        self._unflushed_since = 0.0
        self._doubled = 0  # flushes without a pause since the last pause: the interval doubles with each
        self._flush_failures = 0  # flushes failed in a row
        self._flush_next = 0.0  # after a failed flush: no other tried before this (time.monotonic)
        self._flush_traced = False  # a traceback was logged for one of those failures
        self._working = False
        self._edited_at = float("-inf")  # when an edit was last seen on its way
        self.optimizing = False
        self.applied = 0
        self.chunks = 0
        self._thread = threading.Thread(target=self._loop, name="indexer", daemon=True)

    @property
    def index(self) -> IndexBackend:
        return self.sync.index

    def start(self) -> None:
        with contextlib.suppress(RagdError):  # a remote index unreachable now: counted once it answers
            self.chunks = self.index.count()
        self._thread.start()

    # -- input ------------------------------------------------------------------------------------------------
    def put_mushroom(self, path: Path) -> None:
        with self._lock:
            if path in self._queued or path in self._waiting:
                return
            self._queued.add(path)
            self._failed.pop(path, None)
        self._queue.put(path)

    def offer(self, path: Path) -> bool:
        """Queue a change note found on disk unless it is queued already or waiting for its retry."""
        with self._lock:
            if (
                path in self._queued
                or path in self._failed
                or path in self._unflushed
                or path in self._waiting
            ):
                return False
            self._queued.add(path)
        self._queue.put(path)
        return True

    def call(self, fn: Callable[[IndexSync], T]) -> Future[T]:
        """Run `fn(sync)` on the writer thread; the future carries its result or exception."""
        fut: Future[T] = Future()
        self._queue.put(_Call(fn, fut))
        return fut

    # -- state ------------------------------------------------------------------------------------------------
    def pending(self) -> int:
        with self._lock:
            return len(self._queued)

    def pending_in(self, covers: Callable[[Path], bool]) -> int:
        """Change notes queued or being applied whose directory `covers` accepts (a note lies in `<dir>/.rag/`)."""
        with self._lock:
            return sum(1 for note in (*self._queued, *self._waiting) if covers(note.parent.parent))

    def busy(self) -> bool:
        """Mushrooms or calls waiting, being applied, or applied and not yet flushed. A failed mushroom waiting for
        a retry counts only until its first retry (RETRY_MIN_S after it failed): a passing cause (the index made
        anew under it) is then not reported as the idle state; one that keeps failing does not keep the agent busy."""
        with self._lock:
            first = any(attempts == 1 for _, _, attempts in self._failed.values())
            return (
                bool(self._queued or self._unflushed or self._waiting)
                or first
                or self._working
                or not self._queue.empty()
            )

    def failed(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {"path": str(p), "reason": r, "attempts": n} for p, (r, _, n) in sorted(self._failed.items())
            ]

    # -- the thread -------------------------------------------------------------------------------------------
    def _editing(self) -> bool:
        """An edit is on its way, or was in the last EDITING_S seconds."""
        now = time.monotonic()
        if self._edit_coming():
            self._edited_at = now
        return now - self._edited_at < EDITING_S

    def _loop(self) -> None:
        carry: Any = None
        while True:
            if carry is not None:
                item, carry = carry, None
            else:
                try:
                    item = self._queue.get(timeout=self._retry_wait())
                except queue.Empty:
                    self._release_retries()
                    more = self._more_coming()
                    self._delete_waiting(every=not more)
                    if self._flush(force=not more) and more:
                        self._compact_busy()
                    continue
            if item is _STOP:
                self._delete_waiting(every=True)
                self._flush(force=True, last=True)
                return
            with self._lock:
                self._working = True
            try:
                if isinstance(item, _Call):
                    self._delete_waiting(every=True)
                    self._flush(force=True)  # an operation sees, and may rebuild, a durable index
                    self._call(item)
                else:
                    batch, carry = self._drain([item])
                    self._apply(batch)
            finally:
                with self._lock:
                    self._working = False
            with contextlib.suppress(RagdError):  # for status: kept current while the writer works
                self.chunks = self.index.count()
            pause = carry is None and self._queue.empty() and not self._more_coming()
            self._delete_waiting(every=pause)
            flushed = self._flush(force=pause)
            if pause:
                self._after_batch()  # flushed just now
            elif flushed:
                self._compact_busy()

    def _drain(self, batch: list[Path]) -> tuple[list[Path], Any]:
        """More queued mushrooms for this batch, up to the first item that is not one (returned to run next)."""
        most = EDITING_BATCH if self._editing() else BATCH
        while len(batch) < most:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, None
            if not isinstance(item, Path):
                return batch, item
            batch.append(item)
        return batch, None

    def _call(self, item: _Call) -> None:
        if item.future.set_running_or_notify_cancel():
            try:
                item.future.set_result(item.fn(self.sync))
            except BaseException as err:  # handed to the caller, who translates it
                item.future.set_exception(err)

    def _flush(self, *, force: bool = False, last: bool = False) -> bool:
        """Flush the applied notes, then delete them: when FLUSH_EVERY_S (FLUSH_EDITING_S while someone edits;
        doubled at each flush without a pause, up to FLUSH_LONG_S) has passed since the first was applied (up to
        FLUSH_DEFER_S more while an edit is on its way), or FLUSH_CHUNKS chunks were written since the last flush,
        or `force` (nothing else on its way). A flush that fails keeps them, to be flushed with the next, tried
        FLUSH_RETRY_MIN_S later, doubled at each failure (a traceback once, then a line each time: it was tried, and
        logged, ten times a second; no traceback when the index vanished with the data directory, which the agent
        rebuilds); `last` (the writer stops) tries at once.
        True if it flushed."""
        with self._lock:
            if not self._unflushed:
                return False
            waited = time.monotonic() - self._unflushed_since
            notes = list(self._unflushed)
        longest = max(FLUSH_LONG_S, FLUSH_EVERY_S)
        every = (
            FLUSH_EDITING_S if self._editing() else min(FLUSH_EVERY_S * 2 ** min(self._doubled, 16), longest)
        )
        due = waited >= every and (waited >= every + FLUSH_DEFER_S or not self._edit_coming())
        if not (force or due or self.sync.many_unflushed):
            return False
        if not last and time.monotonic() < self._flush_next:  # the last one failed: tried again later
            return False
        try:
            self.sync.flushed(notes)
        except Exception as err:  # the writer loop's boundary: the notes stay on disk and in the list
            self._flush_failures += 1
            wait = min(FLUSH_RETRY_MIN_S * 2 ** (self._flush_failures - 1), FLUSH_RETRY_MAX_S)
            self._flush_next = time.monotonic() + wait
            if self._failing():  # the index went with the data dir: flushed once it is rebuilt
                log.info(
                    "flushing %d applied change notes waits for the index to be rebuilt (%s)", len(notes), err
                )
            elif not self._flush_traced:
                self._flush_traced = True
                log.exception("internal error flushing %d applied change notes (tried again in %.0f s)",
                              len(notes), wait)  # fmt: skip
            else:
                log.error("flushing %d applied change notes failed again (attempt %d, next in %.0f s): %s",
                          len(notes), self._flush_failures, wait, err)  # fmt: skip
            return False
        self._flush_failures, self._flush_next, self._flush_traced = 0, 0.0, False
        with self._lock:
            del self._unflushed[: len(notes)]
        self._doubled = 0 if force else self._doubled + 1
        # what the writes and the flush touched in the index's mapped files: out of the agent's RSS, in the page
        # cache (ragd/mapped.py)
        with contextlib.suppress(RagdError):
            self.index.give_back_pages()
        return True

    def _delete_waiting(self, *, every: bool) -> None:
        """Apply the folder deletions that wait (see DELETE_WAIT_S): `every` one, or those waiting that long."""
        now = time.monotonic()
        with self._lock:
            due = [p for p, since in self._waiting.items() if every or now - since >= DELETE_WAIT_S]
        if due:
            self._apply(due, deletes=True)
            with contextlib.suppress(RagdError):  # for status, as after a batch
                self.chunks = self.index.count()

    def _apply(self, paths: list[Path], *, deletes: bool = False) -> None:
        """Apply change notes (their folder deletions left waiting), or, with `deletes`, those waiting notes'
        folder deletions."""
        error: Exception | None = None
        try:
            if deletes:
                report = self.sync.apply_deletes(paths)
            else:
                report = self.sync.apply_batch(paths, flush=False, deletes_wait=True)
        except Exception as err:  # the writer loop's boundary (e.g. the flush failed): keep the notes, retry
            error = err
            report = SyncReport(failed=[(p, f"{type(err).__name__}: {err}") for p in paths])
        vanished = bool(report.failed) and self._failing()  # the index went with the data dir: it is rebuilt
        if error is not None and not vanished:
            log.error("internal error applying %d change notes", len(paths), exc_info=error)
        self.applied += report.events
        failed = dict(report.failed)
        with self._lock:
            if report.applied and not self._unflushed:
                self._unflushed_since = time.monotonic()
            self._unflushed.extend(report.applied)
            for p in report.waiting:
                self._waiting.setdefault(p, time.monotonic())
            for p in paths:
                self._queued.discard(p)
                if deletes:
                    self._waiting.pop(p, None)
                if p not in failed:
                    self._failed.pop(p, None)
                    continue
                attempts = self._failed.get(p, ("", 0.0, 0))[2] + 1
                wait = min(RETRY_MIN_S * 2 ** (attempts - 1), RETRY_MAX_S)
                self._failed[p] = (failed[p], time.monotonic() + wait, attempts)
                if vanished:
                    log.info("change note %s waits for the index to be rebuilt", p)
                else:
                    log.error("change note %s not applied (attempt %d, retry in %.0f s)", p, attempts, wait)

    def retry_failed(self) -> None:
        """Queue every change note waiting for its retry again now (the index was rebuilt under them)."""
        with self._lock:
            self._failed = {p: (reason, 0.0, n) for p, (reason, _, n) in self._failed.items()}
        self._release_retries()

    def _after_batch(self) -> None:
        try:
            if self.index.needs_optimize:
                self.optimizing = True
                started = time.monotonic()
                self.index.optimize()
                log.info("index optimized in %.1f s (%d chunks)", time.monotonic() - started, self.chunks)
            elif self.index.needs_compaction:
                self.optimizing = True
                started = time.monotonic()
                folded = self.index.compact()
                log.info("index compacted in %.1f s (%d blocks, %d chunks)", time.monotonic() - started, folded,
                         self.chunks)  # fmt: skip
        except RagdError as err:
            log.error("index maintenance failed: %s", err)
        finally:
            self.optimizing = False

    def _compact_busy(self) -> None:
        """While more keeps coming (a big folder's job), each flush adds a block of memory to a flat index, and the
        compaction that folds them waits for a pause the job does not give: compacted now once they pile up
        (`needs_compaction_busy`). Everything applied is flushed just before, so the compaction loses nothing and
        a crash during it leaves the index as it was (`compact`); searches go on, the next notes wait for it."""
        try:
            if not self.index.needs_compaction_busy:
                return
            self.optimizing = True
            started = time.monotonic()
            folded = self.index.compact()
            log.info("index compacted during a long job in %.1f s (%d blocks, %d chunks)", time.monotonic() - started,
                     folded, self.chunks)  # fmt: skip
            self._compacted()
        except RagdError as err:
            log.error("index maintenance failed: %s", err)
        finally:
            self.optimizing = False

    def _retry_wait(self) -> float:
        with self._lock:
            if self._unflushed:
                return 0.1  # soon a pause, to flush in
            if not self._failed:
                return 1.0
            soonest = min(t for _, t, _ in self._failed.values())
        return max(0.05, min(1.0, soonest - time.monotonic()))

    def _release_retries(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [p for p, (_, t, _) in self._failed.items() if t <= now]
        for p in due:
            if note_there(p) is not False:  # there, or its folder unreadable: tried again (it waits there)
                with self._lock:
                    reason, _, attempts = self._failed[p]
                    self._failed[p] = (reason, float("inf"), attempts)  # back in the queue; keep the count
                    self._queued.add(p)
                self._queue.put(p)
            else:
                with self._lock:
                    self._failed.pop(p, None)

    def stop(self, timeout: float = 30.0) -> None:
        """Apply what is queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)
