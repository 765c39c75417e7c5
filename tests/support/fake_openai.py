"""A real HTTP server on 127.0.0.1 that speaks the OpenAI embeddings API, for tests and benchmarks.

    with FakeOpenAI(dim=8) as server:          # or the `fake_openai_server` pytest fixture
        server.fail_next(2, status=429, retry_after=1)
        ...  # point embedding.base_url at server.base_url
        assert server.requests[0].texts == [...]

Vectors are deterministic: mode "hash" gives each distinct text a pseudo-random unit vector (seeded by the
md5 of the text); mode "words" gives a signed bag of hashed tokens (lower-cased words and single CJK
characters), so texts that share words get similar vectors. Behaviours settable at run time: `fail_next`
(status, Retry-After, retry-after-ms), `slow_next` / `delay` (seconds per request), `trickle_next` (headers
at once, then the body a byte at a time), `hold_next` / `release` (keep requests until released), `poison`
(a zero, NaN, infinite or null vector for every text containing a marker), `wrong_dim`, `expected_key` (401
otherwise; the 401 message echoes the key received, as a careless server might, to prove that clients redact
it). `abandoned` counts answers the client hung up on before they were sent in full.

Standalone: python -m tests.support.fake_openai --port 8765 --dim 512 --delay-ms 50 [--mode words]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

_TOKEN = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    time: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]
    body: Any
    status: int  # what the server answered (or was about to, if the client gave up first)

    @property
    def texts(self) -> list[str]:
        value = self.body.get("input") if isinstance(self.body, dict) else None
        return [value] if isinstance(value, str) else list(value or [])


@dataclass(frozen=True)
class _Plan:
    """What to do with one upcoming request instead of answering normally (or before answering)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    message: str | None = None
    trickle: float | None = None  # send the body at this many bytes per second
    trickle_head: bool = False  # ... and the status line and headers too
    hold: bool = False  # wait for release() before answering


POISONS = ("zero", "nan", "inf", "null")


def poisoned(kind: str, dim: int) -> list[float | None]:
    """A vector no index can use: all zeros, NaN or infinities (as Python's json writes them), or nulls (as
    JavaScript's JSON.stringify writes NaN)."""
    value = {"zero": 0.0, "nan": float("nan"), "inf": float("inf"), "null": None}[kind]
    return [value] * dim


def hash_vector(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def words_vector(text: str, dim: int) -> np.ndarray:
    """Signed feature hashing of the text's tokens: shared words -> positive cosine."""
    v = np.zeros(dim, dtype=np.float64)
    for token in _TOKEN.findall(text.lower()):
        h = int.from_bytes(hashlib.md5(token.encode("utf-8")).digest()[:8], "little")
        v[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = np.linalg.norm(v)
    return (v / norm).astype(np.float32) if norm else hash_vector(text, dim)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (an agent killed by a test) is no error of the server's: not
        printed (a soak's log held dozens of such tracebacks)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeOpenAI:
    """The server. Thread-safe; every knob may be changed while it runs."""

    def __init__(
        self,
        dim: int = 8,
        *,
        mode: str = "hash",
        expected_key: str | None = None,
        model: str | None = None,
        delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if mode not in ("hash", "words"):
            raise ValueError("mode is 'hash' or 'words'")
        self.dim, self.mode, self.expected_key, self.model = dim, mode, expected_key, model
        self.delay = delay  # seconds added to every request
        self.wrong_dim: int | None = None  # answer with vectors of this dimension instead
        self.reverse_order = False  # list `data` last text first (clients must sort by `index`)
        self.always_base64 = False  # answer in base64 whatever encoding_format asked (as some servers do)
        self.always_float = False  # answer in numbers whatever encoding_format asked (servers that ignore it)
        self.refuse_base64 = False  # answer 400 to encoding_format "base64" (servers that know only "float")
        self.html = False  # answer 200 with an HTML page (a base_url that points at a web site)
        self.poisons: dict[str, str] = {}  # marker -> kind: texts containing the marker get a poisoned vector
        self.abandoned = 0  # answers the client hung up on before they were sent in full
        self.requests: list[Recorded] = []
        self._released = threading.Event()
        self._plans: deque[_Plan] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server((host, port), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        *,
        retry_after: float | str | None = None,
        retry_after_ms: float | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next `n` requests with `status`, the given Retry-After / retry-after-ms headers and an
        OpenAI-shaped error body carrying `message`."""
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        with self._lock:
            self._plans.extend(_Plan(status, headers, message=message) for _ in range(n))

    def slow_next(self, n: int, seconds: float) -> None:
        """Delay the next `n` requests by `seconds` each (then answer normally)."""
        with self._lock:
            self._plans.extend(_Plan(delay=seconds) for _ in range(n))

    def trickle_next(self, n: int = 1, bytes_per_s: float = 1.0, *, head: bool = False) -> None:
        """Answer the next `n` requests normally, but send each body `bytes_per_s` bytes a second, one byte at
        a time after the headers (a ~300-byte answer at 1 byte/s takes minutes), or from the status line on
        with `head`: a client whose timeout is per read never gives up on it."""
        with self._lock:
            self._plans.extend(_Plan(trickle=bytes_per_s, trickle_head=head) for _ in range(n))

    def hold_next(self, n: int = 1, status: int = 200, *, message: str | None = None) -> None:
        """Keep the next `n` requests unanswered until `release()` (or the server stops); then answer them
        normally, or with `status` and an error carrying `message`."""
        with self._lock:
            self._released.clear()
            self._plans.extend(_Plan(status, hold=True, message=message) for _ in range(n))

    def release(self) -> None:
        self._released.set()

    def poison(self, marker: str, kind: str = "zero") -> None:
        """Give every text containing `marker` a poisoned vector (`POISONS`) until `unpoison` or `reset`."""
        if kind not in POISONS:
            raise ValueError(f"kind is one of {POISONS}")
        with self._lock:
            self.poisons[marker] = kind

    def unpoison(self, marker: str | None = None) -> None:
        with self._lock:
            if marker is None:
                self.poisons.clear()
            else:
                self.poisons.pop(marker, None)

    def reset(self) -> None:
        with self._lock:
            self._plans.clear()
            self.requests.clear()
            self.poisons.clear()
        self.delay, self.wrong_dim, self.reverse_order, self.always_base64 = 0.0, None, False, False
        self.always_float = self.refuse_base64 = False
        self.html = False
        self._released.set()

    @property
    def texts(self) -> list[str]:
        """Every text received, in arrival order."""
        with self._lock:
            return [t for r in self.requests for t in r.texts]

    def vector(self, text: str, dim: int | None = None) -> np.ndarray:
        """The vector this server gives `text`."""
        make = words_vector if self.mode == "words" else hash_vector
        return make(text, dim or self.dim)

    # -- request handling (called from the handler threads) --
    def _next_plan(self) -> _Plan:
        with self._lock:
            return self._plans.popleft() if self._plans else _Plan()

    def _record(self, entry: Recorded) -> None:
        with self._lock:
            self.requests.append(entry)

    def _abandoned(self) -> None:
        with self._lock:
            self.abandoned += 1

    def _poison_for(self, text: str) -> str | None:
        with self._lock:
            return next((kind for marker, kind in self.poisons.items() if marker in text), None)

    def _answer(self, path: str, headers: dict[str, str], body: Any) -> tuple[_Plan, Any]:
        """(status, headers, delay) and the JSON payload for one request."""
        if self.expected_key is not None:
            got = headers.get("authorization", "").removeprefix("Bearer ")
            if got != self.expected_key:
                return _Plan(401), _error(f"Incorrect API key provided: {got}", "invalid_api_key")
        plan = self._next_plan()
        if plan.status != 200:
            return plan, _error(plan.message or f"planned failure {plan.status}", "planned")
        if path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            return _Plan(404), _error(f"no route {path}", "not_found")
        payload = self._embeddings(body)
        return (_Plan(400) if "error" in payload else plan), payload

    def _embeddings(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or "input" not in body:
            return _error("'input' is required", "invalid_request")
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return _error(
                "'input' must be a string or a list of strings (tokens are not supported)", "invalid"
            )
        if any(t == "" for t in texts):
            return _error("'$.input' is invalid: empty strings are not allowed", "invalid_request")
        if self.refuse_base64 and body.get("encoding_format") == "base64":
            return _error("encoding_format: only 'float' is supported", "invalid_request")
        dim = self.wrong_dim or body.get("dimensions") or self.dim
        as_b64 = self.always_base64 or (body.get("encoding_format") == "base64" and not self.always_float)
        data = []
        for i, text in enumerate(texts):
            v: Any = self.vector(text, dim).tolist()
            kind = self._poison_for(text)
            if kind is not None:
                v = poisoned("nan" if as_b64 and kind == "null" else kind, dim)
            emb = base64.b64encode(np.array(v, dtype="<f4").tobytes()).decode() if as_b64 else v
            data.append({"object": "embedding", "index": i, "embedding": emb})
        if self.reverse_order:
            data.reverse()
        tokens = sum(len(t.split()) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": self.model or body.get("model", "fake"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            arrived = time.monotonic()
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body: Any = json.loads(raw or b"null")
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            plan, payload = server._answer(self.path, headers, body)
            server._record(Recorded(arrived, self.path, headers, body, plan.status))
            if plan.hold:
                while not server._released.wait(0.05):
                    if server._stopping.is_set():
                        return
            wait = server.delay + plan.delay
            if wait and server._stopping.wait(wait):
                return
            self._send(plan.status, plan.headers, payload, plan)

        def _send(self, status: int, headers: dict[str, str], payload: Any, plan: _Plan) -> None:
            html = server.html and status == 200
            data = b"<html><body>Welcome</body></html>" if html else json.dumps(payload).encode()
            try:
                if plan.trickle is not None and plan.trickle_head:
                    head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                    head += f"Content-Length: {len(data)}\r\n\r\n"
                    self._trickle(head.encode() + data, plan.trickle)
                    return
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if html else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if plan.trickle is None:
                    self.wfile.write(data)
                else:
                    self._trickle(data, plan.trickle)
            except OSError:  # BrokenPipeError, ConnectionResetError, an SSL EOF: the client went away
                server._abandoned()

        def _trickle(self, data: bytes, bytes_per_s: float) -> None:
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                if server._stopping.wait(1.0 / bytes_per_s):
                    return

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def fake_openai_server() -> Iterator[FakeOpenAI]:
    """A running FakeOpenAI (dim 8, hash mode); tweak its attributes in the test."""
    with FakeOpenAI() as server:
        yield server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a fake OpenAI embeddings API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--mode", choices=("hash", "words"), default="hash")
    parser.add_argument("--expected-key", default=None)
    args = parser.parse_args(argv)
    server = FakeOpenAI(
        args.dim, mode=args.mode, expected_key=args.expected_key, delay=args.delay_ms / 1000, port=args.port
    ).start()
    print(f"fake OpenAI embeddings API at {server.base_url} (dim {args.dim}, {args.mode})", flush=True)
    try:
        while True:
            time.sleep(3600)  # serve (on the server's thread) until Ctrl-C
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
