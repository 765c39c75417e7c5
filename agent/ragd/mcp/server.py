"""`McpService`: the agent's MCP server on its own event loop thread, served over HTTP on loopback.

Start-up: the loop thread starts, the MCP server is built (importing the MCP SDK takes ~0.7 s, so it happens here
and not at import), and, if `[mcp] enabled`, a socket is bound on the loopback port and uvicorn serves the
streamable HTTP app on it. A port that cannot be bound (busy, not allowed) never stops the agent: the error is
logged and shown by `status()`; the stdio bridge (`ragctl mcp`, through `call_tool` / `read_resource`) keeps
working because it only needs the loop and the server, not the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from ragctl import protocol as p

from .. import access
from ..errors import ConfigError, RagdError

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

    from ..config import McpConfig
    from ..verbs.runtime import Resident
    from .app import RagdServer
    from .http import Guard, Tokens

log = logging.getLogger(__name__)

T = TypeVar("T")
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 600.0  # a search may wait for the embedding model to load, or for an API's retries


class McpService:
    def __init__(self, rt: Resident) -> None:
        self._rt = rt
        self.url: str | None = None
        self.ui_url: str | None = None  # the web page's address (docs/web.md), when it is served
        self.error: str | None = None
        self.state = "starting"  # then serving, failed (error says why), off ([mcp] enabled = false), stopped
        self._server: RagdServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._http: uvicorn.Server | None = None
        self._serving: Future[None] | None = None
        self._guard: Guard | None = None
        self._sessions: set[Future[None]] = set()
        self._stop_announcing: Callable[[], None] = lambda: None
        self._starter: threading.Thread | None = None

    @property
    def config(self) -> McpConfig:
        return self._rt.config.mcp

    # -- life cycle -------------------------------------------------------------------------------------------
    def start_in_background(self) -> None:
        """`start` on a thread of its own, so that the caller (the agent's main loop, which pings systemd's
        watchdog) never waits for the MCP stack's imports: ~0.7 s on a quiet machine, far longer on a loaded one.
        Until it is up, calls get "not running, try again in a moment"; `stop` waits for it first."""
        self._starter = threading.Thread(target=self._start_logged, name="mcp-start", daemon=True)
        self._starter.start()

    def wait_started(self, timeout: float = START_TIMEOUT_S) -> str:
        """Wait for a start under way (`start_in_background`); the state it left: serving, off or failed."""
        if self._starter is not None:
            self._starter.join(timeout)
        return self.state

    def _start_logged(self) -> None:
        try:
            self.start()
        except Exception as err:  # an MCP server that cannot start never stops the agent
            log.exception("the MCP server did not start")
            self.error, self.state = f"the MCP server did not start: {err}", "failed"

    def start(self) -> None:
        """Build the server and start its loop; serve HTTP if enabled. Never raises for a busy port."""
        from .app import build_server
        from .events import Announcer

        announcer = Announcer()
        self._server = build_server(lambda: self._rt, self._rt.version(), announcer)
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(ready,), name="mcp", daemon=True)
        self._thread.start()
        ready.wait()
        assert self._loop is not None
        self._stop_announcing = announcer.attach(self._loop, self._rt.changes)
        if self.config.enabled:
            self._start_http()
        else:
            self.state = "off"

    def _run_loop(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(_cancel(asyncio.all_tasks(loop)))  # e.g. sse-starlette's shutdown watcher
            loop.close()

    def _fail(self, message: str) -> None:
        self.error = message
        self.state = "failed"
        log.error("MCP over HTTP is off: %s", message)

    def _start_http(self) -> None:
        import uvicorn

        from .http import Endpoint, Tokens, http_app

        cfg = self.config
        try:
            tokens = Tokens.from_config(self._rt.config)
            sock = _bind(cfg.host, cfg.port)
        except ConfigError as err:
            return self._fail(str(err))
        except OSError as err:
            return self._fail(f"cannot listen on {cfg.host} port {cfg.port}: {err.strerror or err} "
                              "(set [mcp] port to a free port, or 0 for any; `ragctl mcp` still works)")  # fmt: skip
        quiet = logging.getLogger("mcp.server.streamable_http_manager")  # it logs a line for every session
        quiet.setLevel(max(quiet.getEffectiveLevel(), logging.WARNING))
        port = sock.getsockname()[1]
        assert self._server is not None and self._loop is not None
        self._guard = http_app(self._server, cfg.host, port, cfg.allowed_origins, tokens)
        endpoint = Endpoint(self._guard, self._web_page(tokens, port) if cfg.ui else None)
        config = uvicorn.Config(endpoint, log_config=None, log_level="warning", access_log=False,
                                lifespan="on", timeout_graceful_shutdown=2, ws="none")  # fmt: skip
        self._http = uvicorn.Server(config)
        self._serving = asyncio.run_coroutine_threadsafe(self._http.serve(sockets=[sock]), self._loop)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._http.started and not self._serving.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._http.started:
            sock.close()
            return self._fail("the HTTP server did not start (see the log above)")
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.url = f"http://{host}:{port}/mcp"
        self.state = "serving"
        self.ui_url = f"http://{host}:{port}/ui/" if cfg.ui else None
        without = {"full": "", "refuse": " (bearer token required)",
                   "public": " (without a token: what every local user may read)"}[tokens.without]  # fmt: skip
        log.info("MCP on %s%s", self.url, without)
        if self.ui_url:
            log.info(
                "web page on %s%s",
                self.ui_url,
                " (`ragctl ui` prints a link that signs in)" if tokens.own or tokens.users else "",
            )

    def _web_page(self, tokens: Tokens, port: int) -> Callable[[], ASGIApp]:
        """The web page's maker (web/app.py), and its throughput samples taken from now on."""
        from ..web.throughput import Throughput
        from .http import transport_security

        assert self._loop is not None
        throughput = Throughput(lambda: self._rt)
        asyncio.run_coroutine_threadsafe(throughput.run(), self._loop)
        checks = transport_security(self.config.host, port, self.config.allowed_origins)

        def make() -> ASGIApp:
            from ..web.app import WebPage
            from ..web.guard import Gate

            gate = Gate(tokens, checks.allowed_hosts or (), checks.allowed_origins or ())
            return WebPage(lambda: self._rt, gate, throughput)

        return make

    def stop(self) -> None:
        """Stop serving HTTP (open streams get STOP_TIMEOUT_S) and the stdio sessions, then stop the loop."""
        self.wait_started(START_TIMEOUT_S + STOP_TIMEOUT_S)  # a start still under way finishes first
        self._stop_announcing()
        for fut in list(self._sessions):
            fut.cancel()
        if self._http is not None and self._serving is not None:
            self._http.should_exit = True
            try:
                self._serving.result(STOP_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                self._http.force_exit = True
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
        self._http = self._serving = None
        self.url = self.ui_url = None
        self.state = "stopped"

    def status(self) -> dict[str, Any]:
        return {"enabled": self.config.enabled, "state": self.state, "url": self.url, "ui_url": self.ui_url, "error": self.error,
                "requests": self._guard.requests if self._guard is not None else 0,
                "sessions": len(self._sessions),
                "calls_running": self._server.long_calls.running if self._server is not None else 0}  # fmt: skip

    # -- calls for the stdio bridge (edges/mcp_verbs.py) ------------------------------------------------------
    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """tools/call on the agent's MCP server: the CallToolResult as it goes on the wire."""
        from .calls import call_tool

        return self._run(_as(access.current(), call_tool(self._need_server(), name, arguments)))

    def read_resource(self, uri: str) -> dict[str, Any]:
        """resources/read on the agent's MCP server: the ReadResourceResult as it goes on the wire."""
        from .calls import read_resource

        return self._run(_as(access.current(), read_resource(self._need_server(), uri)))

    def serve_session(self, conn: socket.socket, leftover: bytes = b"") -> None:
        """Serve one MCP session (`ragctl mcp`) on a control connection until it ends; blocks the caller's
        thread (the connection's own), not the loop."""
        from .session import serve

        session = serve(
            self._need_server(), conn, leftover
        )  # answered as the connection's caller, throughout
        fut = asyncio.run_coroutine_threadsafe(_as(access.current(), session), self._loop_or_fail())
        self._sessions.add(fut)
        try:
            fut.result()
        except (asyncio.CancelledError, ConnectionError):
            pass  # the agent stops, or the client went away
        except Exception:  # the session's boundary: a bug ends this session, never the agent
            log.exception("MCP session failed")
        finally:
            self._sessions.discard(fut)

    def check_running(self) -> None:
        """Raise RagdError (unavailable) unless the MCP server is up."""
        self._need_server()

    def _loop_or_fail(self) -> asyncio.AbstractEventLoop:
        self._need_server()
        assert self._loop is not None
        return self._loop

    def _need_server(self) -> RagdServer:
        if self._starter is not threading.current_thread():
            self.wait_started()  # a call in the agent's first moments waits for the server, not fails
        if self._server is None or self._loop is None or not self._loop.is_running():
            raise RagdError("the agent's MCP server is not running", "it starts with the agent; try again in a moment",
                            code=p.UNAVAILABLE)  # fmt: skip
        return self._server

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(CALL_TIMEOUT_S)
        except TimeoutError:
            fut.cancel()
            raise RagdError(f"the MCP call took more than {CALL_TIMEOUT_S:.0f} s", "see `ragctl status`",
                            code=p.TIMEOUT) from None  # fmt: skip


async def _as(caller: access.Caller, coro: Coroutine[Any, Any, T]) -> T:
    """`coro` run as `caller` (and the tasks and worker threads it starts)."""
    with access.acting_as(caller):
        return await coro


async def _cancel(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart rebinds despite TIME_WAIT
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    return sock
