"""The `ragd-installer` command line.

    ragd-installer install [--user | --system] [--prefix P] [--root DESTDIR] [--roots DIR...] [--no-start]
                           [--force]
    ragd-installer uninstall [--user | --system] [--prefix P] [--root DESTDIR] [--purge]
    ragd-installer --version
Exit status: 0 done, 1 failed (the message says why and what to do), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ragd.errors import RagdError

from . import __version__
from .install import InstallOptions, install
from .payload import open_payload
from .report import Report
from .uninstall import UninstallOptions, uninstall

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ragd-installer", description="Install or remove the ragd agent and its systemd service."
    )
    p.add_argument("--version", action="store_true", help="print the installer's and the payload's version")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    inst = sub.add_parser("install", help="install or upgrade (the config is kept)")
    _common(inst)
    inst.add_argument("--roots", nargs="+", type=Path, default=[], metavar="DIR",
                      help="folders to index (new config; system: also the unit's ReadWritePaths=)")  # fmt: skip
    inst.add_argument("--no-start", action="store_true", help="do not run systemctl; print the commands")
    inst.add_argument("--force", action="store_true", help="install even over a newer installed version")
    inst.add_argument("--payload", type=Path, metavar="DIR|TAR",
                      help="install this payload instead of the bundled one (development)")  # fmt: skip
    uni = sub.add_parser("uninstall", help="stop the service and remove the program, links and unit")
    _common(uni)
    uni.add_argument("--purge", action="store_true",
                     help="also remove the config and the data (index); never the documents or their .rag/")  # fmt: skip
    return p


def _common(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--user", dest="mode", action="store_const", const="user",
                      help="for your account: prefix ~/.local, a systemd user service (default)")  # fmt: skip
    mode.add_argument("--system", dest="mode", action="store_const", const="system",
                      help="for the machine: prefix /opt/ragd, a system service under the account ragd")  # fmt: skip
    p.set_defaults(mode="user")
    p.add_argument("--prefix", type=Path, help="install under this directory")
    p.add_argument("--root", type=Path, metavar="DESTDIR",
                   help="stage every file below DESTDIR; touch nothing else (no account, no systemctl)")  # fmt: skip


def version_text() -> str:
    try:
        payload = open_payload(None).info.describe()
    except RagdError:
        payload = "no payload bundled"
    return f"ragd-installer {__version__} (payload: {payload})"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if args.version:
        print(version_text())
        return EXIT_OK
    if args.command is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    os.umask(0o022)
    try:
        report = _run(args)
    except RagdError as err:
        print(f"ragd-installer: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return EXIT_FAILED
    report.print(sys.stdout)
    return EXIT_FAILED if report.failed and args.command == "install" else EXIT_OK


def _run(args: argparse.Namespace) -> Report:
    if args.command == "install":
        opts = InstallOptions(
            args.mode, args.prefix, args.root, tuple(args.roots), not args.no_start, args.payload, args.force
        )
        return install(opts, os.environ)
    return uninstall(UninstallOptions(args.mode, args.prefix, args.root, args.purge), os.environ)
