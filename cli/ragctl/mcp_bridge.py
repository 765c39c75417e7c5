"""`ragctl mcp`: the stdio MCP server for AI tools that start a command; it pipes the session to the agent.

An MCP client (Claude Desktop, Cursor, an agent framework) starts `ragctl mcp` and speaks JSON-RPC 2.0 on its
stdin and stdout, one message per line (the MCP stdio transport). The bridge opens an MCP session on the running
agent (the control verb `mcp_session`, docs/protocol.md) and passes every line through, both ways, unchanged: the
agent's MCP server (the one serving HTTP) answers, with everything a session has: both protocol eras (the
`initialize` handshake and the 2026-07-28 per-request envelope), progress notifications, cancellation that
reaches the call in the agent, resource subscriptions and change notifications, prompts.

While no agent is reachable the bridge answers by itself (mcp_local.py): the lists at once, and tool calls with
a tool error saying how to start the agent. It tries again at every message, so an agent started (or restarted)
after the client is used from then on: the bridge replays the client's `initialize` and its resource
subscriptions on the new session (their answers are not passed on), and answers each call that was running when
an agent went away with the reason.

The end of stdin is not the end of the client: one that closes stdin may still read the answers of the calls
running, and the bridge waits for them. Once the client is gone (no reader left on the bridge's stdout, its parent
process exited, or SIGTERM), the bridge cancels those calls in the agent and exits at once (`mcp_stdio.watch_client`).

Standard library only, like the rest of ragctl (no MCP SDK): spawn → `initialize` answered takes about 60 ms.
Nothing but JSON-RPC reaches stdout: protocol lines are written to a private duplicate of fd 1, and fd 1 itself
(with sys.stdout) points at stderr while the bridge runs.

This module holds the bridge itself (`Bridge`); `mcp_link` the connection to the agent, `mcp_stdio` the process
around it (stdout claimed, the client watched, `run_stdio`).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import IO, Any

from .mcp_link import AgentLink, Session
from .mcp_local import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    AgentError,
    Json,
    Local,
    Schema,
    encode,
    error,
    explain,
    key,
    load_schema,
    tool_error,
    valid_id,
)
from .protocol import ProtocolError, RemoteError, Unreachable, socket_path

log = logging.getLogger(__name__)

REPLAY_TIMEOUT = 30.0  # seconds for a new session to answer the replayed `initialize`
DRAIN_TIMEOUT = 630.0  # seconds the end of input waits for running calls (the agent gives a call 600 s)
REPLAY = "ragctl-replay-"  # the ids of the requests the bridge itself sends (their answers are not passed on)


class Bridge:
    """One MCP client: `feed` it each line read from the client; lines for the client are written to `out`."""

    def __init__(self, agent: AgentLink, out: IO[bytes], schema: Callable[[], Schema] = load_schema) -> None:
        self._agent, self._out = agent, out
        self._local = Local(_loaded(schema))
        self._write_lock = threading.Lock()
        self._closed = False
        self._state = threading.Condition()  # guards everything below
        self._session: Session | None = None
        self._inflight: dict[tuple[bool, Any], str] = {}  # forwarded requests not answered yet -> method
        self._answering = 0  # answers taken from _inflight and being written
        self._cancelled: set[tuple[bool, Any]] = set()  # their answers are not passed on
        self._initialize: Json | None = None  # the client's `initialize` request, replayed on a new session
        self._initialized = False  # the client sent notifications/initialized
        self._subscriptions: set[str] = set()
        self._replays: dict[tuple[bool, Any], threading.Event] = {}
        self._batches: dict[tuple[bool, Any], _Batch] = {}  # requests of a batch -> the batch's answers
        self._ids = itertools.count(1)

    # -- input ---------------------------------------------------------------------------------------------------
    def serve(self, lines: Iterable[bytes]) -> int:
        """Pass every line on until the input ends, then wait for the calls still running; 0."""
        for line in lines:
            self.feed(line)
        with self._state:
            self._state.wait_for(lambda: not self._inflight and not self._answering, DRAIN_TIMEOUT)
            session = self._session
        if session is not None:
            session.end_input()
        with self._write_lock:
            self._closed = True  # a call that ends later writes nothing
        return 0

    def feed(self, line: bytes) -> None:
        """Pass one line to the agent, or answer it here when no agent can be reached."""
        if not line.strip():
            return
        try:
            msg = json.loads(line)
        except ValueError as err:  # bad JSON or bad UTF-8
            self._send(error(None, PARSE_ERROR, f"Parse error: {err}"))
            return
        messages = msg if isinstance(msg, list) else [msg]
        if msg == []:
            self._send(error(None, INVALID_REQUEST, "Invalid Request: an empty batch"))
            return
        session, why = self._connected()
        if session is not None and self._forward(session, line, messages, isinstance(msg, list)):
            return
        replies = [r for r in (self._local.answer(m, why or _gone()) for m in messages) if r is not None]
        with self._state:
            for m in messages:
                self._note(m)
        if replies:
            self._send(replies if isinstance(msg, list) else replies[0])

    def _forward(self, session: Session, line: bytes, messages: list[Any], batch: bool) -> bool:
        """Send the line on; a batch (2025-03-26) goes as its messages, and its answers come back as one array."""
        requests = [m for m in messages if _is_request(m)]
        with self._state:
            for m in requests:
                self._inflight[key(m["id"])] = m["method"]
            if batch and requests:
                collected = _Batch({key(m["id"]) for m in requests})
                self._batches.update((k, collected) for k in collected.waiting)
            for m in messages:
                self._note(m)
        if session.send(b"".join(encode(m) for m in messages) if batch else line):
            return True
        with self._state:  # the session ended meanwhile: answered here unless its end answered them already
            taken = [m for m in requests if self._inflight.pop(key(m["id"]), None) is not None]
            self._state.notify_all()
        others = [m for m in messages if not _is_request(m)]
        replies = [r for r in (self._local.answer(m, _gone()) for m in taken + others) if r is not None]
        if replies:
            self._send(replies if len(messages) > 1 else replies[0])
        return True

    def _note(self, msg: Any) -> None:
        """Remember what a new session must be told again (called with the state lock held)."""
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return
        method = msg["method"]
        params: Json = msg["params"] if isinstance(msg.get("params"), dict) else {}
        if method == "initialize" and "id" in msg:
            self._initialize, self._initialized = msg, False
        elif method == "notifications/initialized":
            self._initialized = True
        elif method == "resources/subscribe" and isinstance(params.get("uri"), str):
            self._subscriptions.add(params["uri"])
        elif method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
            self._subscriptions.discard(params["uri"])
        elif method == "notifications/cancelled" and valid_id(rid := params.get("requestId")):
            self._cancel(key(rid))

    def abandon(self, reason: str) -> int:
        """The client is gone: each call still running in the agent is cancelled there (`notifications/cancelled`)
        and the session closed; nothing more is written. Returns how many calls were cancelled."""
        self._closed = True  # not under the write lock: this may run while a write is blocked
        with self._state:
            running, self._inflight = self._inflight, {}
            session, self._session = self._session, None
            self._state.notify_all()
        if session is None:
            return 0
        for _is_str, rid in running:
            session.send(encode({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": rid, "reason": reason}}))  # fmt: skip
        session.close()
        return len(running)

    def _cancel(self, k: tuple[bool, Any]) -> None:
        """The client cancelled a request: the agent is told (the notification goes on), its answer dropped."""
        if self._inflight.pop(k, None) is not None:
            self._cancelled.add(k)
            self._state.notify_all()

    # -- the agent -----------------------------------------------------------------------------------------------
    def _connected(self) -> tuple[Session | None, AgentError | None]:
        """The live session, opened (and brought up to date) now if needed; or the reason there is none."""
        with self._state:
            if self._session is not None and self._session.alive:
                return self._session, None
        try:
            sock, leftover = self._agent.open()
        except (Unreachable, RemoteError, ProtocolError) as err:
            log.debug("no agent: %s", err)
            return None, err
        session = Session(sock, leftover, self._from_agent, self._agent_ended)
        with self._state:
            init, initialized, subscriptions = (
                self._initialize,
                self._initialized,
                sorted(self._subscriptions),
            )
        if init is not None and not self._replay(session, init, initialized, subscriptions):
            session.end_input()
            return None, Unreachable(
                self._agent.socket or socket_path(client=True), "the agent closed the session"
            )
        with self._state:
            self._session = session
        log.info("MCP session opened on the agent")
        return session, None

    def _replay(self, session: Session, init: Json, initialized: bool, subscriptions: list[str]) -> bool:
        """Tell a new session what the client told the old one: `initialize` (and wait for its answer),
        `notifications/initialized`, the subscriptions."""
        rid = f"{REPLAY}{next(self._ids)}"
        answered = threading.Event()
        with self._state:
            self._replays[key(rid)] = answered
        session.send(encode({**init, "id": rid}))
        if not answered.wait(REPLAY_TIMEOUT) or not session.alive:
            return False
        if initialized:
            session.send(encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for uri in subscriptions:
            sub = f"{REPLAY}{next(self._ids)}"
            with self._state:
                self._replays[key(sub)] = threading.Event()
            session.send(
                encode({"jsonrpc": "2.0", "id": sub, "method": "resources/subscribe", "params": {"uri": uri}})
            )
        return True

    def _from_agent(self, session: Session, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            log.warning("the agent sent a line that is not JSON: %.200r", line)
            return
        rid = msg.get("id") if isinstance(msg, dict) and "method" not in msg else None
        if not valid_id(rid):
            self._write(line + b"\n")  # a notification, or a request of the agent's to the client
            return
        with self._state:
            replay = self._replays.pop(key(rid), None)
            dropped = key(rid) in self._cancelled
            self._cancelled.discard(key(rid))
            self._inflight.pop(key(rid), None)
            self._answering += 1
        try:
            if replay is not None:
                replay.set()
            elif not dropped and not self._deliver(key(rid), msg):
                self._write(line + b"\n")
        finally:
            self._answered(1)

    def _deliver(self, k: tuple[bool, Any], reply: Json) -> bool:
        """Keep the answer to a request of a batch; the batch's array goes out with its last answer. False for a
        request that is not part of a batch."""
        with self._state:
            batch = self._batches.pop(k, None)
            if batch is None:
                return False
            batch.replies.append(reply)
            batch.waiting.discard(k)
            done = not batch.waiting
        if done:
            self._send(batch.replies)
        return True

    def _agent_ended(self, session: Session, reason: str) -> None:
        """The agent's side of a session ended: each call still running there is answered with the reason."""
        with self._state:
            if self._session is session:
                self._session = None
            running, self._inflight = self._inflight, {}
            self._answering += len(running)
            self._cancelled.clear()
            for event in self._replays.values():
                event.set()
            self._replays.clear()
        if running:
            log.warning("the agent ended the MCP session (%s) with %d calls running", reason, len(running))
        why = Unreachable(self._agent.socket or socket_path(client=True), reason)
        for (is_str, rid), method in running.items():
            if method == "tools/call":
                reply = {"jsonrpc": "2.0", "id": rid, "result": tool_error(explain(why))}
            else:
                reply = error(rid, INTERNAL_ERROR, explain(why))
            if not self._deliver((is_str, rid), reply):
                self._send(reply)
        self._answered(len(running))

    def _answered(self, count: int) -> None:
        """Answers taken out of `_inflight` have been written: the end of input waits for them too."""
        with self._state:
            self._answering -= count
            self._state.notify_all()

    # -- output --------------------------------------------------------------------------------------------------
    def _send(self, reply: Json | list[Json]) -> None:
        self._write(encode(reply))

    def _write(self, data: bytes) -> None:
        with self._write_lock:
            if self._closed:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError) as err:  # the client closed our stdout (ValueError: a closed file)
                self._closed = True
                log.info("stdout is closed (%s): answers are dropped until stdin ends", err)


class _Batch:
    def __init__(self, waiting: set[tuple[bool, Any]]) -> None:
        self.waiting = waiting
        self.replies: list[Json] = []


def _is_request(msg: Any) -> bool:
    return isinstance(msg, dict) and isinstance(msg.get("method"), str) and valid_id(msg.get("id"))


def _gone() -> Unreachable:
    return Unreachable(socket_path(client=True), "the agent closed the connection")


def _loaded(schema: Callable[[], Schema]) -> Schema | Exception:
    try:
        return schema()
    except (OSError, ValueError) as err:
        log.error("cannot read the MCP schema: %s", err)
        return err
