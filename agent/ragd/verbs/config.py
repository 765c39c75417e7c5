"""`config check`: the config file as it would load now, secrets redacted (the running agent is not changed)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ..config import load_config
from .arguments import Args
from .runtime import Resident


class ConfigArgs(Args):
    action: Literal["check"] = "check"


class ConfigCheck(TypedDict):
    source: str | None  # the file
    config: dict[str, Any]  # its settings, secrets redacted
    valid: bool


def config(rt: Resident, args: ConfigArgs | None = None) -> ConfigCheck:
    """A ConfigError (naming the file and the key) when it does not load."""
    cfg = load_config(rt.host.config_path)
    return {"source": cfg.source, "config": cfg.redacted(), "valid": True}
