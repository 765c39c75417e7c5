"""The configuration's sections about who may reach the agent: the MCP endpoint on loopback (its tokens, the users
they map to) and the control socket (`access`)."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ..errors import ConfigError
from .sections import _Section

_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$")  # what useradd accepts (a trailing $: machines)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class McpConfig(_Section):
    """The agent's MCP endpoint (streamable HTTP on loopback); `ragctl mcp` (stdio) works whatever this says."""

    enabled: bool = True
    host: str = "127.0.0.1"  # a loopback address only: 127.0.0.1 (or another 127.x), ::1, localhost
    port: int = Field(default=8739, ge=0, le=65535)  # 0: any free port (the bound one is in `ragctl status`)
    token: SecretStr | None = None  # optional bearer token clients must send (Authorization: Bearer ...)
    token_env: str | None = None  # or: the environment variable holding that token
    allowed_origins: tuple[str, ...] = ()  # extra browser Origins (http://127.0.0.1:PORT is always allowed)
    # access scope (docs/access.md): a user name -> that user's token (or "$VAR": the variable holding it)
    tokens: dict[str, SecretStr] = Field(default_factory=dict)
    anonymous: Literal["auto", "public", "refuse"] = "auto"  # a request without a token (see `http.Tokens`)
    ui: bool = True  # the web page at /ui/ on this endpoint (docs/web.md)

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, v: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for user, token in v.items():
            if not _USER_NAME.match(user):
                raise ValueError(f"mcp.tokens: {user!r} is not a user name")
            value = token.get_secret_value()
            if not value.strip():
                raise ValueError(f"mcp.tokens: the token of {user} is empty")
            if value.startswith("$") and not _ENV_NAME.match(value[1:]):
                raise ValueError(f"mcp.tokens: the token of {user} names no environment variable: {value!r}")
        return v

    @field_validator("host")
    @classmethod
    def _loopback(cls, v: str) -> str:
        if v == "localhost":
            return v
        try:
            loopback = ipaddress.ip_address(v).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"mcp.host must be a loopback address (127.0.0.1, ::1 or localhost), not {v!r}")
        return v

    def resolved_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The token, or None when none is configured. Raises ConfigError when token_env names an unset variable."""
        if self.token is not None:
            return self.token.get_secret_value()
        if self.token_env is None:
            return None
        value = (os.environ if environ is None else environ).get(self.token_env)
        if not value:
            raise ConfigError(
                f"mcp.token_env names ${self.token_env}, which is not set",
                f"set {self.token_env} in the agent's environment, or drop mcp.token_env",
            )
        return value

    def resolved_tokens(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each user's token ("$VAR" read from the environment). ConfigError for an unset variable, or for a token
        given twice (to two users, or also as the agent's own `token`)."""
        env = os.environ if environ is None else environ
        out: dict[str, str] = {}
        for user, secret in self.tokens.items():
            value = secret.get_secret_value()
            if value.startswith("$"):
                value = env.get(value[1:], "")
                if not value:
                    raise ConfigError(f"mcp.tokens.{user} names ${secret.get_secret_value()[1:]}, which is not set",
                                      "set it in the agent's environment (e.g. a systemd drop-in), or drop the entry")  # fmt: skip
            out[user] = value
        if len(set(out.values())) < len(out) or self.resolved_token(env) in out.values():
            raise ConfigError(
                "mcp.tokens: the same token is given twice", "give every user a token of their own"
            )
        return out


class AccessConfig(_Section):
    """Who may use the control socket (docs/access.md); what each caller sees is limited by file permissions."""

    connect: Literal["owner", "group", "anyone"] = "owner"  # besides the agent's own user and root
    group: str | None = None  # with connect = "group": its members may connect

    @model_validator(mode="after")
    def _group(self) -> AccessConfig:
        if self.connect == "group" and not self.group:
            raise ValueError('access.connect = "group" needs access.group, the name of the group')
        if self.connect != "group" and self.group:
            raise ValueError('access.group is used only with access.connect = "group"')
        return self

    @property
    def shared(self) -> bool:
        """Other local users may connect: the agent serves several users."""
        return self.connect != "owner"
