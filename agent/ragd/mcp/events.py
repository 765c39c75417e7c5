"""Change announcements: the documents and listings that changed, told to the MCP clients that want to know.

- 2026-07-28 clients open a `subscriptions/listen` stream (the SDK's ListenHandler, fed by the `bus` given to the
  server): `notifications/resources/updated` for the resources the stream names, and
  `notifications/resources/list_changed` when it asks for it.
- 2025 clients (the `initialize` handshake): `resources/subscribe` / `resources/unsubscribe` (registered here)
  → `notifications/resources/updated` to each subscribed connection; `notifications/resources/list_changed` to
  every connection that finished the handshake (the capability `resources.listChanged` says it will come).

What changes: for a file indexed anew, failed, skipped or removed, its `ragd://file/…` and `ragd://chunks/…`
resources and its directory's `ragd://dir/…`; for a directory removed, its listing and its parent's (and every
2025 subscription under it). The agent's journal of changes (resident/changes.py: each batch as the history
recorded it) calls in from the job threads; the changes are gathered on the MCP loop for COALESCE_S and announced
once, so a folder of a thousand new files is a handful of notifications, not thousands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated

from ..resident.changes import Change
from ..vocabulary import ChangeKind
from .resources import uri

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.session import ServerSession

    from ..resident.changes import ChangeLog

log = logging.getLogger(__name__)

COALESCE_S = 0.5
MAX_SESSIONS = 1024  # 2025 connections remembered for list changes (the oldest is forgotten first)
# a file that failed or was skipped leaves the listings as they were; one indexed or removed changes them
_SAME_LISTINGS = (ChangeKind.FAILED, ChangeKind.SKIPPED)


class Announcer:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._subscribed: dict[str, dict[int, ServerSession]] = {}  # uri -> connection -> a session on it
        self._sessions: dict[int, ServerSession] = {}  # connections that finished the handshake
        self._loop: asyncio.AbstractEventLoop | None = None
        self._uris: set[str] = set()
        self._list_changed = False
        self._flush: asyncio.TimerHandle | None = None

    # -- the server's side -----------------------------------------------------------------------------------
    def install(self, server: MCPServer) -> None:
        """Serve `resources/subscribe` and `resources/unsubscribe`, and remember handshake connections."""
        low = server._lowlevel_server  # the SDK registers these methods only on its low-level server
        low.add_request_handler("resources/subscribe", mcp_types.SubscribeRequestParams, self._subscribe)
        low.add_request_handler(
            "resources/unsubscribe", mcp_types.UnsubscribeRequestParams, self._unsubscribe
        )
        low.add_notification_handler(
            "notifications/initialized", mcp_types.NotificationParams, self._initialized
        )

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: Any) -> mcp_types.EmptyResult:
        self._subscribed.setdefault(str(params.uri), {})[_connection(ctx.session)] = ctx.session
        return mcp_types.EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: Any) -> mcp_types.EmptyResult:
        sessions = self._subscribed.get(str(params.uri), {})
        sessions.pop(_connection(ctx.session), None)
        if not sessions:
            self._subscribed.pop(str(params.uri), None)
        return mcp_types.EmptyResult()

    async def _initialized(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        self._sessions[_connection(ctx.session)] = ctx.session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))

    # -- the agent's side ------------------------------------------------------------------------------------
    def attach(self, loop: asyncio.AbstractEventLoop, changes: ChangeLog) -> Callable[[], None]:
        """Announce every change recorded in `changes` from now on; returns the function that stops it."""
        self._loop = loop

        def heard(found: list[Change]) -> None:  # on a job thread
            with contextlib.suppress(RuntimeError):  # the loop has stopped: the agent is stopping
                loop.call_soon_threadsafe(self._gather, found)

        return changes.listen(heard)

    def _gather(self, found: list[Change]) -> None:
        for ch in found:
            self._uris.update(affected(ch))
            if ch.is_dir:
                self._uris.update(u for u in self._subscribed if _under(u, ch.path))
            self._list_changed |= ch.kind not in _SAME_LISTINGS
        if self._flush is None and self._loop is not None:
            self._flush = self._loop.call_later(COALESCE_S, lambda: asyncio.ensure_future(self.announce()))

    async def announce(self) -> None:
        """Send what was gathered."""
        self._flush = None
        uris, self._uris = sorted(self._uris), set()
        list_changed, self._list_changed = self._list_changed, False
        for u in uris:
            await self.bus.publish(ResourceUpdated(uri=u))
            for key, session in list(self._subscribed.get(u, {}).items()):
                if not await _send(session.send_resource_updated(u)):
                    self._forget(key)
        if list_changed:
            await self.bus.publish(ResourcesListChanged())
            for key, session in list(self._sessions.items()):
                if not await _send(session.send_resource_list_changed()):
                    self._forget(key)
        if uris or list_changed:
            log.debug(
                "announced %d changed resources%s", len(uris), " and a list change" if list_changed else ""
            )

    def _forget(self, key: int) -> None:
        """A connection that cannot be written to any more is gone."""
        self._sessions.pop(key, None)
        for u in [u for u, sessions in self._subscribed.items() if sessions.pop(key, None) and not sessions]:
            del self._subscribed[u]


def affected(ch: Change) -> list[str]:
    """The resources a change changes."""
    if ch.is_dir:
        return [uri("dir", ch.path), uri("dir", ch.path.parent)]
    return [uri("file", ch.path), uri("chunks", ch.path), uri("dir", ch.path.parent)]


def _under(resource: str, top: Path) -> bool:
    for kind in ("dir", "file", "chunks"):
        prefix = uri(kind, top)
        if resource == prefix or resource.startswith(prefix.rstrip("/") + "/"):
            return True
    return False


def _connection(session: ServerSession) -> int:
    """The connection a (per-request) session object belongs to: requests of one client share it."""
    return id(session._connection)


async def _send(sending: Any) -> bool:
    try:
        await sending
        return True
    except Exception as err:  # the connection has closed (its streams are gone)
        log.debug("a change notification could not be sent: %s", err)
        return False
