"""The index writer: one thread that applies every change to the zvec collection (DESIGN §5, index sync).

zvec allows one writer or many readers; queries run on the control and MCP threads, every write runs here, in
order: mushrooms as directory jobs hand them over (or the watcher finds other producers' ones), and requested
operations (reconcile, orphan clean-up, rebuild) as callables. A mushroom that fails stays on disk and is retried
with backoff. When the unoptimized share of the collection grows, the collection is optimized here too, while
queries go on.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .errors import RagdError
from .index import IndexBackend
from .indexsync import IndexSync

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_MIN_S, RETRY_MAX_S = 2.0, 300.0


@dataclass
class _Call:
    fn: Callable[[IndexSync], Any]
    future: Future[Any]


_STOP = object()


class Indexer:
    def __init__(self, sync: IndexSync) -> None:
        self.sync = sync
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._queued: set[Path] = set()
        self._failed: dict[Path, tuple[str, float, int]] = {}  # path -> (reason, retry at, attempts)
        self._working = False
        self.optimizing = False
        self.applied = 0
        self.chunks = 0
        self._thread = threading.Thread(target=self._loop, name="indexer", daemon=True)

    @property
    def index(self) -> IndexBackend:
        return self.sync.index

    def start(self) -> None:
        self.chunks = self.index.count()
        self._thread.start()

    # -- input ------------------------------------------------------------------------------------------------
    def put_mushroom(self, path: Path) -> None:
        with self._lock:
            if path in self._queued:
                return
            self._queued.add(path)
            self._failed.pop(path, None)
        self._queue.put(path)

    def call(self, fn: Callable[[IndexSync], T]) -> Future[T]:
        """Run `fn(sync)` on the writer thread; the future carries its result or exception."""
        fut: Future[T] = Future()
        self._queue.put(_Call(fn, fut))
        return fut

    # -- state ------------------------------------------------------------------------------------------------
    def pending(self) -> int:
        with self._lock:
            return len(self._queued)

    def busy(self) -> bool:
        """Mushrooms or calls waiting or being applied (failed mushrooms waiting for a retry do not count)."""
        with self._lock:
            return bool(self._queued) or self._working or not self._queue.empty()

    def failed(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {"path": str(p), "reason": r, "attempts": n} for p, (r, _, n) in sorted(self._failed.items())
            ]

    # -- the thread -------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._retry_wait())
            except queue.Empty:
                self._release_retries()
                continue
            if item is _STOP:
                return
            with self._lock:
                self._working = True
            try:
                self._handle(item)
            finally:
                with self._lock:
                    self._working = False
            if self._queue.empty():
                self._after_batch()

    def _handle(self, item: Any) -> None:
        if isinstance(item, _Call):
            if item.future.set_running_or_notify_cancel():
                try:
                    item.future.set_result(item.fn(self.sync))
                except BaseException as err:  # handed to the caller, who translates it
                    item.future.set_exception(err)
            return
        self._apply(item)

    def _apply(self, path: Path) -> None:
        try:
            self.applied += self.sync.apply_mushroom(path)
            with self._lock:
                self._failed.pop(path, None)
        except (RagdError, OSError) as err:
            with self._lock:
                attempts = self._failed.get(path, ("", 0.0, 0))[2] + 1
                wait = min(RETRY_MIN_S * 2 ** (attempts - 1), RETRY_MAX_S)
                self._failed[path] = (str(err), time.monotonic() + wait, attempts)
            log.error(
                "change note %s not applied (attempt %d, retry in %.0f s): %s", path, attempts, wait, err
            )
        except Exception as err:  # the writer loop's boundary: keep the note, report it, go on
            log.exception("internal error applying %s", path)
            with self._lock:
                self._failed[path] = (f"internal error: {err}", time.monotonic() + RETRY_MAX_S, 1)
        finally:
            with self._lock:
                self._queued.discard(path)

    def _after_batch(self) -> None:
        try:
            self.chunks = self.index.count()
            if self.index.needs_optimize:
                self.optimizing = True
                started = time.monotonic()
                self.index.optimize()
                log.info("index optimized in %.1f s (%d chunks)", time.monotonic() - started, self.chunks)
        except RagdError as err:
            log.error("index maintenance failed: %s", err)
        finally:
            self.optimizing = False

    def _retry_wait(self) -> float:
        with self._lock:
            if not self._failed:
                return 1.0
            soonest = min(t for _, t, _ in self._failed.values())
        return max(0.05, min(1.0, soonest - time.monotonic()))

    def _release_retries(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [p for p, (_, t, _) in self._failed.items() if t <= now]
        for p in due:
            if p.exists():
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
