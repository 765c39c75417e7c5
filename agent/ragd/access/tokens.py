"""Who a request to the agent's HTTP endpoint is, by its bearer token (docs/access.md): the tokens of `[mcp]`, and
the user each maps to. Read by the HTTP edge (edges/http.py) for MCP and by the web page's gate (web/guard.py)
for its cookie."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import caller as access

if TYPE_CHECKING:
    from ..config import Config

log = logging.getLogger(__name__)


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
