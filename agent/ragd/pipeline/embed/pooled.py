"""The bundled model in worker processes (pool.py): two cores embed twice as fast as one process can.

The model is pure numpy and single-threaded per call (local.py: more BLAS threads measured slower), so the agent
gets the second core by running `run.workers` processes, each loading its own copy of the model (about 120 MB)
on its first batch. The embed queue's threads hand batches to them, one batch per worker at a time.

A worker that dies under a batch, or a batch that needs more than `run.worker_memory`, fails that batch's files
with an EmbedError (retried with a backoff, as any embedder failure); closing the pool fails the batches under
way as "embedder shut down" (their files stay CHUNKED and are embedded at the next start).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import CancelledError
from pathlib import Path

import numpy as np

from ...config import LOCAL_DIMENSION, LOCAL_MODEL
from ...errors import EmbedError
from ..pool import WorkerPool, worker_death
from .base import check_vectors, shut_down_error
from .local import MAX_CHARS, LocalEmbedder

_MODEL: LocalEmbedder | None = None  # in a worker: its own model, loaded with its first batch


def load_model(threads: int, max_chars: int, models: Path | None = None) -> LocalEmbedder:
    """This worker's model, loaded now if it is not yet: as the worker starts (the pool's `warm`; about 0.7 s),
    so that a batch handed to a worker that has had none yet (an edit after the initial index) does not wait
    for it. With `models`, the weights are mapped from there, shared with the other workers (shared.py)."""
    global _MODEL
    if _MODEL is None:
        _MODEL = LocalEmbedder(threads=threads, max_chars=max_chars, models=models)
        # the model reads its vocabulary and weights with its first text
        _MODEL.embed(["warm"])
    return _MODEL


def embed_in_worker(texts: list[str], threads: int, max_chars: int, models: Path | None = None) -> np.ndarray:
    """One batch with this worker's model."""
    return load_model(threads, max_chars, models).embed(texts)


class PooledLocalEmbedder:
    """An `Embedder` whose batches run in the worker pool `pool`."""

    model_name = LOCAL_MODEL
    dimension = LOCAL_DIMENSION
    source = f"the local model {LOCAL_MODEL}"

    def __init__(
        self, pool: WorkerPool, threads: int = 1, max_chars: int = MAX_CHARS, models: Path | None = None
    ) -> None:
        self.pool, self.threads, self.max_chars, self.models = pool, threads, max_chars, models

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        future = self.pool.submit(embed_in_worker, (list(texts), self.threads, self.max_chars, self.models))
        try:
            vectors = future.result()
        except CancelledError:
            raise shut_down_error() from None
        except MemoryError:
            raise EmbedError(f"{self.source} needed more than run.worker_memory ({self.pool.memory_mib} MiB) "
                             f"for a batch of {len(texts)} texts",
                             "raise run.worker_memory, or lower embedding.batch_size") from None  # fmt: skip
        except Exception as err:
            why = worker_death(err)
            if why is None:
                raise
            raise EmbedError(f"{self.source} crashed under a batch of {len(texts)} texts ({why})",
                             "the files are tried again later; see the agent's log") from None  # fmt: skip
        return check_vectors(np.asarray(vectors), len(texts), self.dimension, self.source)

    def close(self) -> None:
        self.pool.close()
