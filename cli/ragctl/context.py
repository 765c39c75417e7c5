"""What every `ragctl` command needs: its context (socket, timeout, output), its failures and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from .protocol import DENIED, DENIED_HINT, Client, Unreachable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as `yes | head` ends
START_HINT = "start it with `ragd run` (or `systemctl --user start ragd`)"


class CliError(Exception):
    """A failure found on the ragctl side (message + hint + exit code)."""

    def __init__(self, message: str, hint: str = "", exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message, self.hint, self.exit_code = message, hint, exit_code


class Ctx:
    """What every verb needs (a plain class: `dataclasses` costs ragctl's start-up ~8 ms)."""

    def __init__(self, socket: Path, timeout: float | None, json: bool, out: TextIO, err: TextIO) -> None:
        self.socket = socket
        self.timeout = timeout  # seconds to connect and for each answer; None: no limit
        self.json, self.out, self.err = json, out, err

    def connect(self, answer_timeout: float | None) -> Client:
        """A connection to the agent (connecting within `timeout`), then answers awaited `answer_timeout` s."""
        try:
            client = Client(self.socket, self.timeout)
        except Unreachable as err:
            raise _not_running(err) from None
        client.settimeout(answer_timeout)
        return client

    def emit(self, result: Any, text: str) -> None:
        self.out.write(json.dumps(result, ensure_ascii=False) + "\n" if self.json else text)


def _not_running(err: Unreachable) -> CliError:
    if err.reason == DENIED:  # the agent runs, and refuses us as it would with `forbidden`
        return CliError(f"cannot use the ragd agent on {err.path}: {err.reason}", DENIED_HINT, EXIT_FAILED)
    if err.reason.startswith(("no socket", "connection refused")):
        message = f"the ragd agent is not running (no agent is listening on {err.path})"
    else:
        message = f"cannot reach the ragd agent on {err.path}: {err.reason}"
    return CliError(message, START_HINT, EXIT_UNREACHABLE)
