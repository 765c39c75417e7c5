"""The text files an installation writes: the unit (from the payload's template), the default config, the
sysusers.d entry of the `ragd` account.

Units are rendered line by line from the shipped templates (systemd/ragd.service, systemd/ragd-system.service):
`ExecStart=`'s program is replaced by the installed one (and `ExecReload=`'s by the installed `ragctl`), and one
`ReadWritePaths=` line per root goes below the template's `# @roots` marker. Paths are quoted and escaped as systemd.syntax(7) and systemd.unit(5) ask:
`%` doubled (specifiers), double quotes around anything unusual. (ExecStart's program is not subject to
`$VAR` substitution, only its arguments are: a `$` in the path stays as it is; tests/unit/installer/test_units.py checks
this with systemd-analyze verify.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from .layout import ACCOUNT, InstallError, Layout

ROOTS_MARKER = "# @roots"
_PLAIN = re.compile(r"^[A-Za-z0-9/._+:@,=-]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def unit_word(text: str) -> str:
    """One word of a unit setting: specifiers escaped, quoted when it holds anything but plain characters."""
    if _CONTROL.search(text):
        raise InstallError(
            f"the path {text!r} contains a control character (e.g. a newline)",
            "systemd units cannot name it: rename it",
        )
    text = text.replace("%", "%%")
    if _PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_unit(template: str, exec_start: Path, rw_paths: Sequence[Path]) -> str:
    """The template with ExecStart's program replaced and a ReadWritePaths= line per root below `# @roots`."""
    out: list[str] = []
    seen_exec = False
    for line in template.splitlines():
        if line.startswith("ExecStart="):
            args = line.removeprefix("ExecStart=").split(maxsplit=1)[1:]
            out.append(" ".join([f"ExecStart={unit_word(str(exec_start))}", *args]))
            seen_exec = True
        elif line.startswith("ExecReload="):  # `ragctl reload`, installed beside the agent
            args = line.removeprefix("ExecReload=").split(maxsplit=1)[1:]
            out.append(" ".join([f"ExecReload={unit_word(str(exec_start.with_name('ragctl')))}", *args]))
        elif line.startswith("ReadWritePaths="):
            continue  # the template's own (none by default) give way to the roots
        else:
            out.append(line)
            if line.startswith(ROOTS_MARKER):
                out.extend(f"ReadWritePaths={unit_word('-' + str(p))}" for p in rw_paths)
    if not seen_exec:
        raise InstallError("the unit template has no ExecStart= line", "rebuild the payload")
    if rw_paths and not any(line.startswith(ROOTS_MARKER) for line in out):
        raise InstallError(f"the unit template has no {ROOTS_MARKER!r} line", "rebuild the payload")
    return "\n".join(out) + "\n"


def default_config(layout: Layout, roots: Sequence[Path], version: str) -> str:
    """config.toml for a first install: the roots, and how to switch to an embeddings API."""
    reload = "systemctl --user reload ragd" if layout.mode == "user" else "sudo systemctl reload ragd"
    lines = [
        "# ragd configuration. Every key and its default: docs/config.md; check it with `ragd config check`.",
        f"# Written by ragd-installer {version}; re-installing and upgrading keep this file as it is.",
        f"# After an edit: {reload}",
        "",
        "# The folders ragd keeps searchable (at run time also: ragctl roots add DIR).",
    ]
    if layout.mode == "system":
        lines.append(
            "# A new root must also be writable by the service: see docs/operations.md (ReadWritePaths)."
        )
    lines.append("roots = [")
    lines.extend(f"  {json.dumps(str(p), ensure_ascii=False)}," for p in roots)
    lines += [
        "]",
        "",
        "# The bundled offline model is the default. To use an OpenAI-compatible embeddings API instead:",
        "# [embedding]",
        '# provider = "openai"',
        '# base_url = "http://127.0.0.1:8080/v1"',
        '# model = "bge-m3"',
        "# dimension = 1024",
        '# api_key_env = "EMBEDDINGS_API_KEY"   # or api_key = "…" here: this file is private to ragd',
        "",
        "# MCP for AI tools: `ragctl mcp` (stdio), or streamable HTTP at http://127.0.0.1:8739/mcp. Every local",
        "# process can reach a loopback port; a token keeps other users of this machine out (docs/mcp.md):",
        "# [mcp]",
        '# token = "…"',
    ]
    if layout.mode == "system":
        lines += [
            "",
            "# Every local user may use this agent (ragctl, ragctl mcp); each gets answers about the files they can",
            '# read only. "owner": only root and ragd; "group" with group = "NAME": also that group (docs/access.md).',
            "# Over HTTP, a request without a token gets what every user may read; a user's own token, set in",
            '# [mcp.tokens] (e.g. alice = "…"), gets what that user may read.',
            "[access]",
            'connect = "anyone"',
        ]
    return "\n".join(lines) + "\n"


def sysusers_entry(data_dir: Path) -> str:
    """sysusers.d(5) line creating the service account (a system user with its own group, no login)."""
    return (
        "# The account of the ragd system service (ragd-installer --system).\n"
        f'u {ACCOUNT} - "ragd knowledge-base agent" {data_dir} /usr/sbin/nologin\n'
    )
