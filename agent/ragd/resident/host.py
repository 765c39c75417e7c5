"""What the agent needs of the process that runs it (edges.lifecycle.Lifecycle)."""

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
    def relock(self) -> bool:
        """Take the instance lock again after its file vanished with the data dir (False: another agent has it)."""
