"""`config check`: the config file as it would load now, secrets redacted (the running agent is not changed)."""

from __future__ import annotations

from typing import Any, Literal

from ..config import load_config
from .arguments import Args
from .runtime import Resident


class ConfigArgs(Args):
    action: Literal["check"] = "check"


def config(rt: Resident, args: ConfigArgs | None = None) -> dict[str, Any]:
    """{"source": the file, "config": its settings, "valid": true}; a ConfigError names the file and the key."""
    cfg = load_config(rt.host.config_path)
    return {"source": cfg.source, "config": cfg.redacted(), "valid": True}
