"""What the agent needs of the process that runs it (edges.lifecycle.Lifecycle is one; `Detached` is none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class Host(Protocol):
    @property
    def socket_path(self) -> Path: ...
    @property
    def config_path(self) -> Path | None: ...
    @property
    def reload_error(self) -> str | None: ...
    def stopping(self) -> bool: ...
    def reload(self) -> dict[str, list[str]]: ...
    def mcp_status(self) -> dict[str, Any]: ...


class Detached:
    """No process around the agent: no socket, no config file to reload, never stopping (tests, benchmarks)."""

    socket_path = Path("/nonexistent")
    config_path = None
    reload_error = None

    def stopping(self) -> bool:
        return False

    def reload(self) -> dict[str, list[str]]:
        return {"added": [], "removed": []}

    def mcp_status(self) -> dict[str, Any]:
        return {"enabled": False, "url": None, "error": None, "requests": 0}
