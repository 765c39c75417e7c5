"""Running a parsed `ragctl` command: one request to the agent, its answer printed, failures as exit codes.

`request_for` maps the parsed arguments to the protocol request (verb + args, docs/protocol.md); a handler per
verb sends it and prints the result through `render` (or as JSON with --json); `execute` is the one place where
errors become a message on stderr and an exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from . import render
from .context import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    Ctx,
)
from .protocol import USAGE_CODES, Client, ProtocolError, RemoteError, Unreachable, socket_path
from .protocol.search_flags import search_request

Obj = Mapping[str, Any]
CONNECT_POLL_S = 0.1  # `wait`: how often an agent that is not listening yet is looked for


# -- arguments -> request ---------------------------------------------------------------------------------------
def absolute(path: str) -> str:
    """A path argument as the agent wants it: absolute, resolved against ragctl's working directory."""
    return _utf8(str(Path(path).expanduser().resolve()))


def entry_path(path: str) -> str:
    """A path naming an entry, absolute: its folder resolved, its own name kept (a symbolic link names itself)."""
    full = Path(os.path.abspath(Path(path).expanduser()))
    return _utf8(str(full.parent.resolve() / full.name) if full.name else str(full))


def _utf8(path: str) -> str:
    """`path`, refused with a clear error when its bytes are not UTF-8 (a Latin-1 name from an old archive): the
    agent tracks only UTF-8 names, and the control socket speaks UTF-8 JSON."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise CliError(
            f"cannot name {shown}: it is not valid UTF-8 (ragd indexes only UTF-8 names)",
            "rename it to a UTF-8 name, e.g. `convmv -f latin1 -t utf-8 --notest PATH`",
            EXIT_USAGE,
        ) from None
    return path


def _opt_abs(path: str | None) -> str | None:
    return absolute(path) if path else None


REQUESTS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "status": lambda ns: {"watch": True, "interval": ns.interval} if ns.watch else {"watch": False},
    "search": search_request,  # as `ragd search` makes it (search_flags.py)
    "sync": lambda ns: {
        "path": _opt_abs(ns.path),
        "force": ns.force,
        "wait": ns.wait,
        "timeout": ns.wait_timeout,
    },
    # `paths` sent only when named: an older agent knows no `paths`
    "wait": lambda ns: {
        "timeout": ns.wait_timeout,
        **({"paths": [entry_path(p) for p in ns.paths]} if ns.paths else {}),
    },
    # no folder named: the whole knowledge base, every root with its subfolders
    "export": lambda ns: {"path": _opt_abs(ns.path), "recursive": ns.recursive or not ns.path},
    "orphans": lambda ns: {"path": _opt_abs(ns.path), "clean": ns.clean},
    "changes": lambda ns: {
        "path": _opt_abs(ns.path),
        "since": ns.since,
        "limit": ns.limit,
        **({"kinds": list(ns.kind)} if ns.kind else {}),
    },
    "index": lambda ns: {"rebuild": ns.rebuild},
    "roots": lambda ns: {
        "action": ns.action or "list",
        **({"path": absolute(ns.root)} if ns.action in ("add", "remove") else {}),
    },
    "config": lambda ns: {"action": ns.action},
}


def request_for(ns: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """(verb, args) of the request a parsed command sends (pause, resume and reload take no args)."""
    build = REQUESTS.get(ns.command)
    return ns.command, build(ns) if build else {}


# -- live display -----------------------------------------------------------------------------------------------
def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def bar_width(stream: TextIO) -> int | None:
    """Width of a progress bar on a terminal; None when `stream` is not one (plain text then)."""
    if not _isatty(stream):
        return None
    return max(10, min(40, shutil.get_terminal_size().columns - 50))


class Live:
    """One progress line redrawn in place with \\r on a terminal; silent when the stream is not a terminal."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled and _isatty(stream)
        self.bar = bar_width(stream) if self.enabled else None
        self._drawn = False

    def show(self, text: str) -> None:
        if self.enabled:
            cols = shutil.get_terminal_size().columns
            self.stream.write("\r" + text[: max(10, cols - 1)] + "\x1b[K")
            self.stream.flush()
            self._drawn = True

    def clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def _streamed(
    ctx: Ctx, ns: argparse.Namespace, timeout: float | None, line: Callable[[Obj, int | None], str]
) -> Any:
    """Send a long request; show its stream lines as a live line on stderr; return the final result."""
    verb, args = request_for(ns)
    return _stream_on(ctx, ctx.connect(timeout), verb, args, line)


def _stream_on(ctx: Ctx, client: Client, verb: str, args: Obj, line: Callable[[Obj, int | None], str]) -> Any:
    live = Live(ctx.err, enabled=not ctx.json)
    with client:
        try:
            return client.call(verb, args, on_stream=lambda data: live.show(line(data, live.bar)))
        finally:
            live.clear()


def _operation_timeout(ctx: Ctx, wait_timeout: float | None) -> float | None:
    """How long to wait for a line of a `wait`: the agent's own limit plus the usual answer time."""
    if wait_timeout is None or ctx.timeout is None:
        return None
    return wait_timeout + ctx.timeout


# -- handlers ---------------------------------------------------------------------------------------------------
def _status(ctx: Ctx, ns: argparse.Namespace) -> int:
    if ns.watch:
        return _status_watch(ctx, ns)
    verb, args = request_for(ns)
    with ctx.connect(ctx.timeout) as client:
        result = client.call(verb, args)
    ctx.emit(result, render.status(result, bar_width(ctx.out)))
    return EXIT_OK


def _status_watch(ctx: Ctx, ns: argparse.Namespace) -> int:
    """Redraw the status at every stream line until Ctrl-C (exit 0) or the agent closes the connection."""
    verb, args = request_for(ns)
    tty = not ctx.json and _isatty(ctx.out)
    timeout = None if ctx.timeout is None else ctx.timeout + 2 * ns.interval
    with ctx.connect(timeout) as client:
        for msg in client.stream(verb, args):
            final = "stream" not in msg
            data = _result_of(msg) if final else msg["stream"]
            if ctx.json:
                ctx.out.write(json.dumps(data, ensure_ascii=False) + "\n")
            elif tty:
                ctx.out.write("\x1b[H\x1b[2J" + render.status(data, bar_width(ctx.out)))
            else:
                ctx.out.write(render.status(data) + "\n")
            ctx.out.flush()
            if final:  # an agent that does not stream answers once
                break
    return EXIT_OK


def _result_of(msg: Obj) -> Any:
    if msg.get("ok"):
        return msg.get("result")
    err = msg.get("error") or {}
    raise RemoteError(str(err.get("code", "internal")), str(err.get("message", "")), str(err.get("hint", "")))


def _wait(ctx: Ctx, ns: argparse.Namespace) -> int:
    """An agent that is starting is waited for too: `ragd run … & ragctl wait` waits, within the same timeout."""
    client, waited = _connect_patiently(
        ctx, ns.wait_timeout if ns.wait_timeout is not None else ctx.timeout, ns.socket
    )
    verb, args = request_for(ns)
    if ns.wait_timeout is not None and waited:  # the time spent waiting for the agent counts
        args["timeout"] = max(0.0, round(ns.wait_timeout - waited, 3))
    client.settimeout(_operation_timeout(ctx, args["timeout"]))
    result = _stream_on(ctx, client, verb, args, lambda d, _: render.wait_progress(d))
    ctx.emit(result, render.waited(result))
    return EXIT_OK


def _connect_patiently(ctx: Ctx, limit: float | None, socket: Path | None) -> tuple[Client, float]:
    """A connection to the agent, tried again every CONNECT_POLL_S while none listens, up to `limit` s (None: as
    long as it takes), and the seconds that took (0: at once); then the usual `not running` failure. Without
    --socket, the agent is looked for again at each try (its socket may not be the one found before it started)."""
    started = time.monotonic()
    deadline = None if limit is None else started + limit
    tries = 0
    while True:
        try:
            return ctx.connect(None), (time.monotonic() - started if tries else 0.0)
        except CliError as err:
            if err.exit_code != EXIT_UNREACHABLE or (deadline is not None and time.monotonic() >= deadline):
                raise
        tries += 1
        left = CONNECT_POLL_S if deadline is None else deadline - time.monotonic()
        time.sleep(max(0.0, min(CONNECT_POLL_S, left)))
        if socket is None:
            ctx.socket = socket_path(client=True)


def _sync(ctx: Ctx, ns: argparse.Namespace) -> int:
    timeout = _operation_timeout(ctx, ns.wait_timeout) if ns.wait else ctx.timeout
    result = _streamed(ctx, ns, timeout, lambda d, _: render.wait_progress(d))
    ctx.emit(result, render.synced(result, ns.wait))
    return EXIT_OK


def _index(ctx: Ctx, ns: argparse.Namespace) -> int:
    if not ns.rebuild:
        return _simple(ctx, ns)
    result = _streamed(ctx, ns, None, render.rebuild_progress)  # a rebuild takes as long as it takes
    ctx.emit(result, render.rebuilt(result))
    return EXIT_OK


def _verify(ctx: Ctx, ns: argparse.Namespace) -> int:
    result = _streamed(ctx, ns, None, render.verify_progress)  # a pass takes as long as the tree is large
    ctx.emit(result, render.verified(result))
    return EXIT_OK


def _export(ctx: Ctx, ns: argparse.Namespace) -> int:
    archive = Path(ns.archive).expanduser().absolute()
    if archive.is_dir() or not archive.parent.is_dir():
        where = f"{archive} is a directory" if archive.is_dir() else f"{archive.parent} is not a directory"
        raise CliError(
            f"cannot write {archive}: {where}", "name an archive file in an existing folder", EXIT_USAGE
        )
    verb, args = request_for(ns)
    with ctx.connect(ctx.timeout) as client:
        result = client.call(verb, args)
    from . import export  # tarfile only for this verb

    try:
        files = export.entries(result)
    except (KeyError, TypeError, ValueError) as err:
        raise CliError(
            f"unexpected answer to export: {err}", "ragctl and the agent may be of different versions"
        ) from None
    try:
        done = export.write_archive(archive, files, warn=lambda m: ctx.err.write(f"ragctl: warning: {m}\n"))
    except OSError as err:
        where = f" ({err.filename})" if err.filename else ""
        raise CliError(
            f"export to {archive} failed: {err.strerror or err}{where}", "nothing was written"
        ) from None
    data = {**result, "archive": str(archive), "entries": done.entries, "skipped": list(done.skipped)}
    what = f"{result.get('base')}{' with its subfolders' if args.get('recursive') else ' (-r: with its subfolders)'}"
    ctx.emit(data, render.exported(ns.archive, done.entries, done.skipped, what if ns.path else "every root"))
    return EXIT_OK


RENDER: dict[str, Callable[[Obj, argparse.Namespace], str]] = {
    "search": lambda r, ns: render.search(r),
    "orphans": lambda r, ns: render.orphans(r, ns.clean),
    "changes": lambda r, ns: render.changes(r),
    "roots": lambda r, ns: render.roots(r),
    "index": lambda r, ns: render.index_stats(r),
    "reload": lambda r, ns: render.reloaded(r),
    "pause": lambda r, ns: render.paused(r),
    "resume": lambda r, ns: render.paused(r),
    "config": lambda r, ns: render.config_check(r),
}


def _simple(ctx: Ctx, ns: argparse.Namespace) -> int:
    verb, args = request_for(ns)
    with ctx.connect(ctx.timeout) as client:
        result = client.call(verb, args)
    ctx.emit(result, RENDER[ns.command](result, ns))
    return EXIT_OK


def _mcp(ctx: Ctx, ns: argparse.Namespace) -> int:
    from .mcp_stdio import run_stdio  # threads and logging only for this verb

    return run_stdio(ns.socket, ctx.timeout, ns.verbose)  # no --socket: the agent is looked for at each call


def _mcp_config(ctx: Ctx, ns: argparse.Namespace) -> int:
    from .mcpconfig import mcp_config  # the clients' knowledge only for this verb

    return mcp_config(ctx, ns)


def _ui(ctx: Ctx, ns: argparse.Namespace) -> int:
    from .ui import ui

    return ui(ctx, ns)


HANDLERS: dict[str, Callable[[Ctx, argparse.Namespace], int]] = {
    "status": _status,
    "wait": _wait,
    "sync": _sync,
    "index": _index,
    "verify": _verify,
    "export": _export,
    "mcp": _mcp,
    "mcp-config": _mcp_config,
    "ui": _ui,
}


# -- the edge: errors -> messages and exit codes ----------------------------------------------------------------
def execute(ns: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run a parsed command; print errors as 'ragctl: …' + 'hint: …' on `err`; return the exit code."""
    ctx = Ctx(ns.socket or socket_path(client=True), ns.io_timeout or None, ns.json, out, err)
    try:
        code = HANDLERS.get(ns.command, _simple)(ctx, ns)
        out.flush()
        return code
    except KeyboardInterrupt:
        if ns.command == "status" and ns.watch:
            return EXIT_OK
        return _fail(err, "interrupted", "", EXIT_INTERRUPTED)
    except BrokenPipeError:
        _silence(out)
        return EXIT_BROKEN_PIPE
    except CliError as e:
        return _fail(err, e.message, e.hint, e.exit_code)
    except RemoteError as e:
        return _fail(err, e.message or e.code, e.hint, EXIT_USAGE if e.code in USAGE_CODES else EXIT_FAILED)
    except Unreachable as e:
        return _fail(err, *_lost(e, ctx.timeout), EXIT_UNREACHABLE)
    except ProtocolError as e:
        hint = e.hint or "ragctl and the agent may be of different versions"
        return _fail(err, f"bad answer from the agent: {e.message}", hint, EXIT_FAILED)


def _lost(err: Unreachable, timeout: float | None) -> tuple[str, str]:
    """Message and hint when a connected agent stops answering."""
    if "in time" in err.reason:
        return (f"the ragd agent on {err.path} did not answer within {timeout:g} s" if timeout else err.reason,
                "it may be busy: try again, or allow more time with `ragctl --answer-timeout S …`")  # fmt: skip
    return (f"the ragd agent on {err.path} went away: {err.reason}",
            "it may be stopping or restarting; see `systemctl --user status ragd` or its log")  # fmt: skip


def _fail(err: TextIO, message: str, hint: str, code: int) -> int:
    try:
        err.write(f"ragctl: {message}\n" + (f"hint: {hint}\n" if hint else ""))
        err.flush()
    except OSError:
        pass  # stderr is gone too: the exit code still tells
    return code


def _silence(out: TextIO) -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush does not complain."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
    except (OSError, ValueError):
        pass  # not a real file (e.g. under a test's capture): nothing will flush it
