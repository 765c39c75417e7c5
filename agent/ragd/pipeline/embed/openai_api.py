"""An OpenAI-compatible embeddings API (OpenAI, Azure-style gateways, vLLM, Ollama, LM Studio, TEI, ...).

The `openai` client is used with `max_retries=0`: retries are ours, so that they follow ragd's settings
(`retries`, `max_backoff`), honour `Retry-After` / `retry-after-ms`, count into the queue's stats and stop
at once on shutdown. Retried: 408, 409, 429, 5xx, timeouts, connection errors. Not retried: every other 4xx
(a wrong key, model or request does not heal by waiting) and a response of the wrong shape or dimension.
The API key never appears in a message or a log line: error texts are redacted before they leave this module.

`embedding.timeout` is a total deadline per attempt: connecting, sending the request and receiving the whole
response must fit in it, whatever the server's pace (a `deadline.Watchdog` cuts the connection when it passes);
a server trickling its answer is cut off at the deadline like a silent one, and the attempt is a retryable
timeout. Each retry gets a new `timeout`; the backoff waits between attempts are not counted in it. For that,
each thread that embeds has its own client with one keep-alive connection.

Vectors are asked for in base64 (the API's compact form, which the `openai` client asks for too): a quarter of
the bytes of JSON numbers, and no number to format or parse on either side. A server that refuses it (400 or 422
to a request that asked for base64, answered when the same batch asks for "float") gets "float" from then on; a
server that ignores it and sends numbers is read as well.

Vectors are returned as the server sent them, NaN and infinities included (Python servers write `NaN`, JS
ones `null`): the embed queue refuses unusable rows per text, so that one bad text fails only its own file.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import openai
import orjson

from ...config import EmbeddingConfig
from ...errors import EmbedError, EmbedRateLimited, EmbedUnavailable
from .base import clean_text, redact, shut_down_error
from .deadline import Watchdog
from .retry import next_delay, retry_after

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUS = frozenset({408, 409, 429})
REFUSED_REQUEST = frozenset({400, 422})  # how a server that knows only "float" answers "base64"
_Encoding = Literal["float", "base64"]


@dataclass(frozen=True)
class _Http:
    """One thread's client, with one connection, and the watchdog keeping its requests' deadline."""

    client: openai.OpenAI
    watchdog: Watchdog


@dataclass(frozen=True)
class _Failure:
    """One failed attempt: what to say, whether to try again, how long the server asked us to wait."""

    text: str
    retryable: bool
    status: int | None = None
    wait: float | None = None


def safe_url(url: str) -> str:
    """`url` fit for a message: no user:password part, no query (some gateways take a key there)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1], query="", fragment=""))


class OpenAIEmbedder:
    """Embeds through `POST {base_url}/embeddings`. Thread-safe: each calling thread has its own connection."""

    def __init__(self, cfg: EmbeddingConfig, *, api_key: str | None, base_url: str | None = None) -> None:
        self.model_name = cfg.model_name
        self.dimension = cfg.dim
        self.base_url = safe_url(base_url or cfg.base_url or DEFAULT_BASE_URL)
        self.source = f"the embeddings API at {self.base_url}"
        self.retries = 0  # retried attempts so far, all batches together
        self._cfg = cfg
        self._key = api_key
        self._url = base_url or cfg.base_url or DEFAULT_BASE_URL
        self._stop = threading.Event()
        self._count_lock = threading.Lock()
        self._local = threading.local()
        self._clients: list[_Http] = []
        self._encoding: _Encoding = "base64"  # "float" once the server refused base64

    def close(self) -> None:
        """Interrupt any backoff wait or request in flight (the batch fails with "embedder shut down") and
        release the connections."""
        self._stop.set()
        with self._count_lock:
            clients, self._clients = self._clients, []
        for http in clients:
            http.watchdog.expire()
            http.client.close()

    def _http(self) -> _Http:
        """This thread's client (made on first use)."""
        http: _Http | None = getattr(self._local, "http", None)
        if http is None:
            if self._stop.is_set():
                raise shut_down_error()
            watchdog = Watchdog()
            limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=1, max_keepalive_connections=1)
            client = openai.OpenAI(
                base_url=self._url,
                api_key=self._key or "not-needed",
                timeout=self._cfg.timeout,  # per phase; the watchdog keeps the total
                max_retries=0,
                http_client=openai.DefaultHttpxClient(
                    limits=limits, event_hooks={"request": [watchdog.on_request]}
                ),
            )
            http = self._local.http = _Http(client, watchdog)
            with self._count_lock:
                self._clients.append(http)
        return http

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        inputs = [clean_text(t) or " " for t in texts]  # the OpenAI API rejects empty strings
        last: _Failure | None = None
        attempts = self._cfg.retries + 1
        for attempt in range(attempts):
            if last is not None:
                self._pause(attempt - 1, last)
            if self._stop.is_set():
                raise shut_down_error()
            response = self._attempt(inputs)
            if isinstance(response, _Failure):
                last = response
                if not last.retryable:
                    raise self._rejected(last) from None
                log.warning(
                    "embeddings API at %s, attempt %d/%d: %s", self.base_url, attempt + 1, attempts, last.text
                )
                continue
            return self._vectors(response, len(inputs))
        assert last is not None
        raise self._gave_up(last, attempts)

    def _pause(self, retry: int, last: _Failure) -> None:
        delay = next_delay(retry, self._cfg.max_backoff, last.wait)
        with self._count_lock:
            self.retries += 1
        if self._stop.wait(delay):
            raise shut_down_error()

    def _attempt(self, inputs: list[str]) -> Any:
        """One request under the deadline (two when the server refuses base64): the parsed answer, or the
        _Failure to report."""
        encoding = self._encoding
        answer = self._attempt_as(inputs, encoding)
        if encoding == "base64" and isinstance(answer, _Failure) and answer.status in REFUSED_REQUEST:
            answer = self._attempt_as(inputs, "float")
            if not isinstance(answer, _Failure) and self._encoding == "base64":
                self._encoding = "float"
                log.debug("%s does not send vectors in base64: asking for numbers from now on", self.source)
        return answer

    def _attempt_as(self, inputs: list[str], encoding: _Encoding) -> Any:
        http = self._http()
        try:
            with http.watchdog.deadline(self._cfg.timeout):
                content = self._request(http.client, inputs, encoding)
        except openai.APIError as err:
            if self._stop.is_set():  # close() cut it
                raise shut_down_error() from None
            return self._classify(err, timed_out=http.watchdog.expired)
        return _parse(content)

    def _request(self, client: openai.OpenAI, inputs: list[str], encoding: _Encoding) -> bytes:
        extra: dict[str, Any] = {"dimensions": self.dimension} if self._cfg.send_dimensions else {}
        # The raw body is parsed here: the client's own parsing builds a Python object per vector (per float
        # when numbers come back) and cost more CPU than everything else in a run.
        raw = client.embeddings.with_raw_response.create(
            input=inputs, model=self.model_name, encoding_format=encoding, **extra
        )
        return raw.http_response.content

    def _classify(self, err: openai.APIError, *, timed_out: bool = False) -> _Failure:
        cause = err.__cause__ or err.__context__
        if timed_out or isinstance(err, openai.APITimeoutError):
            return _Failure(f"no answer within {self._cfg.timeout:g} s (timeout)", True)
        if isinstance(err, openai.APIConnectionError):
            return _Failure(f"cannot connect: {redact(str(cause or err), self._key)}", True)
        if isinstance(err, openai.APIStatusError):
            status = err.status_code
            text = f"HTTP {status}: {self._server_message(err)}"
            retryable = status in RETRYABLE_STATUS or status >= 500
            return _Failure(text, retryable, status, retry_after(err.response.headers) if retryable else None)
        return _Failure(f"malformed response: {redact(str(err), self._key)}", False)

    def _server_message(self, err: openai.APIStatusError) -> str:
        body = err.body
        message = body.get("message") if isinstance(body, dict) else None
        text = str(message) if message else (str(body) if body else err.message)
        return redact(text, self._key)[:300]

    def _rejected(self, failure: _Failure) -> EmbedError:
        where, status = f"the embeddings API at {self.base_url}", failure.status
        if status == 401:
            hint = (
                f"set embedding.api_key or the environment variable {self._cfg.api_key_env}"
                if self._key is None
                else f"check embedding.api_key / ${self._cfg.api_key_env}: wrong, revoked or expired key"
            )
            return EmbedError(f"{where} rejected the API key (401)", hint)
        if status == 403:
            return EmbedError(
                f"{where} refused access to model {self.model_name} (403): {failure.text}",
                "check that the key's project or organisation may use this model",
            )
        if status == 404:
            return EmbedError(
                f"{where} has no model {self.model_name} or no /embeddings endpoint (404): {failure.text}",
                "check embedding.base_url (it usually ends in /v1) and embedding.model",
            )
        if status is not None:
            return EmbedError(
                f"{where} rejected a batch for model {self.model_name} ({failure.text})",
                "a text may exceed the model's input limit (lower splitter.chunk_size), or the "
                "model may not accept `dimensions` (set embedding.send_dimensions = false)",
            )
        return EmbedError(
            f"{where} sent a {failure.text} for model {self.model_name}",
            "check that embedding.base_url points at an OpenAI-compatible embeddings API",
        )

    def _gave_up(self, last: _Failure, attempts: int) -> EmbedUnavailable:
        if last.status == 429:
            hint = "the API is rate-limiting: lower embedding.concurrency or batch_size, or raise retries"
        elif last.status is None:
            hint = "check that the server is running and reachable, or raise embedding.timeout / retries"
        else:
            hint = "the server is failing; check its logs, or raise embedding.retries"
        unavailable = EmbedRateLimited if last.status == 429 else EmbedUnavailable
        return unavailable(
            f"the embeddings API at {self.base_url} (model {self.model_name}) failed "
            f"{attempts} attempt{'s' if attempts != 1 else ''}; last error: {last.text}",
            hint,
        )

    def _vectors(self, response: Any, count: int) -> np.ndarray:
        data = response.get("data") if isinstance(response, dict) else None
        source = self.source
        if not isinstance(data, list):
            raise EmbedError(
                f"{source} did not answer with a list of embeddings (model {self.model_name}): "
                f"{redact(str(response), self._key)[:120]!r}",
                "check that embedding.base_url points at an OpenAI-compatible API (it usually ends in /v1)",
            )
        if not all(isinstance(item, dict) and isinstance(item.get("index"), int) for item in data):
            raise EmbedError(
                f"{source} returned embeddings without an index (model {self.model_name})",
                "the server is not OpenAI-compatible; check embedding.base_url",
            )
        data = sorted(data, key=lambda item: item["index"])
        if len(data) != count:
            raise EmbedError(
                f"{source} returned {len(data)} vectors for {count} texts (model {self.model_name})",
                "the server is not OpenAI-compatible for batched input; lower embedding.batch_size",
            )
        if [item["index"] for item in data] != list(range(count)):
            raise EmbedError(
                f"{source} returned vectors with indexes that do not match the {count} texts sent",
                "the server is not OpenAI-compatible; check embedding.base_url",
            )
        try:
            vectors = np.array([_as_floats(item.get("embedding")) for item in data], dtype=np.float32)
        except (TypeError, ValueError) as err:
            raise EmbedError(
                f"{source} returned malformed vectors for model {self.model_name}: {err}",
                "check that embedding.base_url points at an embeddings API",
            ) from None
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            got = "mixed-length" if vectors.ndim != 2 else f"{vectors.shape[1]}-d"
            raise EmbedError(
                f"expected {self.dimension}-d vectors from model {self.model_name} at {self.base_url}, "
                f"got {got}; set embedding.dimension",
                "set embedding.dimension to the model's dimension, or embedding.send_dimensions = true "
                "if the model can shorten its vectors",
            )
        return vectors


def _parse(content: bytes) -> Any:
    """The answer's JSON; its first 200 characters as text when it is not JSON (the caller reports those)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    try:  # NaN / Infinity, which orjson refuses: the embed queue then refuses just those texts' vectors
        return json.loads(content)
    except ValueError:
        return content[:200].decode("utf-8", "replace")


def _as_floats(embedding: Any) -> Any:
    """A vector as floats: a list (a server that sends numbers) as is, a base64 string decoded."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4")
    return embedding
