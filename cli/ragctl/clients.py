"""What each MCP client wants to be told to reach ragd: where its config file is and the entry that goes in it.

    client          file (Linux; macOS in brackets)                                   servers under   HTTP
    claude-desktop  ~/.config/Claude/claude_desktop_config.json                       mcpServers      no (stdio only)
                    [~/Library/Application Support/Claude/claude_desktop_config.json]
    claude-code     ~/.claude.json (user scope; `claude mcp add --scope user` writes it) mcpServers    yes
    cursor          ~/.cursor/mcp.json                                                mcpServers      yes
    vscode          ~/.config/Code/User/mcp.json (the user profile's)                 servers         yes
                    [~/Library/Application Support/Code/User/mcp.json]

The stdio entry starts this very ragctl program by its absolute path (AI tools do not see the shell's PATH); the
HTTP entry names the agent's URL and, when the agent has a token, the `Authorization: Bearer` header.
Standard library only, like all of ragctl.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVER = "ragd"  # the entry's name in every client's file
DEFAULT_URL = "http://127.0.0.1:8739/mcp"  # [mcp] host and port by default (docs/config.md)

Entry = dict[str, Any]


@dataclass(frozen=True)
class Command:
    """How an MCP client starts `ragctl mcp`."""

    command: str  # absolute
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # only what the program needs to start (rare)

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]


@dataclass(frozen=True)
class Endpoint:
    """The agent's streamable HTTP endpoint."""

    url: str
    token: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


# -- this program -----------------------------------------------------------------------------------------------
def this_program(
    argv0: str | None = None, environ: Mapping[str, str] | None = None, frozen: bool | None = None
) -> Command:
    """`ragctl mcp` as this ragctl was started: the frozen program or the console script by its absolute path
    (symbolic links kept, so an installer's `current` link still points at the newest version after an upgrade),
    or `python -m ragctl mcp` with this interpreter."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    env = os.environ if environ is None else environ
    frozen = bool(getattr(sys, "frozen", False)) if frozen is None else frozen
    module = not frozen and Path(argv0).name == "__main__.py"
    if module:
        argv = [_absolute(sys.executable), "-m", "ragctl"]
    else:
        found = _program_path(argv0) or (_absolute(sys.executable) if frozen else None)
        if found is None:
            raise LookupError(f"cannot tell where this ragctl program is (started as {argv0!r})")
        argv = [found] if frozen or os.access(found, os.X_OK) else [_absolute(sys.executable), found]
    return Command(argv[0], (*argv[1:], "mcp"), {} if frozen else _import_env(env, module))


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _program_path(argv0: str) -> str | None:
    """argv[0] made absolute (a name without a slash was found on PATH), else the `ragctl` on PATH."""
    if os.sep in argv0 and os.path.isfile(argv0):
        return _absolute(argv0)
    found = shutil.which(argv0) if argv0 and os.sep not in argv0 else None
    found = found or shutil.which("ragctl")
    return _absolute(found) if found else None


def _import_env(environ: Mapping[str, str], module: bool) -> dict[str, str]:
    """PYTHONPATH for a ragctl imported from a folder only PYTHONPATH (or, with -m, the working directory) adds:
    the client would not add it (a source checkout; installed programs need nothing)."""
    package_dir = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    extra = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if module and sys.path and sys.path[0]:
        extra.append(sys.path[0])
    if any(os.path.realpath(p) == package_dir for p in extra):
        return {"PYTHONPATH": package_dir}
    return {}


# -- the clients ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Client:
    name: str  # as on the command line
    label: str
    key: str  # the object of servers in its file
    default_file: Callable[[Mapping[str, str], str], Path]  # (environ, sys.platform)
    stdio: Callable[[Command], Entry]
    http: Callable[[Endpoint], Entry] | None  # None: the client's file takes no URLs
    restart: str  # what makes it read the file again
    check: str  # how to see that it works

    def entry(self, target: Command | Endpoint) -> Entry:
        if isinstance(target, Command):
            return self.stdio(target)
        if self.http is None:
            raise ValueError(f"{self.label} takes no HTTP servers in its config file")
        return self.http(target)

    def snippet(self, entry: Entry) -> dict[str, Any]:
        return {self.key: {SERVER: entry}}


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def _app_config(environ: Mapping[str, str], platform: str) -> Path:
    """Where an Electron app keeps its settings: ~/Library/Application Support, else $XDG_CONFIG_HOME or ~/.config."""
    if platform == "darwin":
        return _home(environ) / "Library" / "Application Support"
    return Path(environ.get("XDG_CONFIG_HOME") or _home(environ) / ".config")


def _stdio(cmd: Command, **first: str) -> Entry:
    return {
        **first,
        "command": cmd.command,
        "args": list(cmd.args),
        **({"env": dict(cmd.env)} if cmd.env else {}),
    }


def _http(ep: Endpoint, **first: str) -> Entry:
    return {**first, "url": ep.url, **({"headers": ep.headers} if ep.headers else {})}


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-desktop", "Claude Desktop", "mcpServers",
            lambda env, plat: _app_config(env, plat) / "Claude" / "claude_desktop_config.json",
            _stdio, None,
            "quit Claude Desktop completely (not just its window) and start it again",
            "Settings → Developer lists ragd as running, and its tools are in the chat's tools menu",
        ),
        Client(
            "claude-code", "Claude Code", "mcpServers",
            lambda env, plat: Path(env.get("CLAUDE_CONFIG_DIR") or _home(env)) / ".claude.json",
            lambda cmd: _stdio(cmd, type="stdio"), lambda ep: _http(ep, type="http"),
            "start a new Claude Code session (running ones keep the servers they started with)",
            "`claude mcp get ragd` says Connected; in a session, /mcp lists ragd and its tools",
        ),
        Client(
            "cursor", "Cursor", "mcpServers",
            lambda env, plat: _home(env) / ".cursor" / "mcp.json",
            _stdio, _http,
            "restart Cursor",
            "Cursor Settings → MCP (Tools & MCP) lists ragd with its tools and a green dot",
        ),
        Client(
            "vscode", "VS Code", "servers",
            lambda env, plat: _app_config(env, plat) / "Code" / "User" / "mcp.json",
            lambda cmd: _stdio(cmd, type="stdio"), lambda ep: _http(ep, type="http"),
            "restart VS Code (or: Command Palette → MCP: List Servers → ragd → Restart Server)",
            "Command Palette → MCP: List Servers shows ragd (Start it there, Show Output for its log); Copilot "
            "Chat's agent mode lists its tools",
        ),
    )
}  # fmt: skip


def claude_code_line(target: Command | Endpoint) -> str:
    """The `claude mcp add` command line that adds the same entry (user scope).

    The CLI's -e and --header take several values, so they come after the name (and the URL): before it they
    would swallow the name."""
    if isinstance(target, Command):
        env = [a for k, v in target.env.items() for a in ("-e", f"{k}={v}")]
        return shlex.join(["claude", "mcp", "add", "--scope", "user", SERVER, *env, "--", *target.argv])
    headers = [a for k, v in target.headers.items() for a in ("--header", f"{k}: {v}")]
    return shlex.join(["claude", "mcp", "add", "--scope", "user", "--transport", "http", SERVER, target.url,
                       *headers])  # fmt: skip


def pretty(value: Any, indent: str = "") -> str:
    """JSON as `json.dumps(indent=2)` writes it, but with a list of plain values on one line (["mcp"])."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + pretty(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value, ensure_ascii=False)


def show_home(path: Path, environ: Mapping[str, str]) -> str:
    """`path` with the home directory as ~ (for headings; written paths are shown in full)."""
    home = str(_home(environ))
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text
