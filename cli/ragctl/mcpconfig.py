"""`ragctl mcp-config [CLIENT] [--http] [--write] [--config-file PATH] [--json]`: an AI tool's MCP set-up.

Prints, for one client or all of them, the entry that makes the client reach ragd, headed by where it goes: the
stdio form starts this ragctl by its absolute path (`clients.this_program`); with --http, the agent's URL and
token, asked of the running agent (`mcp_client` verb), or the default URL when no agent runs. --write merges the
entry into the client's file (`clientfile.merge_entry`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .clientfile import MergeRefused, Written, merge_entry
from .clients import (
    CLIENTS,
    DEFAULT_URL,
    SERVER,
    Client,
    Command,
    Endpoint,
    claude_code_line,
    pretty,
    show_home,
    this_program,
)
from .context import EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, CliError, Ctx
from .protocol import UNKNOWN_VERB, RemoteError

Report = dict[str, Any]


def mcp_config(ctx: Ctx, ns: argparse.Namespace) -> int:
    _check_usage(ns)
    notes: list[str] = []
    target = _endpoint(ctx, notes) if ns.http else _command()
    if isinstance(target, Endpoint) and target.token:
        notes.append("the entry holds the agent's bearer token: keep it private")
    clients = [CLIENTS[ns.client]] if ns.client else list(CLIENTS.values())
    reports = []
    for client in clients:
        if ns.http and client.http is None:
            notes.append(f"{client.label} takes only commands in its file: `ragctl mcp-config {client.name}` "
                         "gives it the stdio form, which reaches the same server")  # fmt: skip
            continue
        reports.append(_report(client, target, ns, notes))
    for note in notes:
        ctx.err.write(f"ragctl: note: {note}\n")
    if ctx.json:
        data = {**reports[0], "notes": notes} if ns.client else {"clients": reports, "notes": notes}
        ctx.out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        ctx.out.write("\n".join(_text(CLIENTS[r["client"]], r) for r in reports))
    return EXIT_OK


def _check_usage(ns: argparse.Namespace) -> None:
    names = ", ".join(CLIENTS)
    if (ns.write or ns.config_file) and not ns.client:
        option = "--write" if ns.write else "--config-file"
        raise CliError(
            f"{option} needs a CLIENT ({names})", "e.g. ragctl mcp-config cursor --write", EXIT_USAGE
        )
    if ns.http and ns.client and CLIENTS[ns.client].http is None:
        raise CliError(f"{CLIENTS[ns.client].label} takes only commands (stdio) in its config file, not URLs",
                       f"use `ragctl mcp-config {ns.client}`: it reaches the same server", EXIT_USAGE)  # fmt: skip


def _command() -> Command:
    try:
        return this_program()
    except LookupError as err:
        raise CliError(str(err), "run ragctl by its full path, e.g. ~/.local/bin/ragctl mcp-config") from None


def _endpoint(ctx: Ctx, notes: list[str]) -> Endpoint:
    """The running agent's URL and token; the default URL (with a note) when no agent answers."""
    try:
        with ctx.connect(ctx.timeout) as client:
            try:
                info = client.call("mcp_client")
            except RemoteError as err:
                if err.code != UNKNOWN_VERB:
                    raise
                info = {**(client.call("status").get("mcp") or {}), "token": None}
                notes.append("this agent is older than this ragctl and does not tell its token: if [mcp] token "
                             "is set, add the header 'Authorization: Bearer <token>' yourself")  # fmt: skip
    except CliError as err:
        if err.exit_code != EXIT_UNREACHABLE:
            raise
        notes.append(f"the agent is not running: this is the default URL; if its config sets [mcp] port or a "
                     f"token, run this again once it runs ({err.message})")  # fmt: skip
        return Endpoint(DEFAULT_URL)
    if not info.get("enabled"):
        raise CliError("the agent's MCP endpoint over HTTP is off ([mcp] enabled = false)",
                       "use the stdio form (without --http), or set [mcp] enabled = true and restart the agent")  # fmt: skip
    if not info.get("url"):
        why = info.get("error") or "it is still starting"
        raise CliError(f"the agent's MCP endpoint over HTTP is not serving: {why}",
                       "see `ragctl status`; the stdio form (without --http) works regardless")  # fmt: skip
    return Endpoint(str(info["url"]), info.get("token") or None)


def _report(client: Client, target: Command | Endpoint, ns: argparse.Namespace, notes: list[str]) -> Report:
    entry = client.entry(target)
    secret = isinstance(target, Endpoint) and target.token is not None
    file = (
        Path(ns.config_file).expanduser().absolute()
        if ns.config_file
        else client.default_file(os.environ, sys.platform)
    )
    report: Report = {"client": client.name, "label": client.label, "transport": "http" if ns.http else "stdio",
                      "file": str(file), "key": client.key, "entry": entry, "snippet": client.snippet(entry)}  # fmt: skip
    if client.name == "claude-code":
        report["command_line"] = claude_code_line(target)
    if ns.write:
        done = _write(file, client, entry, secret)
        report["written"] = {"file": str(done.file), "backup": str(done.backup) if done.backup else None,
                             "created": done.created, "mode": f"{done.mode:04o}"}  # fmt: skip
        if secret and done.mode & 0o077:
            notes.append(f"{done.file} is readable by others (mode {done.mode:04o}) and now holds the token: "
                         f"chmod 600 {done.file}")  # fmt: skip
    return report


def _write(file: Path, client: Client, entry: dict[str, Any], secret: bool) -> Written:
    try:
        return merge_entry(file, client.key, SERVER, entry, secret=secret)
    except MergeRefused as err:
        raise CliError(err.message, err.hint) from None
    except OSError as err:
        where = err.filename or file
        raise CliError(f"cannot write {client.label}'s config {file}: {err.strerror or err} ({where})",
                       "check the folder's permissions, or name another file with --config-file") from None  # fmt: skip


def _text(client: Client, report: Report) -> str:
    written = report.get("written")
    body = pretty(report["snippet"]) + "\n"
    if written:
        kept = f"; the old file is kept as {written['backup']}" if written["backup"] else " (a new file)"
        return (f"{client.label}: wrote the \"{SERVER}\" server into {written['file']}{kept}\n{body}"
                f"{client.restart[0].upper()}{client.restart[1:]} to use it; then: {client.check}.\n")  # fmt: skip
    where = show_home(Path(report["file"]), os.environ)
    write = f"ragctl mcp-config {client.name}{' --http' if report['transport'] == 'http' else ''} --write"
    if client.name == "claude-code":
        return (f"{client.label}: run this (or `{write}`, which merges the same entry into {where}, "
                f"user scope)\n  {report['command_line']}\n")  # fmt: skip
    return f'{client.label}: the "{SERVER}" server in {where} (`{write}` merges it in)\n{body}'
