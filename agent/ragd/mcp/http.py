"""The agent's MCP server over streamable HTTP on loopback: DNS-rebinding checks, and who each request is by its
bearer token (docs/access.md)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import access

if TYPE_CHECKING:
    from ..config import Config

log = logging.getLogger(__name__)

PATH = "/mcp"
CALLER_KEY = "ragd.caller"  # the request's caller, in its ASGI scope (read by app.caller_of)


def transport_security(host: str, port: int, extra_origins: tuple[str, ...]) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: only this loopback endpoint's own names are accepted."""
    names = {host, "127.0.0.1", "localhost"} if host != "::1" else {"[::1]", "localhost"}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{n}:{port}" for n in names),
        allowed_origins=sorted(f"http://{n}:{port}" for n in names) + list(extra_origins),
    )


@dataclass(frozen=True)
class Tokens:
    """Who a request is, by its bearer token:
    - the agent's own token (`[mcp] token` / `token_env`): the agent's own user, unrestricted;
    - a token of `[mcp.tokens]`: that user, answered with what the user can read;
    - no token: `without`: "full" (nothing configured on an agent of one user: as before access scope), "refuse"
      (401), or "public" (what every local user may read);
    - any other token, or the token of a user who no longer exists: 401.
    """

    own: bytes | None = None
    users: tuple[tuple[bytes, str], ...] = ()
    without: Literal["full", "public", "refuse"] = "full"

    @classmethod
    def from_config(cls, config: Config) -> Tokens:
        """The tokens of `config`; ConfigError when one names an unset variable or is given twice."""
        mcp = config.mcp
        own = mcp.resolved_token()
        users = tuple((token.encode(), user) for user, token in mcp.resolved_tokens().items())
        without: Literal["full", "public", "refuse"]
        if mcp.anonymous != "auto":
            without = mcp.anonymous
        elif config.access.shared or users:
            without = "public"
        else:
            without = "refuse" if own else "full"
        return cls(own.encode() if own else None, users, without)

    @property
    def required(self) -> bool:
        return self.without == "refuse"

    def caller(self, given: bytes | None, shown: Callable[[bytes], bytes] = bytes) -> access.Caller | None:
        """The caller a request with bearer token `given` (None: no token) is answered as; None: refused. With
        `shown`, `given` is compared with `shown(token)` rather than with each token (the web page's cookie)."""
        if given is None:
            return {"full": access.agent(), "public": access.PUBLIC}.get(self.without)
        if self.own is not None and hmac.compare_digest(given, shown(self.own)):
            return access.agent()
        name = None
        for token, user in self.users:  # every one compared, in constant time
            if hmac.compare_digest(given, shown(token)):
                name = user
        if name is None:
            return None
        caller = access.for_user(name)
        if caller is None:
            log.warning("MCP: refused the token of %s: there is no such user", name)
        return caller


class Guard:
    """ASGI middleware in front of the MCP app: counts requests, refuses (401) those its `Tokens` refuse, and puts
    each request's caller in its scope."""

    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        self.app = app
        self.tokens = tokens
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests += 1
            caller = self.tokens.caller(_bearer(scope))
            if caller is None:
                await _unauthorized(send)
                return
            scope[CALLER_KEY] = caller
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


def http_app(
    server: MCPServer, host: str, port: int, extra_origins: tuple[str, ...], tokens: Tokens
) -> Guard:
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        transport_security=transport_security(host, port, extra_origins),
        host=host,
    )
    return Guard(app, tokens)
