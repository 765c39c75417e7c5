"""The `ragctl` command line: argument parsing (the verbs of docs/protocol.md); `commands` runs them.

Kept light on purpose: `ragctl status` should take well under 100 ms, so this module imports only argparse at the
top, and the verbs' code (with the socket client) once the arguments are parsed.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from . import __version__
from .protocol import CHANGE_KINDS
from .protocol.search_flags import Renamed, add_search_flags

DEFAULT_TIMEOUT = 30.0  # seconds to connect and to wait for each answer (0: no limit)
MCP_CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")  # `mcp-config`'s (clients.py knows them)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"seconds must be 0 or more, not {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ragctl", description="Show and steer the ragd agent over its control socket."
    )
    p.add_argument("-V", "--version", action="version", version=f"ragctl {__version__}")
    p.add_argument(
        "--socket",
        type=Path,
        metavar="PATH",
        help="control socket (default: $RAGD_SOCKET or the runtime dir)",
    )
    p.add_argument("--answer-timeout", dest="io_timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds to wait for the agent to answer (0: no limit; default {DEFAULT_TIMEOUT:g})")  # fmt: skip
    # its older name, which `wait` and `sync` also give their own limit
    p.add_argument("--timeout", dest="io_timeout", type=_seconds, action=Renamed, new="--answer-timeout",
                   help=argparse.SUPPRESS)  # fmt: skip
    # options every verb accepts after its name too (SUPPRESS: absent here, the top-level value stands)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print the agent's answer as JSON")
    common.add_argument(
        "--socket", type=Path, metavar="PATH", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_status_search(sub, common)
    _add_jobs(sub, common)
    _add_admin(sub, common)
    _add_mcp(sub)
    _add_mcp_config(sub, common)
    ui = sub.add_parser("ui", parents=[common], help="the address of the agent's web page (a sign-in link if it asks "
                        "for a token)")  # fmt: skip
    ui.add_argument("--open", action="store_true", help="open it in the desktop's browser")
    return p


def _add_status_search(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    st = sub.add_parser("status", parents=[common], help="the agent's state, roots, embedder and index")
    st.add_argument("--watch", action="store_true", help="redraw as the agent reports (Ctrl-C to stop)")
    st.add_argument(
        "--interval", type=_seconds, default=1.0, metavar="S", help="seconds between updates (--watch)"
    )
    add_search_flags(sub.add_parser("search", parents=[common], help="search the index"))  # as `ragd search`


def _add_jobs(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    sy = sub.add_parser("sync", parents=[common], help="re-check a folder (default: every root) now")
    sy.add_argument("path", nargs="?", help="folder or file under a root")
    sy.add_argument("--force", action="store_true", help="re-process files even when unchanged")
    sy.add_argument("--wait", action="store_true", help="return when the agent is idle again")
    sy.add_argument(
        "--timeout", dest="wait_timeout", type=_seconds, metavar="S", help="give up waiting after S s"
    )
    wa = sub.add_parser("wait", parents=[common],
                        help="return when the agent is idle (with PATHs: when nothing is left to do under them)")  # fmt: skip
    wa.add_argument("paths", nargs="*", metavar="PATH",
                    help="only these files or folders (with their subfolders), each under a root")  # fmt: skip
    wa.add_argument("--timeout", dest="wait_timeout", type=_seconds, metavar="S",
                    help="give up after S s (exit 1; exit 3 if no agent answered by then)")  # fmt: skip
    ex = sub.add_parser("export", parents=[common], help="write the .ragjson entries into a tar.gz")
    ex.add_argument("archive", help="the tar.gz to write")
    ex.add_argument("path", nargs="?", help="folder to export (default: every root)")
    ex.add_argument("-r", "--recursive", action="store_true", help="with its subfolders")
    ch = sub.add_parser(
        "changes", parents=[common], help="what happened to the documents: events, or one's history"
    )
    ch.add_argument(
        "path", nargs="?", help="a document (its whole history) or a folder (default: every root)"
    )
    ch.add_argument(
        "--since", default="7d", help='how far back: "2d", "3h", "30m", "1w" or a UTC date (default 7d)'
    )
    ch.add_argument("--limit", type=int, default=100, help="at most this many events (default 100)")
    ch.add_argument("--kind", action="append", default=[], metavar="KIND",
                    help=f"only these kinds ({', '.join(CHANGE_KINDS)}); repeatable")  # fmt: skip
    orph = sub.add_parser("orphans", parents=[common], help="indexed sources whose file or sidecar is gone")
    orph.add_argument("path", nargs="?", help="only under this folder")
    orph.add_argument("--clean", action="store_true", help="remove them from the index")
    sub.add_parser(
        "verify", parents=[common], help="check the index against the sidecars now, repair what differs"
    )
    ix = sub.add_parser("index", parents=[common], help="the index's statistics; --rebuild: rebuild it")
    ix.add_argument("--rebuild", action="store_true", help="drop the index and rebuild it from the sidecars")


def _add_admin(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    ro = sub.add_parser("roots", parents=[common], help="list (the default), add or remove watched folders")
    ro_sub = ro.add_subparsers(dest="action", metavar="ACTION")
    ro_sub.add_parser("list", parents=[common], help="the watched folders")
    ro_sub.add_parser("add", parents=[common], help="watch a folder").add_argument("root", metavar="PATH")
    ro_sub.add_parser("remove", parents=[common], help="stop watching a folder").add_argument(
        "root", metavar="PATH"
    )
    sub.add_parser("pause", parents=[common], help="start no directory job until resume (changes are kept)")
    sub.add_parser("resume", parents=[common], help="run directory jobs again")
    sub.add_parser("reload", parents=[common], help="re-read the config file (as SIGHUP does)")
    cfg = sub.add_parser("config", help="the agent's configuration")
    cfg_sub = cfg.add_subparsers(dest="action", required=True, metavar="ACTION")
    cfg_sub.add_parser("check", parents=[common], help="validate the config file on disk (secrets redacted)")


def _add_mcp(sub: argparse._SubParsersAction) -> None:
    mc = sub.add_parser(
        "mcp", help="serve MCP on stdin/stdout for AI tools that start a command (see docs/mcp.md)"
    )
    mc.add_argument("--socket", type=Path, metavar="PATH", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    mc.add_argument("-v", "--verbose", action="store_true", help="log each request on stderr")
    mc.set_defaults(json=False)  # stdout carries JSON-RPC only


def _add_mcp_config(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    mc = sub.add_parser(
        "mcp-config",
        parents=[common],
        help="print (--write: merge in) the MCP set-up of Claude Desktop, Claude Code, Cursor or VS Code",
        description="Print the entry an AI tool needs to reach ragd (this ragctl by its absolute path), headed by "
        "the file it goes in; --write merges it into that file, keeping a backup.",
    )
    mc.add_argument("client", nargs="?", choices=MCP_CLIENTS, metavar="CLIENT",
                    help=f"one of {', '.join(MCP_CLIENTS)} (default: all of them)")  # fmt: skip
    mc.add_argument("--http", action="store_true",
                    help="the agent's streamable HTTP endpoint (URL and token) instead of `ragctl mcp` (stdio)")  # fmt: skip
    mc.add_argument("--write", action="store_true", help="merge the entry into the client's config file")
    mc.add_argument(
        "--config-file", type=Path, metavar="PATH", help="that file instead of the client's usual one"
    )


def _tolerant_stdio() -> None:
    """Print what cannot be encoded (e.g. an undecodable file name) as backslash escapes instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _tolerant_stdio()
    try:
        ns = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version (0) or a usage error (2), already printed
        return stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 2
    from .commands import execute

    return execute(ns, sys.stdout, sys.stderr)
