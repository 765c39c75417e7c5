"""Who a browser is, and the checks and headers every answer of the web page gets (docs/web.md).

- **Host and Origin** are checked as for MCP (the HTTP edge, edges/http.py, gives the gate the names it accepts):
  a request whose Host is not this loopback endpoint's own name (DNS rebinding) is refused with 421; one whose
  Origin is another site's with 403, and a POST must carry an Origin (or `Sec-Fetch-Site: same-origin`) at all, so that no other page can submit a
  form to the agent.
- **Tokens** are those of MCP (`access.tokens.Tokens`): the agent's own, one per user (`[mcp.tokens]`), and what a
  visitor without one gets (everything, what every local user may read, or the sign-in page). A token is given
  once, by the sign-in form or a `?token=` link (`ragctl ui`), and kept in a cookie (HttpOnly, SameSite=Strict)
  holding not the token but an HMAC of it: the cookie of a token stays valid across restarts of the agent and
  until the token is changed, and never shows the token itself.
- **Headers**: a strict Content-Security-Policy (the agent's own script and style only, nothing inline, nothing
  from elsewhere), no framing, no referrer, no caching of pages. A user's own file (`raw`) is served in a
  sandbox: a document with script in it runs none of it under the page's origin.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from .. import access
from ..access.tokens import Tokens

COOKIE = "ragd_ui"
COOKIE_LABEL = b"ragd web page"  # what the cookie's HMAC is of, under the token as key
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")  # fmt: skip
# A user's own file: one that can hold script (HTML, SVG, XML) is shown in a sandbox (an origin of its own, no
# script); any other (PDF, images, text) without script, but with the browser's own viewer allowed to show it.
RAW_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
RAW_PLAIN_CSP = (
    "default-src 'none'; object-src 'self'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'"
)
SCRIPTABLE = frozenset({"text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml"})
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # not no-referrer: a form of the page would then send Origin: null
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


def cookie_of(token: bytes) -> str:
    """The cookie value that stands for `token`."""
    return hmac.new(token, COOKIE_LABEL, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Visitor:
    """A browser's caller, and how it came to be that caller."""

    caller: access.Caller
    signed_in: bool  # by a token (its cookie), not as a visitor without one
    can_sign_in: bool  # tokens are configured: the page offers the sign-in form

    @property
    def who(self) -> str:
        if self.caller.full:
            return (
                "the agent's owner"
                if self.signed_in or not self.can_sign_in
                else "everyone (no token needed)"
            )
        if self.caller.kind == "public":
            return "anyone: what every local user may read"
        return f"{self.caller.name}: what {self.caller.name} may read"


class Gate:
    def __init__(self, tokens: Tokens, hosts: Iterable[str], origins: Iterable[str]) -> None:
        self.tokens = tokens
        self.hosts = frozenset(hosts)
        self.origins = frozenset(origins)

    @property
    def can_sign_in(self) -> bool:
        return self.tokens.own is not None or bool(self.tokens.users)

    # -- requests -----------------------------------------------------------------------------------------------
    def refusal(
        self, method: str, host: str | None, origin: str | None, fetch_site: str | None
    ) -> tuple[int, str] | None:
        """(status, why) when a request must be refused before anything else, else None."""
        if host not in self.hosts:
            return (
                421,
                f"this page answers only as {' or '.join(sorted(self.hosts))}, not as {host or 'no host'}",
            )
        if origin is not None and origin not in self.origins:
            return 403, f"a page of {origin} may not use the agent's page"
        if method not in ("GET", "HEAD") and origin is None and fetch_site != "same-origin":
            return 403, "a form sent without an Origin header is refused (it may come from another site)"
        return None

    # -- visitors -----------------------------------------------------------------------------------------------
    def by_cookie(self, value: str | None) -> Visitor | None:
        """The visitor a request with cookie `value` (None: no cookie) is; None: the sign-in page."""
        if value:
            caller = self.tokens.caller(value.encode(), lambda token: cookie_of(token).encode())
            if caller is not None:
                return Visitor(caller, True, self.can_sign_in)
        caller = self.tokens.caller(None)
        return Visitor(caller, False, self.can_sign_in) if caller is not None else None

    def by_token(self, token: str) -> tuple[Visitor, str] | None:
        """The visitor token `token` makes, with the cookie that keeps it; None: not a token of this agent."""
        given = token.strip().encode()
        if not given:
            return None
        caller = self.tokens.caller(given)
        if caller is None:
            return None
        return Visitor(caller, True, self.can_sign_in), cookie_of(given)
