"""`ragctl ui [--open] [--json]`: the address of the agent's web page (docs/web.md).

When the agent wants a token from its visitors, the address is a sign-in link (`?token=`) holding the caller's
token, as the `mcp_client` verb gives it (the agent's own token to its own user and root, a user's token of
`[mcp.tokens]` to that user): the page keeps it in a cookie and drops it from the address at once.
"""

from __future__ import annotations

import argparse
import webbrowser
from typing import Any
from urllib.parse import quote

from .context import EXIT_OK, CliError, Ctx


def ui(ctx: Ctx, ns: argparse.Namespace) -> int:
    with ctx.connect(ctx.timeout) as client:
        info = client.call("mcp_client")
    url = _page_url(info)
    token = info.get("token")
    result: dict[str, Any] = {"url": url, "link": f"{url}?token={quote(token, safe='')}" if token else url,
                              "token_in_link": bool(token)}  # fmt: skip
    if ns.open:
        result["opened"] = _open(result["link"])
    ctx.emit(result, _text(result, ns.open))
    return EXIT_OK


def _page_url(info: dict[str, Any]) -> str:
    if not info.get("enabled"):
        raise CliError("the agent's web page is off: it is served on the MCP HTTP endpoint, and [mcp] enabled = false",
                       "set [mcp] enabled = true in the agent's config and restart it")  # fmt: skip
    if not info.get("url"):
        why = info.get("error") or "it is still starting"
        raise CliError(f"the agent's HTTP endpoint is not serving: {why}", "see `ragctl status`")
    if "ui_url" not in info:  # an agent older than the page
        raise CliError(
            "this agent has no web page (it is older than this ragctl)", "upgrade and restart the agent"
        )
    if not info["ui_url"]:
        raise CliError("the agent's web page is off ([mcp] ui = false)",
                       "set [mcp] ui = true in the agent's config and restart it")  # fmt: skip
    return str(info["ui_url"])


def _open(link: str) -> bool:
    try:
        return webbrowser.open(link)
    except webbrowser.Error:
        return False


def _text(result: dict[str, Any], asked_to_open: bool) -> str:
    lines = [str(result["link"])]
    if result["token_in_link"]:
        lines.append("this link holds your token and signs the browser in: keep it private")
    if asked_to_open and not result.get("opened"):
        lines.append("no browser could be started here: open the link in one yourself")
    return "\n".join(lines) + "\n"
