"""What every embedder is: a model name, a dimension and "embed one batch"."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import EmbedError


@runtime_checkable
class Embedder(Protocol):
    """Embeds one batch of texts. Implementations may also offer `close()` and a `retries` counter.

    `embed` returns a float32 array of shape (len(texts), dimension), row i for texts[i], and raises
    `EmbedError` when it gives up.
    """

    model_name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_SECRETISH = re.compile(r"\b(sk-[A-Za-z0-9_\-]{3})[A-Za-z0-9_\-]{6,}")


SHUTDOWN = "shutdown"  # the code of the error a caller gets when the embedder is closed under it


def shut_down_error() -> EmbedError:
    """What a caller gets when the embedder stops under it (close() during a wait or a request)."""
    return EmbedError(
        "embedder shut down",
        "the agent is stopping; unfinished files are embedded at its next start",
        code=SHUTDOWN,
    )


def clean_text(text: str) -> str:
    """Make a text safe to encode: lone surrogates (from undecodable file names or bytes) become '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def redact(text: str, secret: str | None) -> str:
    """`text` with `secret` (and anything shaped like an OpenAI key) replaced by '***'."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return _SECRETISH.sub(r"\1***", text)


def check_vectors(vectors: np.ndarray, count: int, dimension: int, source: str) -> np.ndarray:
    """`vectors` as C-contiguous float32, or EmbedError if its shape is not (count, dimension)."""
    if vectors.ndim != 2 or vectors.shape[0] != count:
        raise EmbedError(
            f"{source} returned {vectors.shape[0] if vectors.ndim else 0} vectors for {count} texts",
            "the embedder is misbehaving; check its version and logs",
        )
    if vectors.shape[1] != dimension:
        raise EmbedError(
            f"{source} returned {vectors.shape[1]}-d vectors, expected {dimension}-d",
            "set embedding.dimension to the model's dimension",
        )
    return np.ascontiguousarray(vectors, dtype=np.float32)
