"""A local OpenAI-compatible embeddings API for the benchmarks, so that they measure ragd and not a model.

    with EmbeddingsAPI(dim=64, delay=0.05) as api:     # 127.0.0.1, a free port
        config = f'base_url = "{api.base_url}"\\ndimension = {api.dim}'
        ...
        print(api.requests, api.texts)                  # how many requests and texts it answered

Each distinct text gets a deterministic pseudo-random unit vector (seeded by the md5 of the text); `delay` is
added to every request. bench/ does not import tests/: the tests' server (tests/support/fake_openai.py) also
fails, holds, trickles and poisons on request, which no benchmark needs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import numpy as np


def vector(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).astype("<f4")


class EmbeddingsAPI:
    """`POST /v1/embeddings` on 127.0.0.1, answered from a thread per connection until the `with` block ends."""

    def __init__(self, dim: int = 512, *, delay: float = 0.0) -> None:
        self.dim, self.delay = dim, delay
        self.requests = 0  # requests answered
        self.texts = 0  # texts embedded
        self._lock = threading.Lock()
        self._httpd = _Server(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingsAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        """The status and the JSON payload for one request."""
        if path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            return 404, _error(f"no route {path}")
        texts = body.get("input") if isinstance(body, dict) else None
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            return 400, _error("'input' must be a non-empty string or a list of them")
        dim = int(body.get("dimensions") or self.dim)
        as_b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            v = vector(text, dim)
            emb: Any = base64.b64encode(v.tobytes()).decode() if as_b64 else v.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        with self._lock:
            self.requests += 1
            self.texts += len(texts)
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": body.get("model", "bench"), "usage": usage}


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: EmbeddingsAPI) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api = api


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect

    def do_POST(self) -> None:
        api = cast(_Server, self.server).api
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        status, payload = api.answer(self.path, body)
        if api.delay:
            time.sleep(api.delay)  # the model's time per request, as configured
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass
