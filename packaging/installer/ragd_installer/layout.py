"""Where an installation puts everything, for a user or a system install, with an optional DESTDIR (`--root`).

Paths in a `Layout` are the *final* paths, as the installed system sees them (they go into the unit, the links
and the manifest); `real()` maps one to the path actually written, below DESTDIR when one is given.

    user   (prefix ~/.local)   program  ~/.local/lib/ragd/<version>/, ~/.local/lib/ragd/current -> <version>
                               links    ~/.local/bin/{ragd,ragctl}
                               unit     ~/.config/systemd/user/ragd.service
                               config   ~/.config/ragd/config.toml        data  ~/.local/share/ragd
    system (prefix /opt/ragd)  program  /opt/ragd/lib/ragd/<version>/, /opt/ragd/lib/ragd/current
                               links    /opt/ragd/bin/{ragd,ragctl} and /usr/local/bin/{ragd,ragctl}
                               unit     /etc/systemd/system/ragd.service  account  /etc/sysusers.d/ragd.conf
                               config   /etc/ragd/config.toml             data  /var/lib/ragd
($XDG_CONFIG_HOME and $XDG_DATA_HOME are honoured for a user install, as the agent honours them.)
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragd.errors import RagdError

Mode = Literal["user", "system"]
APP = "ragd"
MANIFEST = "install.json"
PROGRAMS = ("ragd", "ragctl")
SYSTEM_PREFIX = Path("/opt/ragd")
SYSTEM_EXTRA_BIN = Path("/usr/local/bin")
ACCOUNT = "ragd"


class InstallError(RagdError):
    code = "install"


@dataclass(frozen=True)
class Layout:
    mode: Mode
    prefix: Path
    root: Path | None  # DESTDIR: every write goes below it, and nothing outside it is touched
    bin_dirs: tuple[Path, ...]
    unit_path: Path
    config_path: Path
    data_dir: Path
    sysusers_path: Path | None

    @property
    def lib_dir(self) -> Path:
        """<prefix>/lib/ragd: one directory per version, the `current` link, the manifest."""
        return self.prefix / "lib" / APP

    @property
    def current(self) -> Path:
        return self.lib_dir / "current"

    @property
    def manifest_path(self) -> Path:
        return self.lib_dir / MANIFEST

    @property
    def dropin_dir(self) -> Path:
        return self.unit_path.with_name(self.unit_path.name + ".d")

    @property
    def systemctl(self) -> list[str]:
        return ["systemctl", "--user"] if self.mode == "user" else ["systemctl"]

    def program(self, name: str) -> Path:
        """The program as the unit and the links name it: through `current`, so an upgrade switches it."""
        return self.current / "bin" / name

    def real(self, path: Path) -> Path:
        """The path to read or write: `path` itself, or the same path below DESTDIR."""
        if self.root is None:
            return path
        return self.root / path.relative_to(path.anchor)


def resolve_layout(mode: Mode, prefix: Path | None, root: Path | None, environ: Mapping[str, str]) -> Layout:
    if root is not None:
        root = Path(os.path.abspath(os.path.expanduser(root)))
    if mode == "user":
        return _user_layout(prefix, root, environ)
    prefix = _absolute(prefix or SYSTEM_PREFIX, "--prefix")
    bins = tuple(dict.fromkeys([prefix / "bin", SYSTEM_EXTRA_BIN]))
    return Layout(
        mode="system",
        prefix=prefix,
        root=root,
        bin_dirs=bins,
        unit_path=Path("/etc/systemd/system/ragd.service"),
        config_path=Path("/etc/ragd/config.toml"),
        data_dir=Path("/var/lib/ragd"),
        sysusers_path=Path("/etc/sysusers.d/ragd.conf"),
    )


def _user_layout(prefix: Path | None, root: Path | None, environ: Mapping[str, str]) -> Layout:
    home = Path(environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)
    home = _absolute(home, "$HOME")
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    data_home = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    prefix = _absolute(prefix or home / ".local", "--prefix")
    return Layout(
        mode="user",
        prefix=prefix,
        root=root,
        bin_dirs=(prefix / "bin",),
        unit_path=config_home / "systemd" / "user" / "ragd.service",
        config_path=config_home / APP / "config.toml",
        data_dir=data_home / APP,
        sysusers_path=None,
    )


def _absolute(path: Path, what: str) -> Path:
    path = Path(os.path.expanduser(path))
    if not path.is_absolute():
        raise InstallError(f"{what} must be an absolute path, not {str(path)!r}", "give the full path")
    return Path(os.path.normpath(path))
