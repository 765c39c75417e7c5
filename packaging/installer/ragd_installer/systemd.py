"""The commands an installation runs after placing files: account creation, `systemctl`.

They run only for a real installation (no `--root`) on a machine where systemd runs (and, for a user install,
where the user's manager is reachable); otherwise the installer prints them for the user to run.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .layout import ACCOUNT, Layout

Command = tuple[str, ...]


@dataclass(frozen=True)
class CommandResult:
    command: Command
    returncode: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def systemd_running() -> bool:
    """sd_booted(3): the machine was booted with systemd as its init."""
    return Path("/run/systemd/system").is_dir()


def user_runtime_dir(environ: Mapping[str, str]) -> Path:
    """Where this user's systemd manager listens: $XDG_RUNTIME_DIR, or /run/user/<uid> in a shell that has none
    (runuser and sudo -u start no login session; the manager still runs there while the user is logged in
    elsewhere, or always with lingering)."""
    return Path(environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")


def manager_reachable(layout: Layout, environ: Mapping[str, str]) -> bool:
    if not systemd_running():
        return False
    if layout.mode == "system":
        return True
    return (user_runtime_dir(environ) / "systemd").is_dir()


def command_environ(layout: Layout, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the commands run: `systemctl --user` finds the manager through $XDG_RUNTIME_DIR."""
    env = dict(environ)
    if layout.mode == "user":
        env["XDG_RUNTIME_DIR"] = str(user_runtime_dir(environ))
    return env


def account_commands(layout: Layout, config_written: bool) -> list[Command]:
    """System install: create the `ragd` account when it is missing; give its group the new config file."""
    if layout.mode != "system":
        return []
    cmds: list[Command] = []
    if layout.root is not None or not account_exists():
        if layout.root is None and shutil.which("systemd-sysusers") is None:
            cmds.append(useradd_command(layout))
        else:
            cmds.append(("systemd-sysusers", str(layout.sysusers_path)))
    if config_written:
        cmds.append(("chgrp", ACCOUNT, str(layout.config_path)))
    return cmds


def useradd_command(layout: Layout) -> Command:
    return ("useradd", "--system", "--user-group", "--home-dir", str(layout.data_dir), "--no-create-home",
            "--shell", "/usr/sbin/nologin", "--comment", "ragd knowledge-base agent", ACCOUNT)  # fmt: skip


def account_exists() -> bool:
    try:
        pwd.getpwnam(ACCOUNT)
        grp.getgrnam(ACCOUNT)
    except KeyError:
        return False
    return True


def start_commands(layout: Layout, upgrade: bool) -> list[Command]:
    ctl = tuple(layout.systemctl)
    cmds = [(*ctl, "daemon-reload"), (*ctl, "enable", "--now", "ragd")]
    if upgrade:
        cmds.append((*ctl, "try-restart", "ragd"))  # a running agent switches to the new version
    return cmds


def stop_commands(layout: Layout) -> list[Command]:
    return [(*layout.systemctl, "disable", "--now", "ragd")]


def reload_commands(layout: Layout) -> list[Command]:
    return [(*layout.systemctl, "daemon-reload")]


def run_all(
    commands: Sequence[Command], *, keep_going: bool = False, env: Mapping[str, str] | None = None
) -> list[CommandResult]:
    """Run the commands in order; stop at the first failure unless `keep_going`."""
    results: list[CommandResult] = []
    for cmd in commands:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120, env=env)
            result = CommandResult(cmd, proc.returncode, (proc.stderr or proc.stdout).strip())
        except (OSError, subprocess.TimeoutExpired) as err:
            result = CommandResult(cmd, 127, str(err))
        results.append(result)
        if not result.ok and not keep_going:
            break
    return results


def shell_line(cmd: Command) -> str:
    return shlex.join(cmd)
