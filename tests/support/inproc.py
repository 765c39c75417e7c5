"""The whole agent in this process, started and stopped by the lifecycle's own steps (as `ragd run` does)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragctl.protocol import Client
from ragd.config import Config
from ragd.edges.lifecycle import Lifecycle


@contextmanager
def agent_in_process(
    config: Config, roots: list[Path], *, config_path: Path | None = None
) -> Iterator[Lifecycle]:
    """`startup()`, `main_loop()` on a thread, the MCP server started, then `stop_requested` and `shutdown()`; signals are left alone."""
    life = Lifecycle(config, config_path, roots)
    main_loop = threading.Thread(target=life.main_loop, name="main-loop", daemon=True)
    try:
        life.startup()
        main_loop.start()
        life.mcp.wait_started()  # the MCP server starts beside the main loop, after READY
        yield life
    finally:
        life.stop_requested.set()
        if main_loop.is_alive():
            main_loop.join(5)
        life.shutdown()


def control(life: Lifecycle, verb: str, args: dict[str, Any] | None = None, timeout: float = 60) -> Any:
    """One request on the agent's control socket, as ragctl sends it."""
    with Client(life.socket_path, timeout=timeout) as c:
        return c.call(verb, args)
