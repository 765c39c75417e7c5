"""Unusable vectors from an OpenAI-compatible API (a real fake server): refused per text, never per batch."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ragd.config import EmbeddingConfig
from ragd.errors import EmbedError
from ragd.pipeline.embed import EmbedQueue, make_embedder
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll
from tests.unit.pipeline.test_embed_queue import run_callers


def api_queue(server: FakeOpenAI) -> EmbedQueue:
    cfg = EmbeddingConfig(
        provider="openai", model="fake-embed", dimension=server.dim, base_url=server.base_url, retries=0
    )
    return EmbedQueue(make_embedder(cfg), batch_size=64, concurrency=1)


def shared_request(
    server: FakeOpenAI, queue: EmbedQueue, calls: list[list[str]]
) -> list[np.ndarray | EmbedError]:
    """Run `calls` so that they all go in one request: a first request is held until they are all queued."""
    server.hold_next(1)
    warm = threading.Thread(target=queue.embed, args=(["warm up"],))
    warm.start()
    poll(lambda: len(server.requests) == 1, timeout=5, what="the first (held) request")
    done: list[list[np.ndarray | EmbedError]] = []
    runner = threading.Thread(target=lambda: done.append(run_callers(queue, calls)))
    runner.start()
    poll(lambda: queue.stats.queued == sum(map(len, calls)), timeout=5, what="every text to be queued")
    server.release()
    runner.join(timeout=10)
    warm.join(timeout=10)
    assert len(server.requests) == 2 and len(server.requests[1].texts) == sum(map(len, calls))
    return done[0]


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("zero", "a zero vector"),
        ("nan", "a non-finite (NaN or infinite) vector"),  # the JSON literal NaN, as Python servers write it
        ("inf", "a non-finite (NaN or infinite) vector"),
        ("null", "a non-finite (NaN or infinite) vector"),  # null, as JavaScript writes NaN
    ],
)
def test_an_unusable_vector_fails_only_its_caller(
    fake_openai_server: FakeOpenAI, kind: str, said: str
) -> None:
    server = fake_openai_server
    server.poison("poisonpill", kind)
    server.always_float = kind in ("nan", "inf", "null")  # as JSON literals, from a server sending numbers
    queue = api_queue(server)
    calls = [["alpha one", "alpha two"], ["bravo", "a poisonpill here", "bravo three"], ["charlie"]]
    try:
        results = shared_request(server, queue, calls)
    finally:
        queue.close()
    for texts, got in zip(calls, results, strict=True):
        if texts[0] == "bravo":
            assert isinstance(got, EmbedError)
            assert got.message == (
                f"the embeddings API at {server.base_url} returned {said} for 1 of 3 texts (model fake-embed)"
            )
            continue
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, np.stack([server.vector(t) for t in texts]), atol=1e-6)
    stats = queue.stats
    assert (stats.failed_batches, stats.rejected, stats.texts_embedded) == (
        1,
        1,
        4,
    )  # warm-up, alpha, charlie
    assert stats.last_error is not None and "1 of 3 texts" in stats.last_error


def test_unusable_vectors_in_base64(fake_openai_server: FakeOpenAI) -> None:
    """A server answering base64 whatever was asked: a NaN row is refused the same way."""
    server = fake_openai_server
    server.always_base64 = True
    server.poison("poisonpill", "nan")
    queue = api_queue(server)
    try:
        results = shared_request(server, queue, [["fine"], ["poisonpill"]])
    finally:
        queue.close()
    assert isinstance(results[0], np.ndarray) and isinstance(results[1], EmbedError)
    assert "non-finite" in results[1].message


def test_the_embedder_hands_nan_rows_to_the_queue(fake_openai_server: FakeOpenAI) -> None:
    """The NaN literal does not make the whole answer unreadable: the rows come back as sent."""
    fake_openai_server.poison("poisonpill", "nan")
    cfg = EmbeddingConfig(
        provider="openai", model="m", dimension=8, base_url=fake_openai_server.base_url, retries=0
    )
    vectors = make_embedder(cfg).embed(["ok", "poisonpill"])
    assert np.isfinite(vectors[0]).all() and np.isnan(vectors[1]).all()
    fake_openai_server.unpoison()
    assert np.isfinite(make_embedder(cfg).embed(["poisonpill"])).all()
