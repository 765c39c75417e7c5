"""One MCP session on a control-socket connection: what `ragctl mcp` pipes its client's stdio to.

After the control verb `mcp_session` (edges/mcp_verbs.py) the connection carries MCP's stdio framing both ways
(one JSON-RPC message per line, UTF-8) and the agent's one `MCPServer` serves it as the SDK serves stdio: the
client's first request picks the protocol era (the `initialize` handshake of 2024-11-05 … 2025-11-25, or the
2026-07-28 per-request envelope), and everything the SDK does for a session works on it: progress notifications,
cancellation (`notifications/cancelled` cancels the call in the agent), resource subscriptions and change
notifications, prompts, paginated lists with cache hints.

The socket is read and written by the event loop itself (asyncio streams), so a session holds no worker
thread: tool calls keep the SDK's whole thread pool.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from ragctl import protocol as p

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger(__name__)


async def serve(server: MCPServer, conn: socket.socket, leftover: bytes = b"") -> None:
    """Serve MCP on `conn` until the client closes its side (or the agent stops); `leftover`: bytes the
    control server read past the `mcp_session` request."""
    from .app import initialization_options

    reader, writer = await asyncio.open_unix_connection(sock=conn, limit=p.MAX_MESSAGE)
    if leftover:
        reader.feed_data(leftover)
    to_server, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read, reader, to_server)
            tg.start_soon(_write, writer, from_server)
            await server._lowlevel_server.run(incoming, outgoing, initialization_options(server))
            tg.cancel_scope.cancel()
    finally:
        writer.close()


async def _read(reader: asyncio.StreamReader, sink: Any) -> None:
    async with sink:
        while True:
            try:
                line = await reader.readline()
            except (ValueError, OSError) as err:  # a line over the limit, or the connection reset
                log.info("MCP session input ended: %s", err)
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # the SDK answers it as a parse error, as on stdio
                await sink.send(exc)
                continue
            await sink.send(SessionMessage(message))


async def _write(writer: asyncio.StreamWriter, source: Any) -> None:
    async with source:
        async for message in source:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            try:
                writer.write(data.encode("utf-8"))
                await writer.drain()
            except OSError:
                return  # the client went away; the run ends when its input does
