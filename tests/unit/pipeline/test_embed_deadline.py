"""`embedding.timeout` is a deadline for a whole attempt (connect + send + the complete answer), not per read:
a server trickling its answer a byte a second is cut off at the deadline, and the worker is free again."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ragd.config import EmbeddingConfig
from ragd.errors import EmbedError
from ragd.pipeline.embed import EmbedQueue, make_embedder
from ragd.pipeline.embed.openai_api import OpenAIEmbedder
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

# The fake's answer for one 8-d vector is about 300 bytes: at 4 bytes/s (a byte every 0.25 s, well inside a 1 s
# read timeout) it takes over a minute, so a bound of a few timeouts tells a total deadline from a per-read one.
RATE = 4.0  # bytes per second
BOUND = 4.0  # seconds, for a 1 s timeout


def make(server: FakeOpenAI, **kw: object) -> OpenAIEmbedder:
    base = {"provider": "openai", "model": "m", "dimension": server.dim, "base_url": server.base_url}
    cfg = EmbeddingConfig.model_validate({**base, "max_backoff": 0.05, **kw})
    embedder = make_embedder(cfg)
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


def give_up_in_time(embedder: OpenAIEmbedder, texts: list[str]) -> EmbedError:
    """Call embed in a thread; it must end with EmbedError well before the trickle would end."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            embedder.embed(texts)
        except BaseException as err:  # reported by the assertion below
            errors.append(err)

    started = time.monotonic()
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout=BOUND)
    assert not thread.is_alive(), "embed still waiting on the trickling answer: the timeout is per read"
    assert time.monotonic() - started < BOUND
    assert len(errors) == 1 and isinstance(errors[0], EmbedError), errors
    return errors[0]


@pytest.mark.parametrize("head", [False, True], ids=["body", "headers-and-body"])
def test_a_trickling_answer_is_cut_off_at_the_deadline(fake_openai_server: FakeOpenAI, head: bool) -> None:
    server = fake_openai_server
    server.trickle_next(1, bytes_per_s=RATE, head=head)
    err = give_up_in_time(make(server, timeout=1, retries=0), ["trickled"])
    assert "no answer within 1 s (timeout)" in err.message and "1 attempt" in err.message
    assert server.base_url in err.message
    poll(lambda: server.abandoned == 1, timeout=10, what="the server to see the connection closed")


def test_a_cut_off_attempt_is_retried(fake_openai_server: FakeOpenAI) -> None:
    server = fake_openai_server
    server.trickle_next(1, bytes_per_s=RATE)
    embedder = make(server, timeout=1, retries=1)
    np.testing.assert_allclose(embedder.embed(["again"])[0], server.vector("again"), atol=1e-6)
    assert len(server.requests) == 2 and embedder.retries == 1


def test_the_queue_worker_is_free_after_a_cut_off(fake_openai_server: FakeOpenAI) -> None:
    server = fake_openai_server
    server.trickle_next(1, bytes_per_s=RATE)
    queue = EmbedQueue(make(server, timeout=1, retries=0), batch_size=8, concurrency=1, down_pause=0)
    try:
        first = queue.submit(["trickled"])
        with pytest.raises(EmbedError, match="timeout"):
            first.result(timeout=BOUND)
        np.testing.assert_allclose(queue.embed(["next"])[0], server.vector("next"), atol=1e-6)
    finally:
        queue.close()
    assert queue.stats.failed_batches == 1 and "timeout" in (queue.stats.last_error or "")


def test_close_cuts_a_request_in_flight(fake_openai_server: FakeOpenAI) -> None:
    """Stopping the agent does not wait for a slow answer: the request is cut and its batch "shut down"."""
    server = fake_openai_server
    server.hold_next(1)
    embedder = make(server, timeout=60, retries=3)
    errors: list[EmbedError] = []

    def call() -> None:
        try:
            embedder.embed(["held"])
        except EmbedError as err:
            errors.append(err)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    poll(lambda: len(server.requests) == 1, timeout=5, what="the first request")
    embedder.close()
    thread.join(timeout=BOUND)
    assert not thread.is_alive() and errors and errors[0].message == "embedder shut down"
    assert len(server.requests) == 1  # not retried
    server.release()
