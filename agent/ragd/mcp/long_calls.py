"""Long MCP tool calls (wait until indexed, re-index): progress notifications, and cancellation in the agent.

The call's work is a verb (verbs/wait.py, verbs/sync.py) running in a worker thread with a progress callback. The
callback sends `notifications/progress` (only when the client asked, with a progress token: the SDK's
`report_progress` checks) at most every PROGRESS_EVERY_S, and answers False once the client has cancelled the
call (`notifications/cancelled`): the verb then stops at its next step, so a cancelled wait does not go on
polling in the agent after the client has given up. `running` counts the calls whose work is still going on
(`ragctl status` shows it as `mcp.calls_running`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from ..errors import RagdError
from ..verbs.runtime import Progress

T = TypeVar("T")
PROGRESS_EVERY_S = 1.0


class LongCalls:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    async def run(self, ctx: Context, name: str, work: Callable[[Progress], T]) -> T:
        """`work(progress)` in a worker thread; progress reported to the client; stopped when it cancels."""
        loop = asyncio.get_running_loop()
        cancelled = threading.Event()
        started = time.monotonic()
        last = [0.0, 0.0]  # when the last notification went, the highest progress value sent

        def progress(line: Mapping[str, Any]) -> bool:
            if cancelled.is_set():
                return False
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                value, total, message = describe(line, now - started)
                last[1] = value = max(value, last[1])  # progress only goes up
                asyncio.run_coroutine_threadsafe(ctx.report_progress(value, total, message), loop)
            return True

        def counted() -> T:
            with self._lock:
                self.running += 1
            try:
                return work(progress)
            finally:
                with self._lock:
                    self.running -= 1

        try:
            return await anyio.to_thread.run_sync(counted, abandon_on_cancel=True)
        except RagdError as err:
            raise ToolError(str(err)) from None
        finally:
            cancelled.set()  # cancelled or done: the work stops at its next progress report


def describe(line: Mapping[str, Any], elapsed: float) -> tuple[float, float | None, str]:
    """A progress notification from a `busy` line (verbs/status.py): directories done of the phase's total
    when a phase runs, else seconds waited; and what is left, in words."""
    pending, running = int(line.get("pending_dirs") or 0), int(line.get("running_dirs") or 0)
    texts, notes = int(line.get("queued_texts") or 0), int(line.get("pending_mushrooms") or 0)
    left = [_n(pending + running, "directory", "directories") + " to index" if pending + running else "",
            _n(texts, "text", "texts") + " to embed" if texts else "",
            _n(notes, "change", "changes") + " to apply" if notes else ""]  # fmt: skip
    message = ", ".join(x for x in left if x) or "settling"
    done, total = line.get("dirs_done"), line.get("dirs_total")
    if isinstance(done, int) and isinstance(total, int) and total > 0:
        return float(done), float(total), message
    return round(elapsed, 1), None, message


def _n(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"
