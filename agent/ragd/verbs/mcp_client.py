"""`mcp_client`: what an MCP client needs to reach the agent's HTTP endpoint: its URL and its bearer token.

Asked by `ragctl mcp-config --http` to print (or write) a client's configuration. The agent's own token goes only
to the agent's own user and root (who can read the config anyway); another user who may connect (docs/access.md)
gets the token `[mcp.tokens]` gives that user, or none. A token is never logged.
"""

from __future__ import annotations

from typing import TypedDict

from .. import access
from ..errors import ConfigError
from .pause import NoArgs
from .runtime import Resident


class McpClient(TypedDict):
    enabled: bool  # [mcp] enabled
    url: str | None  # the endpoint being served; None while it is not (starting, off, or failed: see error)
    error: str | None  # why it is not served
    token: str | None  # the bearer token clients must send; None when none is configured
    ui_url: str | None  # the web page's address (docs/web.md); None when it is not served


def mcp_client(rt: Resident, args: NoArgs | None = None) -> McpClient:
    served = rt.host.mcp_status()
    caller = access.current()
    try:
        own = rt.config.mcp.resolved_token() if caller.full else None
        token = own or rt.config.mcp.resolved_tokens().get(caller.name)
    except ConfigError:
        token = None  # token_env names an unset variable: the endpoint did not start, `error` says why
    return {"enabled": bool(served.get("enabled")), "url": served.get("url"), "error": served.get("error"),
            "token": token, "ui_url": served.get("ui_url")}  # fmt: skip
