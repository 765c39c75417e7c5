"""The systemd units in systemd/: `systemd-analyze verify` prints nothing for them (it exits 0 even on typos, so
the test reads its output), they carry the settings the issue asks for, and the sysctl example is well formed.

Verifying needs an ExecStart= that exists: each unit is rendered by the installer's own code with ExecStart at a
real executable, placed in a directory whose name needs quoting and escaping (space, `%`, `$`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragd.edges.lifecycle import TICK_S

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "packaging" / "installer"))

from ragd_installer.render import render_unit  # noqa: E402

SYSTEMD = REPO / "systemd"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")

SYSTEM_HARDENING = {
    "ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6", "RestrictNamespaces": "yes", "LockPersonality": "yes",
    "SystemCallFilter": "@system-service", "StateDirectory": "ragd", "RuntimeDirectory": "ragd",
    "RuntimeDirectoryMode": "0711", "ConfigurationDirectory": "ragd", "User": "ragd",
}  # fmt: skip
SERVICE = {
    "Type": "notify",
    "NotifyAccess": "main",
    "Restart": "on-failure",
}


def settings(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def fake_program(tmp_path: Path) -> Path:
    exe = tmp_path / "pre fix 100% $x" / "bin" / "ragd"
    exe.parent.mkdir(parents=True)
    for program in (exe, exe.with_name("ragctl")):
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
    return exe


def verify(unit: Path, *, user: bool) -> str:
    assert ANALYZE is not None
    cmd = [ANALYZE, *(["--user"] if user else []), "verify", str(unit)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=os.environ.copy())
    return (proc.stdout + proc.stderr).strip()


@needs_analyze
@pytest.mark.parametrize(("template", "user"), [("ragd.service", True), ("ragd-system.service", False)])
def test_verify_prints_nothing(tmp_path: Path, template: str, user: bool) -> None:
    roots = [] if user else [Path("/srv/docs"), Path("/srv/my docs 50%")]
    text = render_unit((SYSTEMD / template).read_text(), fake_program(tmp_path), roots)
    unit = tmp_path / "units" / "ragd.service"
    unit.parent.mkdir()
    unit.write_text(text)
    assert verify(unit, user=user) == ""


@needs_analyze
def test_verify_does_report_a_broken_unit(tmp_path: Path) -> None:
    """The check above is meaningful: a typo in a unit does produce output (while the exit status is 0)."""
    text = render_unit((SYSTEMD / "ragd-system.service").read_text(), fake_program(tmp_path), [])
    unit = tmp_path / "ragd.service"
    unit.write_text(text.replace("Restart=on-failure", "Restart=on-failur\nProtectSytem=strict"))
    out = verify(unit, user=False)
    assert "on-failur" in out and "ProtectSytem" in out


@needs_analyze
def test_system_unit_exposure_stays_low(tmp_path: Path) -> None:
    text = render_unit((SYSTEMD / "ragd-system.service").read_text(), fake_program(tmp_path), [Path("/srv")])
    unit = tmp_path / "ragd.service"
    unit.write_text(text)
    assert ANALYZE is not None
    proc = subprocess.run([ANALYZE, "security", "--offline=true", str(unit)], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for ragd.service: ([0-9.]+)", proc.stdout)
    assert m is not None, proc.stdout + proc.stderr
    assert float(m.group(1)) <= 2.0  # 1.3 when written (docs/operations.md); guard against losing hardening


def test_units_carry_the_required_settings() -> None:
    system = settings((SYSTEMD / "ragd-system.service").read_text())
    user = settings((SYSTEMD / "ragd.service").read_text())
    for key, value in {**SERVICE, **SYSTEM_HARDENING}.items():
        assert value in system.get(key, []), key
    for key, value in SERVICE.items():
        assert value in user.get(key, []), key
    assert "User" not in user and user["WantedBy"] == ["default.target"]
    # `systemctl reload` runs `ragctl reload`, which waits for the agent's answer and fails with an invalid config
    assert system["ExecReload"] == ["/opt/ragd/lib/ragd/current/bin/ragctl reload"]
    assert user["ExecReload"] == ["%h/.local/lib/ragd/current/bin/ragctl reload"]
    assert system["WantedBy"] == ["multi-user.target"]
    for unit in (system, user):
        watchdog = float(unit["WatchdogSec"][0].removesuffix("s"))
        assert watchdog / 2 >= 20 * TICK_S  # the main loop pings every WatchdogSec/2, ticking every TICK_S


def test_sysctl_example_is_well_formed() -> None:
    lines = [
        line
        for line in (SYSTEMD / "60-ragd-inotify.conf").read_text().splitlines()
        if line and line[0] != "#"
    ]
    keys = {}
    for line in lines:
        m = re.fullmatch(r"([a-z_.]+) = ([0-9]+)", line)
        assert m is not None, line
        keys[m.group(1)] = m.group(2)
    assert int(keys["fs.inotify.max_user_watches"]) >= 524288
    assert set(keys) <= {"fs.inotify.max_user_watches", "fs.inotify.max_user_instances"}
