"""`McpService`: the agent's MCP server on its own event loop thread, with its stdio sessions.

Start-up: the loop thread starts and the MCP server is built (importing the MCP SDK takes ~0.7 s, so it happens
here and not at import); then whatever the lifecycle asked to run after it (`then`: the HTTP edge, edges/http.py,
which serves the server's streamable HTTP app on the loopback port, on this loop). The stdio bridge
(`ragctl mcp`, through `serve_session` / `call_tool` / `read_resource`) only needs the loop and the server.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from ragctl import protocol as p

from .. import access, heap
from ..errors import RagdError

if TYPE_CHECKING:
    from ..verbs.runtime import Resident
    from .app import RagdServer

log = logging.getLogger(__name__)

T = TypeVar("T")
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 600.0  # a search may wait for the embedding model to load, or for an API's retries


class McpService:
    def __init__(self, rt: Resident) -> None:
        self._rt = rt
        self.error: str | None = None
        self.state = "starting"  # then running, failed (error says why), stopped
        self._server: RagdServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._then: Callable[[], None] = lambda: None
        self._first: Callable[[], object] = lambda: None
        self._sessions: set[Future[None]] = set()
        self._stop_announcing: Callable[[], None] = lambda: None
        self._starter: threading.Thread | None = None

    @property
    def server(self) -> RagdServer:
        """The MCP server, once started."""
        assert self._server is not None
        return self._server

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """`coro` run on the server's event loop, once started."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    # -- life cycle -------------------------------------------------------------------------------------------
    def start_in_background(
        self, then: Callable[[], None] = lambda: None, first: Callable[[], object] = lambda: None
    ) -> None:
        """`start` on a thread of its own, then `then` on that thread (the HTTP edge), so that the caller (the
        agent's main loop, which pings systemd's watchdog) never waits for the MCP stack's imports: ~0.7 s on a
        quiet machine, far longer on a loaded one. Until it is up, calls get "not running, try again in a
        moment"; `stop` waits for it (and `then`) first."""
        self._then, self._first = then, first
        self._starter = threading.Thread(target=self._start_logged, name="mcp-start", daemon=True)
        self._starter.start()

    def wait_started(self, timeout: float = START_TIMEOUT_S) -> str:
        """Wait for a start under way (`start_in_background`, with its `then`); the state it left: running or
        failed."""
        if self._starter is not None:
            self._starter.join(timeout)
        return self.state

    def _start_logged(self) -> None:
        try:
            self._first()
            self.start()
            self._then()
            heap.settle()  # the MCP stack's imports out of the collector's passes
        except Exception as err:  # an MCP server that cannot start never stops the agent
            log.exception("the MCP server did not start")
            self.error, self.state = f"the MCP server did not start: {err}", "failed"

    def start(self) -> None:
        """Build the server and start its loop."""
        from .app import build_server
        from .events import Announcer

        announcer = Announcer()
        self._server = build_server(lambda: self._rt, self._rt.version(), announcer)
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(ready,), name="mcp", daemon=True)
        self._thread.start()
        ready.wait()
        assert self._loop is not None
        self._stop_announcing = announcer.attach(self._loop, self._rt.changes)
        self.state = "running"

    def _run_loop(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(_cancel(asyncio.all_tasks(loop)))  # e.g. sse-starlette's shutdown watcher
            loop.close()

    def stop(self) -> None:
        """Stop the stdio sessions, then the loop (the HTTP edge has stopped serving on it first)."""
        self.wait_started(START_TIMEOUT_S + STOP_TIMEOUT_S)  # a start still under way finishes first
        self._stop_announcing()
        for fut in list(self._sessions):
            fut.cancel()
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
        self.state = "stopped"

    def status(self) -> dict[str, Any]:
        """The server's state and error, its stdio sessions and the long calls running (edges/http.py adds the
        port's)."""
        return {"state": self.state, "error": self.error, "sessions": len(self._sessions),
                "calls_running": self._server.long_calls.running if self._server is not None else 0}  # fmt: skip

    # -- calls for the stdio bridge (edges/mcp_verbs.py) ------------------------------------------------------
    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """tools/call on the agent's MCP server: the CallToolResult as it goes on the wire."""
        from .calls import call_tool

        return self._run(_as(access.current(), call_tool(self._need_server(), name, arguments)))

    def read_resource(self, uri: str) -> dict[str, Any]:
        """resources/read on the agent's MCP server: the ReadResourceResult as it goes on the wire."""
        from .calls import read_resource

        return self._run(_as(access.current(), read_resource(self._need_server(), uri)))

    def serve_session(self, conn: socket.socket, leftover: bytes = b"") -> None:
        """Serve one MCP session (`ragctl mcp`) on a control connection until it ends; blocks the caller's
        thread (the connection's own), not the loop."""
        from .session import serve

        session = serve(
            self._need_server(), conn, leftover
        )  # answered as the connection's caller, throughout
        fut = asyncio.run_coroutine_threadsafe(_as(access.current(), session), self._loop_or_fail())
        self._sessions.add(fut)
        try:
            fut.result()
        except (asyncio.CancelledError, ConnectionError):
            pass  # the agent stops, or the client went away
        except Exception:  # the session's boundary: a bug ends this session, never the agent
            log.exception("MCP session failed")
        finally:
            self._sessions.discard(fut)

    def check_running(self) -> None:
        """Raise RagdError (unavailable) unless the MCP server is up."""
        self._need_server()

    def _loop_or_fail(self) -> asyncio.AbstractEventLoop:
        self._need_server()
        assert self._loop is not None
        return self._loop

    def _need_server(self) -> RagdServer:
        if self._starter is not threading.current_thread():
            self.wait_started()  # a call in the agent's first moments waits for the server, not fails
        if self._server is None or self._loop is None or not self._loop.is_running():
            raise RagdError("the agent's MCP server is not running", "it starts with the agent; try again in a moment",
                            code=p.UNAVAILABLE)  # fmt: skip
        return self._server

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(CALL_TIMEOUT_S)
        except TimeoutError:
            fut.cancel()
            raise RagdError(f"the MCP call took more than {CALL_TIMEOUT_S:.0f} s", "see `ragctl status`",
                            code=p.TIMEOUT) from None  # fmt: skip


async def _as(caller: access.Caller, coro: Coroutine[Any, Any, T]) -> T:
    """`coro` run as `caller` (and the tasks and worker threads it starts)."""
    with access.acting_as(caller):
        return await coro


async def _cancel(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
