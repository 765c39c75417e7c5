"""The agent's one HTTP port (loopback): MCP at /mcp and the web page at /ui/ side by side, behind the same checks.

`HttpEdge` binds the port after READY, on the MCP server's start thread (mcp/server.py: `McpService`), and serves
it with uvicorn on that server's event loop. It owns what every request meets first:
- the **Host and Origin** checks against DNS rebinding (`transport_security`: only this endpoint's own names);
- the **tokens** (`access.tokens.Tokens`, from `[mcp] token` / `[mcp.tokens]`) and the user each maps to: MCP
  requests carry one as a bearer token (`Guard`), the web page keeps one as a cookie (web/guard.py's `Gate`);
- the **routing** (`Endpoint`): /mcp to MCP's streamable HTTP app, every other path to the web page (web/app.py),
  built at its first request.

A port that cannot be bound (busy, not allowed) never stops the agent: the error is logged and shown by
`status()`; the stdio bridge (`ragctl mcp`) keeps working because it only needs the MCP server, not the port.
Importing this module is cheap: the MCP SDK, starlette and uvicorn are imported when the port is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from ..access.tokens import Tokens
from ..errors import ConfigError
from ..mcp.server import START_TIMEOUT_S, STOP_TIMEOUT_S

if TYPE_CHECKING:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..config import McpConfig
    from ..mcp.server import McpService
    from ..verbs.runtime import Resident

log = logging.getLogger(__name__)

PATH = "/mcp"


def transport_security(host: str, port: int, extra_origins: tuple[str, ...]) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: only this loopback endpoint's own names are accepted."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = {host, "127.0.0.1", "localhost"} if host != "::1" else {"[::1]", "localhost"}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{n}:{port}" for n in names),
        allowed_origins=sorted(f"http://{n}:{port}" for n in names) + list(extra_origins),
    )


class Guard:
    """ASGI middleware in front of the MCP app: counts requests, refuses (401) those its `Tokens` refuse, and puts
    each request's caller in its scope (where mcp/app.py's `caller_of` reads it)."""

    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        from ..mcp.app import CALLER_KEY

        self.app = app
        self.tokens = tokens
        self.requests = 0
        self.key = CALLER_KEY

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests += 1
            caller = self.tokens.caller(_bearer(scope))
            if caller is None:
                await _unauthorized(send)
                return
            scope[self.key] = caller
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes | None:
    """The bearer token of a request; b"" for an Authorization header that carries none (refused, as a wrong one)."""
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            scheme, _, given = bytes(value).partition(b" ")
            return given.strip() if scheme.lower() == b"bearer" else b""
    return None


async def _unauthorized(send: Send) -> None:
    body = (
        b'{"error": "unauthorized: this MCP endpoint needs Authorization: Bearer <token> '
        b'(see [mcp] token and [mcp.tokens])"}'
    )
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="ragd"'),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Endpoint:
    """The loopback endpoint: PATH to MCP (its `Guard`), every other path to the web page (web/app.py) when it is
    on, built at its first request (its templates are not read, nor jinja2 imported, before anyone opens it)."""

    def __init__(self, mcp: Guard, page: Callable[[], ASGIApp] | None) -> None:
        self.mcp = mcp
        self._make_page = page
        self._page: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] == "http"
            and self._make_page is not None
            and path != PATH
            and not path.startswith(PATH + "/")
        ):
            if self._page is None:
                self._page = self._make_page()
            return await self._page(scope, receive, send)
        await self.mcp(scope, receive, send)


class HttpEdge:
    """The port: started after the MCP server (`McpService.start_in_background(then=edge.start)`), stopped before
    it; its `status()` is `ragctl status`'s "mcp"."""

    def __init__(self, rt: Resident, mcp: McpService) -> None:
        self._rt = rt
        self._mcp = mcp
        self.url: str | None = None
        self.ui_url: str | None = None  # the web page's address (docs/web.md), when it is served
        self.error: str | None = None
        self.state = "starting"  # then serving, failed (error says why), off ([mcp] enabled = false), stopped
        self._http: uvicorn.Server | None = None
        self._serving: Future[None] | None = None
        self._guard: Guard | None = None

    @property
    def config(self) -> McpConfig:
        return self._rt.config.mcp

    # -- life cycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Serve HTTP if enabled, on the MCP server's loop (once the server is up). Never raises for a busy port."""
        if self.config.enabled:
            self._start_http()
        else:
            self.state = "off"

    def _fail(self, message: str) -> None:
        self.error = message
        self.state = "failed"
        log.error("MCP over HTTP is off: %s", message)

    def _start_http(self) -> None:
        import uvicorn

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
        mcp_app = self._mcp.server.streamable_http_app(
            streamable_http_path=PATH,
            transport_security=transport_security(cfg.host, port, cfg.allowed_origins),
            host=cfg.host,
        )
        self._guard = Guard(mcp_app, tokens)
        endpoint = Endpoint(self._guard, self._web_page(tokens, port) if cfg.ui else None)
        config = uvicorn.Config(endpoint, log_config=None, log_level="warning", access_log=False,
                                lifespan="on", timeout_graceful_shutdown=2, ws="none")  # fmt: skip
        self._http = uvicorn.Server(config)
        self._serving = self._mcp.submit(self._http.serve(sockets=[sock]))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._http.started and not self._serving.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._http.started:
            sock.close()
            return self._fail("the HTTP server did not start (see the log above)")
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.url = f"http://{host}:{port}{PATH}"
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

        throughput = Throughput(lambda: self._rt)
        self._mcp.submit(throughput.run())
        checks = transport_security(self.config.host, port, self.config.allowed_origins)

        def make() -> ASGIApp:
            from ..web.app import WebPage
            from ..web.guard import Gate

            gate = Gate(tokens, checks.allowed_hosts or (), checks.allowed_origins or ())
            return WebPage(lambda: self._rt, gate, throughput)

        return make

    def stop(self) -> None:
        """Stop serving HTTP (open streams get STOP_TIMEOUT_S); before the MCP server's loop stops."""
        self._mcp.wait_started(START_TIMEOUT_S + STOP_TIMEOUT_S)  # a start still under way finishes first
        if self._http is not None and self._serving is not None:
            self._http.should_exit = True
            try:
                self._serving.result(STOP_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                self._http.force_exit = True
        self._http = self._serving = None
        self.url = self.ui_url = None
        self.state = "stopped"

    def status(self) -> dict[str, Any]:
        """The endpoint's status (`ragctl status`'s "mcp"): the port's, or the MCP server's when it failed."""
        mcp = self._mcp.status()
        failed = mcp["state"] == "failed"  # the MCP server did not start: no port either
        return {"enabled": self.config.enabled, "state": mcp["state"] if failed else self.state, "url": self.url,
                "ui_url": self.ui_url, "error": mcp["error"] if failed else self.error,
                "requests": self._guard.requests if self._guard is not None else 0,
                "sessions": mcp["sessions"], "calls_running": mcp["calls_running"]}  # fmt: skip


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
