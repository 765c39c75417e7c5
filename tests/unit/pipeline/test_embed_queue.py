"""EmbedQueue: batching across callers and threads, error isolation, shutdown."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from ragd.config import EmbeddingConfig
from ragd.errors import EmbedError, EmbedRateLimited, EmbedUnavailable
from ragd.pipeline.embed import EmbedQueue, make_embedder
from ragd.pipeline.embed.base import NOT_FINITE, ZERO, row_problems
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

DIM = 4


def vec(text: str) -> np.ndarray:
    digest = hashlib.md5(text.encode()).digest()
    return np.frombuffer(digest, dtype=np.uint32)[:DIM].astype(np.float32)


UNUSABLE = {"zero-row": 0.0, "nan-row": float("nan"), "inf-row": float("inf")}


class RecordingEmbedder:
    """Deterministic vectors; records every batch; fails batches holding "bad"; can hold its first call.
    Texts "zero-row", "nan-row" and "inf-row" get an unusable vector (as a misbehaving model would answer)."""

    model_name = "recording"
    dimension = DIM

    def __init__(self, hold_first: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.closed = False
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.batches.append(list(texts))
        self.release.wait(10)
        if "bad" in texts:
            raise EmbedError("the model refused 'bad'", "remove it")
        if "boom" in texts:
            raise RuntimeError("a bug in the embedder")
        if "short" in texts:
            return np.zeros((len(texts) - 1, DIM), dtype=np.float32)
        return np.stack([np.full(DIM, UNUSABLE[t], np.float32) if t in UNUSABLE else vec(t) for t in texts])

    def close(self) -> None:
        self.closed = True
        self.release.set()

    @property
    def seen(self) -> list[str]:
        return [t for b in self.batches for t in b]


def run_callers(queue: EmbedQueue, calls: list[list[str]]) -> list[np.ndarray | EmbedError]:
    """Each call in its own thread; their results (or EmbedErrors) in call order."""
    results: list[np.ndarray | EmbedError] = [EmbedError("not run")] * len(calls)

    def call(i: int) -> None:
        try:
            results[i] = queue.embed(calls[i])
        except EmbedError as err:
            results[i] = err

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    return results


def expect(texts: list[str]) -> np.ndarray:
    return np.stack([vec(t) for t in texts])


def behind_a_held_batch(
    embedder: RecordingEmbedder, queue: EmbedQueue, first: list[str], calls: list[list[str]]
) -> list[np.ndarray | EmbedError]:
    """Run `calls` (one thread each) while the only worker is held on `first`, so their texts queue up and share
    the next requests; then release the worker and return each call's result."""
    held = threading.Thread(target=queue.embed, args=(first,))
    held.start()
    poll(lambda: len(embedder.batches) == 1, timeout=5, what="the only worker to be busy with `first`")
    done: list[list[np.ndarray | EmbedError]] = []
    runner = threading.Thread(target=lambda: done.append(run_callers(queue, calls)))
    runner.start()
    poll(lambda: queue.stats.queued == sum(len(c) for c in calls), timeout=5, what="every text to be queued")
    assert queue.stats.in_flight == len(first)
    embedder.release.set()
    runner.join(timeout=10)
    held.join(timeout=10)
    return done[0]


def test_batches_callers_from_many_threads() -> None:
    embedder = RecordingEmbedder(hold_first=True)
    queue = EmbedQueue(embedder, batch_size=64, concurrency=1)
    calls = [[f"c{i}-a", f"c{i}-b"] for i in range(8)]
    try:
        results = behind_a_held_batch(embedder, queue, ["first"], calls)
    finally:
        queue.close()
    for texts, got in zip(calls, results, strict=True):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, expect(texts))
    assert len(embedder.batches) == 2 < len(calls)  # 8 callers' texts went in one request
    stats = queue.stats
    assert (stats.requests, stats.texts_embedded, stats.queued, stats.in_flight) == (2, 17, 0, 0)


def test_splits_a_large_call_and_keeps_order() -> None:
    embedder = RecordingEmbedder()
    queue = EmbedQueue(embedder, batch_size=3, concurrency=2)
    try:
        texts = [f"t{i}" for i in range(10)]
        np.testing.assert_array_equal(queue.embed(texts), expect(texts))
        assert sorted(len(b) for b in embedder.batches) == [1, 3, 3, 3]
        assert queue.embed([]).shape == (0, DIM) and queue.stats.requests == 4
    finally:
        queue.close()


def test_a_failed_batch_fails_only_its_callers() -> None:
    embedder = RecordingEmbedder(hold_first=True)
    queue = EmbedQueue(embedder, batch_size=2, concurrency=1)
    calls = [["a1", "a2"], ["p1", "bad", "p3", "p4", "p5"], ["b1", "b2"]]
    try:
        results = behind_a_held_batch(embedder, queue, ["warm", "up"], calls)
    finally:
        queue.close()
    by_first = {c[0]: r for c, r in zip(calls, results, strict=True)}
    failed = by_first["p1"]
    assert isinstance(failed, EmbedError) and "refused 'bad'" in failed.message
    for key, texts in (("a1", calls[0]), ("b1", calls[2])):
        ok = by_first[key]
        assert isinstance(ok, np.ndarray)
        np.testing.assert_array_equal(ok, expect(texts))
    assert "p3" not in embedder.seen  # the rest of a failed call is dropped, not embedded for nothing
    stats = queue.stats
    assert stats.failed_batches == 1 and stats.last_error is not None and "bad" in stats.last_error
    assert stats.queued == 0 and stats.in_flight == 0


def test_an_unusable_row_fails_only_its_caller_in_a_shared_batch() -> None:
    """One request holds four callers' texts; the model answers a NaN vector for one text of one caller and a zero
    vector for one of another: those two callers get EmbedError saying so, the other two get their vectors."""
    embedder = RecordingEmbedder(hold_first=True)
    queue = EmbedQueue(embedder, batch_size=64, concurrency=1)
    calls = [["a1", "a2"], ["p1", "nan-row", "p3"], ["b1"], ["q1", "zero-row"]]
    try:
        results = behind_a_held_batch(embedder, queue, ["warm", "up"], calls)
    finally:
        queue.close()
    assert len(embedder.batches) == 2 and len(embedder.batches[1]) == 8  # all four callers shared one request
    got = {c[0]: r for c, r in zip(calls, results, strict=True)}
    for key, texts in (("a1", calls[0]), ("b1", calls[2])):
        ok = got[key]
        assert isinstance(ok, np.ndarray)
        np.testing.assert_array_equal(ok, expect(texts))
    nan_err, zero_err = got["p1"], got["q1"]
    assert isinstance(nan_err, EmbedError) and isinstance(zero_err, EmbedError)
    assert (
        nan_err.message
        == "the embedder recording returned a non-finite (NaN or infinite) vector for 1 of 3 texts"
    )
    assert zero_err.message == "the embedder recording returned a zero vector for 1 of 2 texts"
    assert "retried later" in nan_err.hint
    stats = queue.stats
    assert (stats.requests, stats.failed_batches, stats.rejected, stats.texts_embedded) == (2, 1, 2, 5)
    assert stats.last_error is not None and "recording returned" in stats.last_error
    assert stats.queued == 0 and stats.in_flight == 0


def test_a_caller_with_an_unusable_row_is_dropped_from_later_batches() -> None:
    """A caller split over several batches fails at its first unusable row; its texts still waiting are not sent,
    and the callers behind it are embedded."""
    embedder = RecordingEmbedder(hold_first=True)
    queue = EmbedQueue(embedder, batch_size=2, concurrency=1)
    calls = [["inf-row", "zero-row", "p3", "p4", "p5"], ["b1", "b2"]]
    try:
        results = behind_a_held_batch(embedder, queue, ["warm"], calls)
    finally:
        queue.close()
    failed, ok = results
    assert isinstance(failed, EmbedError)
    assert failed.message == (
        "the embedder recording returned a zero vector and a non-finite (NaN or infinite) vector for 2 of 2 texts"
    )
    assert isinstance(ok, np.ndarray)
    np.testing.assert_array_equal(ok, expect(calls[1]))
    assert "p3" not in embedder.seen
    assert queue.stats.queued == 0 and queue.stats.in_flight == 0


def test_row_problems_agree_with_the_index() -> None:
    """A vector passes the embed stage exactly when the index accepts it (so no sidecar holds one it refuses)."""
    from ragd.errors import RagdError
    from ragd.index.zvec.schema import check_vector

    rows = np.array(
        [
            [0.1, 0.2, 0.3, 0.4],
            [0.0, 0.0, 0.0, 0.0],
            [np.nan, 1.0, 1.0, 1.0],
            [np.inf, 0.0, 0.0, 0.0],
            [-np.inf, 0.0, 0.0, 0.0],
            [3e38, 3e38, 0.0, 0.0],  # finite values whose norm overflows float32
            [1e-45, 0.0, 0.0, 0.0],  # a denormal whose square underflows to zero
            [1e-20, 0.0, 0.0, 0.0],
        ],
        dtype=np.float32,
    )
    problems = row_problems(rows)
    assert problems == [None, ZERO, NOT_FINITE, NOT_FINITE, NOT_FINITE, NOT_FINITE, ZERO, None]
    for row, problem in zip(rows, problems, strict=True):
        try:
            with np.errstate(over="ignore", under="ignore"):
                check_vector(row, DIM, "x")
            accepted = True
        except RagdError:
            accepted = False
        assert accepted == (problem is None), (row, problem)


def test_unexpected_errors_and_bad_shapes_become_embed_errors() -> None:
    embedder = RecordingEmbedder()
    queue = EmbedQueue(embedder, batch_size=8, concurrency=1)
    try:
        with pytest.raises(EmbedError, match="RuntimeError: a bug in the embedder"):
            queue.embed(["boom"])
        with pytest.raises(EmbedError, match="returned 1 vectors for 2 texts"):
            queue.embed(["short", "x"])
        np.testing.assert_array_equal(queue.embed(["still", "works"]), expect(["still", "works"]))
    finally:
        queue.close()


def test_close_fails_waiting_callers_and_later_calls() -> None:
    embedder = RecordingEmbedder(hold_first=True)
    queue = EmbedQueue(embedder, batch_size=1, concurrency=1)
    calls = [["in-flight"], ["queued-1", "queued-2"]]
    done: list[list[np.ndarray | EmbedError]] = []
    runner = threading.Thread(target=lambda: done.append(run_callers(queue, calls)))
    runner.start()
    poll(
        lambda: queue.stats.in_flight == 1 and queue.stats.queued == 2,
        timeout=5,
        what="1 in flight, 2 queued",
    )
    queue.close()
    runner.join(timeout=10)
    assert not runner.is_alive() and embedder.closed
    for result in done[0]:
        assert isinstance(result, EmbedError) and result.message == "embedder shut down"
    with pytest.raises(EmbedError, match="shut down"):
        queue.embed(["after"])
    queue.close()  # idempotent


def test_many_threads_get_their_own_rows() -> None:
    embedder = RecordingEmbedder()
    queue = EmbedQueue(embedder, batch_size=7, concurrency=3)
    calls = [[f"w{w}-{i}-{j}" for j in range((w + i) % 5 + 1)] for w in range(8) for i in range(10)]
    try:
        results = run_callers(queue, calls)
    finally:
        queue.close()
    for texts, got in zip(calls, results, strict=True):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, expect(texts))
    assert queue.stats.texts_embedded == sum(map(len, calls))
    assert all(len(b) <= 7 for b in embedder.batches)


def test_queue_over_the_fake_openai_server() -> None:
    with FakeOpenAI(dim=8, delay=0.05) as server:
        cfg = EmbeddingConfig(
            provider="openai", model="m", dimension=8, base_url=server.base_url, retries=2, max_backoff=0.05
        )
        server.fail_next(1, 500)
        queue = EmbedQueue(make_embedder(cfg), batch_size=16, concurrency=2)
        calls = [[f"doc {i} chunk {j}" for j in range(3)] for i in range(12)]
        try:
            results = run_callers(queue, calls)
        finally:
            queue.close()
        for texts, got in zip(calls, results, strict=True):
            assert isinstance(got, np.ndarray)
            np.testing.assert_allclose(got, np.stack([server.vector(t) for t in texts]), atol=1e-6)
        assert set(server.texts) == {t for c in calls for t in c}
        assert queue.stats.retries == 1 and queue.stats.requests < len(calls)


@contextmanager
def _over_api(*, retries: int, **queue_args: Any) -> Iterator[tuple[FakeOpenAI, EmbedQueue]]:
    """A queue over the fake OpenAI server, with `retries` (backoff short), closed after."""
    with FakeOpenAI(dim=8) as server:
        cfg = EmbeddingConfig(
            provider="openai",
            model="m",
            dimension=8,
            base_url=server.base_url,
            retries=retries,
            max_backoff=0.05,
        )
        queue = EmbedQueue(make_embedder(cfg), **queue_args)
        try:
            yield server, queue
        finally:
            queue.close()


def test_an_embeddings_api_that_is_down_fails_the_waiting_texts_at_once_then_is_probed() -> None:
    """An outage met by a folder of many files: the first batch goes through its retries; every other text fails at
    once with the same error, and so does every text submitted while the API is held down (none reaches the server);
    then one batch is tried, and the API is used again once it answers."""
    with _over_api(retries=2, batch_size=2, concurrency=1, down_pause=1.0) as (server, queue):
        server.fail_next(100_000, 503, message="upstream overloaded")
        futures = [queue.submit([f"file {i} chunk {j}" for j in range(3)]) for i in range(40)]
        errors = [f.exception(timeout=30) for f in futures]
        assert all(isinstance(e, EmbedUnavailable) for e in errors)
        assert "503" in str(errors[0]) and "not tried again" in str(errors[-1])
        assert len(server.requests) == 3  # one batch: its attempt and two retries
        down = queue.stats.down_until
        assert down is not None and down > time.time()
        late = queue.submit(["written meanwhile"])
        assert isinstance(late.exception(timeout=1), EmbedUnavailable) and len(server.requests) == 3
        server.reset()  # the API is back
        time.sleep(1.1)
        got = queue.embed(["after the outage"])
        np.testing.assert_allclose(got[0], server.vector("after the outage"), atol=1e-6)
        assert queue.stats.down_until is None


def test_a_probe_that_fails_holds_the_api_down_longer() -> None:
    with _over_api(retries=0, batch_size=4, concurrency=2, down_pause=0.5) as (server, queue):
        server.fail_next(100_000, 503)
        assert isinstance(queue.submit(["a"]).exception(timeout=10), EmbedUnavailable)
        first = queue.stats.down_until
        time.sleep(0.6)
        assert isinstance(queue.submit(["b"]).exception(timeout=10), EmbedUnavailable)  # the probe
        second = queue.stats.down_until
        assert first is not None and second is not None and second - time.time() > 0.8  # doubled: 1 s
        assert len(server.requests) == 2


def test_an_error_that_waiting_does_not_heal_does_not_hold_the_api_down() -> None:
    """A refused text (400) fails its own batch only: the next batch is sent."""
    with _over_api(retries=2, batch_size=1, concurrency=1) as (server, queue):
        server.fail_next(2, 400, message="input too long")  # asked in base64, then in numbers: both refused
        first = queue.submit(["too long"])
        second = queue.submit(["fine"])
        err = first.exception(timeout=10)
        assert isinstance(err, EmbedError) and not isinstance(err, EmbedUnavailable)
        assert second.result(timeout=10).shape == (1, 8) and queue.stats.down_until is None


def test_rate_limited_is_told_by_the_status_not_by_the_text() -> None:
    """A 500 whose message (or the server's address) holds "429" is a failure, not a rate limit; 429s through all
    the retries are a rate limit, and so is every text failed at once while held down after them."""
    with _over_api(retries=1, batch_size=4, concurrency=1, down_pause=0.2) as (server, queue):
        server.fail_next(2, 500, message="upstream 429 rate-limit proxy failed")
        err = queue.submit(["a"]).exception(timeout=10)
        assert type(err) is EmbedUnavailable and "429" in str(err)
        assert queue.stats.rate_limited is False
        time.sleep(0.3)
        server.fail_next(2, 429)
        assert type(queue.submit(["b"]).exception(timeout=10)) is EmbedRateLimited
        assert queue.stats.rate_limited is True
        assert type(queue.submit(["c"]).exception(timeout=1)) is EmbedRateLimited  # held down: not sent
        assert len(server.requests) == 4


def test_try_now_ends_the_pause() -> None:
    """`ragctl sync` after the API came back: the next batch is sent at once, not after the pause."""
    with _over_api(retries=0, batch_size=4, concurrency=1, down_pause=600.0) as (server, queue):
        server.fail_next(1, 503)
        assert isinstance(queue.submit(["a"]).exception(timeout=10), EmbedUnavailable)
        assert isinstance(queue.submit(["b"]).exception(timeout=1), EmbedUnavailable)  # held down
        queue.try_now()
        assert queue.embed(["c"]).shape == (1, 8) and queue.stats.down_until is None
        assert len(server.requests) == 2


def test_a_zero_pause_never_holds_the_api_down() -> None:
    with _over_api(retries=0, batch_size=4, concurrency=1, down_pause=0) as (server, queue):
        server.fail_next(1, 503)
        assert isinstance(queue.submit(["a"]).exception(timeout=10), EmbedUnavailable)
        assert queue.embed(["b"]).shape == (1, 8) and queue.stats.down_until is None
