"""The bundled model in worker processes: the same vectors as in the agent's process, a crashed worker fails its
batch alone, and stopping the pool fails what is under way as a shutdown. The real model, real processes."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from ragd.config import EmbeddingConfig, RunConfig
from ragd.errors import EmbedError
from ragd.pipeline.embed import LazyEmbedQueue
from ragd.pipeline.embed.base import SHUTDOWN
from ragd.pipeline.embed.local import LocalEmbedder
from ragd.pipeline.embed.pooled import PooledLocalEmbedder
from ragd.pipeline.pool import WorkerPool
from tests.support.poll import poll
from tests.unit.pipeline.test_workers import workers_of

TEXTS = ["知识库的代理 keeps folders searchable", "ERR_CONN_RESET: the peer closed the socket", ""]
LONG = ["长文本 a long text to embed " * 300] * 64  # seconds of work for one worker


def rss_mib(pid: int) -> float:
    try:
        return int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return 0.0


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    p = WorkerPool("embed", 1, 1024, 60.0)
    yield p
    p.close()


def test_vectors_from_a_worker_equal_the_in_process_model(pool: WorkerPool) -> None:
    pooled = PooledLocalEmbedder(pool)
    got = pooled.embed(TEXTS)
    assert got.shape == (3, 512) and got.dtype == np.float32
    np.testing.assert_allclose(got, LocalEmbedder().embed(TEXTS), rtol=1e-5, atol=1e-6)
    assert workers_of(os.getpid())
    assert pooled.embed([]).shape == (0, 512)


def test_a_worker_killed_under_a_batch_fails_that_batch_and_the_next_one_goes_through(
    pool: WorkerPool,
) -> None:
    pooled = PooledLocalEmbedder(pool)
    pooled.embed(TEXTS[:1])  # the worker has its model
    (worker,) = workers_of(os.getpid())
    loaded = rss_mib(worker)

    def kill_inside_the_batch() -> None:
        poll(lambda: rss_mib(worker) > loaded + 50, timeout=60, what="the worker to be inside the long batch")
        os.kill(worker, signal.SIGKILL)

    killer = threading.Thread(target=kill_inside_the_batch, daemon=True)
    killer.start()
    with pytest.raises(EmbedError) as crashed:
        pooled.embed(LONG)
    killer.join()
    assert crashed.value.message == (
        "the local model use-multilingual-v3 crashed under a batch of 64 texts (killed by SIGKILL)"
    )
    assert pooled.embed(TEXTS).shape == (3, 512)
    assert worker not in workers_of(os.getpid())


def test_closing_the_queue_under_a_batch_is_a_shutdown() -> None:
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=1))
    future = queue.submit(LONG)
    poll(lambda: workers_of(os.getpid()), timeout=60, what="the embed worker to start")
    queue.close()
    with pytest.raises(EmbedError) as err:
        future.result(timeout=60)
    assert err.value.code == SHUTDOWN
    poll(lambda: not workers_of(os.getpid()), timeout=60, what="the worker to be stopped")


def test_a_question_is_embedded_in_this_process_while_documents_go_to_the_workers() -> None:
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=1))
    try:
        question = queue.query("知识库的代理")
        assert not workers_of(os.getpid()), "a question started a worker"
        documents = queue.submit(["知识库的代理", *(f"text {i}" for i in range(39))]).result(timeout=120)
        assert workers_of(os.getpid())
        np.testing.assert_allclose(question, documents[0], rtol=1e-5, atol=1e-6)
        assert documents.shape == (40, 512)
        assert queue.stats.texts_embedded == 40
        assert queue.stats.requests == 3  # at most POOLED_BATCH (16) texts a batch: 16 + 16 + 8
    finally:
        queue.close()


def test_a_resting_agent_drops_its_question_model_and_the_next_question_loads_it_again() -> None:
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=1))
    try:
        assert not queue.rest()  # nothing loaded yet
        first = queue.query("磁盘空间 disk space")
        assert queue.loaded and queue.rest() and not queue.loaded
        np.testing.assert_allclose(queue.query("磁盘空间 disk space"), first, rtol=1e-6)
        assert queue.loaded and not workers_of(os.getpid())
    finally:
        queue.close()


def test_an_edits_texts_are_embedded_here_while_the_workers_are_busy_with_documents() -> None:
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=1))
    try:
        backlog = queue.submit([f"document text number {i} 文档" for i in range(400)])
        poll(lambda: queue.stats.in_flight > 0, timeout=60, what="the worker busy with the backlog")
        (worker,) = poll(lambda: workers_of(os.getpid()), timeout=60, what="the worker process")
        os.kill(worker, signal.SIGSTOP)  # stuck in its batch: an edit waiting for it would wait for ever
        try:
            edit = queue.submit(["an edited note 编辑过的笔记", "second chunk"], priority=True)
            vectors = edit.result(timeout=60)
        finally:
            os.kill(worker, signal.SIGCONT)
        assert not backlog.done()
        assert queue.stats.texts_embedded == 2
        again = queue.submit(["an edited note 编辑过的笔记"]).result(timeout=120)  # through the worker
        np.testing.assert_allclose(vectors[0], again[0], rtol=1e-5, atol=1e-6)
        assert backlog.result(timeout=300).shape == (400, 512)
        assert queue.stats.texts_embedded == 2 + 1 + 400
        many = queue.submit([f"t {i}" for i in range(40)], priority=True)  # more than an edit: the workers
        assert many.result(timeout=120).shape == (40, 512)
    finally:
        queue.close()


def test_a_few_texts_are_embedded_here_while_the_workers_are_not_running() -> None:
    """A fresh agent's first note, a small folder: embedded by the copy of the model in this process, not worth
    starting the workers for (seconds each); more within the window is a bigger job, which starts them."""
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=1))
    try:
        note = queue.submit(["知识库的代理 a new note"]).result(timeout=120)
        assert not workers_of(os.getpid()), "one note started the workers"
        np.testing.assert_allclose(note[0], queue.query("知识库的代理 a new note"), rtol=1e-5, atol=1e-6)
        for i in range(3):  # 1 + 48 texts within the window: still a few
            assert queue.submit([f"note {i} chunk {j}" for j in range(16)]).result(timeout=120).shape == (
                16,
                512,
            )
        assert not workers_of(os.getpid())
        assert queue.submit([f"more {j}" for j in range(16)]).result(timeout=120).shape == (16, 512)
        assert workers_of(os.getpid()), "65 texts within the window did not start the workers"
        assert queue.stats.texts_embedded == 1 + 48 + 16
    finally:
        queue.close()


def test_waiting_for_the_copy_here_that_warm_loads() -> None:
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=1))
    try:
        assert queue.wait_warm(0) and not queue.loaded  # nothing under way
        queue.warm()
        assert not queue.wait_warm(0), "the load was over before it could be waited for"
        assert queue.wait_warm(120) and queue.loaded
    finally:
        queue.close()


def test_without_run_settings_the_model_stays_in_this_process() -> None:
    queue = LazyEmbedQueue(EmbeddingConfig())
    try:
        assert queue.query("hello").shape == (512,)
        assert queue.submit(["hello"]).result(timeout=120).shape == (1, 512)
        assert not workers_of(os.getpid())
    finally:
        queue.close()


def model_in_this_worker() -> tuple[int, bool]:
    """In a worker: its pid, and whether its model is loaded (held a moment, so that the next probe goes to the
    other worker when there is one)."""
    import time

    from ragd.pipeline.embed import pooled

    time.sleep(0.5)
    return os.getpid(), pooled._MODEL is not None


def test_every_embed_worker_loads_its_model_as_it_starts() -> None:
    """A batch handed to a worker that has embedded nothing yet (an edit after the initial index went to the other
    one) does not wait for that worker's model: each loads it as it starts."""
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=2))
    try:
        assert queue.embed(TEXTS[:1]).shape == (
            1,
            512,
        )  # a few texts: embedded here; the probes start the workers
        pool = queue._pool
        assert pool is not None
        probes = [pool.submit(model_in_this_worker, ()) for _ in range(4)]
        answers = [f.result(timeout=120) for f in probes]
        assert all(loaded for _, loaded in answers), answers
    finally:
        queue.close()
    # without the warm-up, a worker's model waits for its first batch
    cold = WorkerPool("embed", 1, 1024, 60.0)
    try:
        pid, loaded = cold.submit(model_in_this_worker, ()).result(timeout=120)
        assert not loaded and pid in workers_of(os.getpid())
    finally:
        cold.close()
