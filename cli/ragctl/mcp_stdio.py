"""The process around `ragctl mcp`'s bridge: stdout claimed for protocol lines only (`claim_stdout`), the client
watched so that its calls are cancelled once it is gone (`watch_client`), and `run_stdio`, the verb's entry."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO

from .mcp_bridge import Bridge
from .mcp_link import AgentLink

log = logging.getLogger(__name__)


CLIENT_CHECK_S = 0.2  # how often the bridge checks that its client is still there


def claim_stdout() -> tuple[IO[bytes], Callable[[], None]]:
    """A private writer on the real stdout for protocol lines; fd 1 and sys.stdout go to stderr meanwhile.

    Returns the writer and a function that puts everything back."""
    saved = sys.stdout
    saved.flush()
    proto_fd = os.dup(1)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr: stray output goes nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    sys.stdout = sys.stderr
    out = os.fdopen(proto_fd, "wb")

    def restore() -> None:
        sys.stdout = saved
        with contextlib.suppress(OSError, ValueError):
            saved.flush()  # anything printed to the old object goes to stderr while fd 1 still points there
        os.dup2(out.fileno(), 1)
        out.close()

    return out, restore


def client_gone(out_fd: int, parent: int) -> str | None:
    """Why the client is gone, or None: the reader of our stdout went away (a pipe with no reader left, a socket
    hung up), or our parent process died (we were handed to another)."""
    if os.getppid() != parent:
        return "its process (our parent) has exited"
    probe = select.poll()
    probe.register(out_fd, 0)  # errors and hang-ups are reported whatever the mask
    if any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _fd, ev in probe.poll(0)):
        return "it closed its end of our stdout"
    return None


class Signalled:
    """Set by SIGTERM's handler, read by the thread that watches the client: a plain attribute. A handler that set
    an Event took its lock, and the next SIGTERM, run inside it, waited for that lock or nested again until a
    RecursionError (a burst of SIGTERM ended the bridge with -15)."""

    def __init__(self) -> None:
        self.set = False

    def handler(self, _signum: int, _frame: FrameType | None) -> None:
        self.set = True


def watch_client(bridge: Bridge, out_fd: int, stop: Signalled, done: threading.Event) -> None:
    """In a thread: once the client is gone (or SIGTERM sets `stop`), cancel the calls the agent still runs for it
    and exit, instead of waiting for them (a wait can take 10 minutes) with no one to answer. Nothing once the
    bridge is `done`."""
    parent = os.getppid()
    why = None
    while why is None:
        if not stop.set:
            time.sleep(CLIENT_CHECK_S)
        why = "stopped by a signal" if stop.set else client_gone(out_fd, parent)
    if done.is_set():
        return
    cancelled = bridge.abandon(f"the MCP client is gone: {why}")
    log.info("the MCP client is gone (%s): %d running calls cancelled; exiting", why, cancelled)
    logging.shutdown()
    os._exit(0)


def run_stdio(socket: Path | None, connect_timeout: float | None, verbose: bool = False) -> int:
    """Serve MCP on this process's stdin and stdout until stdin ends (then 0), or until the client is gone."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="ragctl mcp: %(levelname)s: %(message)s")  # fmt: skip
    if sys.stdin.isatty():
        sys.stderr.write("ragctl mcp: serving MCP (JSON-RPC) on stdin/stdout for an AI tool; Ctrl-D ends.\n")
    out, restore = claim_stdout()
    bridge = Bridge(AgentLink(socket, connect_timeout), out)
    stop, done = Signalled(), threading.Event()
    signal.signal(signal.SIGTERM, stop.handler)  # as the SDK's clients stop their servers
    watch = threading.Thread(target=watch_client, args=(bridge, out.fileno(), stop, done), name="mcp-client",
                             daemon=True)  # fmt: skip
    watch.start()
    try:
        return bridge.serve(sys.stdin.buffer)
    finally:
        done.set()
        restore()
