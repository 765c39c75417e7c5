"""The agent's MCP server over streamable HTTP on loopback: DNS-rebinding checks and the optional bearer token."""

from __future__ import annotations

import hmac

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

PATH = "/mcp"


def transport_security(host: str, port: int, extra_origins: tuple[str, ...]) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: only this loopback endpoint's own names are accepted."""
    names = {host, "127.0.0.1", "localhost"} if host != "::1" else {"[::1]", "localhost"}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{n}:{port}" for n in names),
        allowed_origins=sorted(f"http://{n}:{port}" for n in names) + list(extra_origins),
    )


class Guard:
    """ASGI middleware in front of the MCP app: counts requests and, with a token configured, refuses (401) any
    request that does not carry `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests += 1
            if self.token is not None and not self._authorized(scope):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token or b"")
        return False


async def _unauthorized(send: Send) -> None:
    body = (
        b'{"error": "unauthorized: this MCP endpoint needs Authorization: Bearer <token> (see [mcp] token)"}'
    )
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="ragd"'),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(
    server: MCPServer, host: str, port: int, extra_origins: tuple[str, ...], token: str | None
) -> Guard:
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        transport_security=transport_security(host, port, extra_origins),
        host=host,
    )
    return Guard(app, token)
