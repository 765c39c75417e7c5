"""What every embedder is: a model name, a dimension and "embed one batch"."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ...errors import SHUTDOWN, EmbedError
from ...model import NOT_FINITE, ZERO, vector_problems


@runtime_checkable
class Embedder(Protocol):
    """Embeds one batch of texts. Implementations may also offer `close()`, a `retries` counter and a `source`
    ("the embeddings API at URL") that messages name.

    `embed` returns a float32 array of shape (len(texts), dimension), row i for texts[i], and raises
    `EmbedError` when it gives up. A row may still be unusable (zero, NaN, infinite: some servers answer that
    for some texts); the caller checks rows with `row_problems`, so that one bad text fails only its own file.
    """

    model_name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_SECRETISH = re.compile(r"\b(sk-[A-Za-z0-9_\-]{3})[A-Za-z0-9_\-]{6,}")


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


_KIND_WORDS = {ZERO: "zero", NOT_FINITE: "non-finite (NaN or infinite)"}


def source_of(embedder: Embedder) -> str:
    """How messages name `embedder`: its `source` when it has one."""
    return str(getattr(embedder, "source", "") or f"the embedder {embedder.model_name}")


def row_problems(vectors: np.ndarray) -> list[str | None]:
    """Per row of a float32 (n, d) array: None if the vector is usable, else ZERO or NOT_FINITE (the index's test:
    a NaN or infinite value, a norm overflowing float32, or all zeros is refused)."""
    return vector_problems(vectors) if len(vectors) else []


def invalid_vectors_error(source: str, model_name: str, problems: Sequence[str | None]) -> EmbedError:
    """The error for a caller whose texts got unusable vectors (`problems` from `row_problems`, its rows)."""
    counts = Counter(p for p in problems if p is not None)
    what = " and ".join(
        f"a {word} vector" if counts[kind] == 1 else f"{counts[kind]} {word} vectors"
        for kind, word in _KIND_WORDS.items()
        if counts[kind]
    )
    model = "" if model_name in source else f" (model {model_name})"
    return EmbedError(
        f"{source} returned {what} for {sum(counts.values())} of {len(problems)} texts{model}",
        "such a vector cannot be searched and is not stored; the file is retried later. If it keeps failing, "
        "check the embedding server's logs for these texts, or try another embedding.model",
    )
