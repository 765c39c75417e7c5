"""`ragd-installer install`: place the program, link it, write the unit and a default config, start it.

Upgrade in place: the new version goes to <prefix>/lib/ragd/<version>/ (staged beside it and renamed in), then
the `current` link is switched with one rename. The previous version is kept (a running agent keeps using it
until its restart; it is also the way back), older ones are removed. The config is never overwritten.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .fsops import Writer, link_points_into, remove_tree
from .layout import PROGRAMS, InstallError, Layout, Mode, resolve_layout
from .manifest import Manifest, read_manifest, sorted_paths
from .payload import MANIFEST_NAME, Payload, open_payload
from .render import default_config, render_unit, sysusers_entry, unit_word
from .report import Report
from .systemd import (
    Command,
    account_commands,
    command_environ,
    manager_reachable,
    run_all,
    shell_line,
    start_commands,
    systemd_running,
)

_DEBRIS = re.compile(r"^\..+\.(new|old)-\d+$|^\..+\.\d+\.(lnk|tmp)$")


@dataclass(frozen=True)
class InstallOptions:
    mode: Mode = "user"
    prefix: Path | None = None
    root: Path | None = None  # DESTDIR
    roots: tuple[Path, ...] = ()
    start: bool = True
    payload: Path | None = None  # directory or tar; default: the one bundled in the frozen installer
    force: bool = False  # install an older version over a newer one


def install(opts: InstallOptions, environ: Mapping[str, str]) -> Report:
    layout = resolve_layout(opts.mode, opts.prefix, opts.root, environ)
    check_privileges(layout)
    roots = normalize_roots(opts.roots)
    if layout.root is None:  # staged (--root): the roots are the target machine's, not this one's
        check_roots_exist(roots)
    payload = open_payload(opts.payload)
    previous = read_manifest(layout)
    check_links(layout)
    check_not_older(layout, payload, opts.force)
    writer, report = Writer(layout), Report()
    old_version = place_program(layout, writer, payload, report)
    for bin_dir in layout.bin_dirs:
        for name in PROGRAMS:
            writer.symlink(bin_dir / name, layout.program(name))
    report.done.append("linked   " + ", ".join(str(d / n) for d in layout.bin_dirs for n in PROGRAMS))
    config_written = write_config(layout, writer, roots, report)
    rw_roots = writable_roots(layout, roots, report) if layout.mode == "system" else []
    write_units(layout, writer, payload, rw_roots, report)
    manifest = _manifest(layout, writer, payload, previous, old_version, config_written, rw_roots or roots)
    writer.write_text(layout.manifest_path, manifest.to_json(), 0o644)
    activate(layout, opts, environ, previous is not None, config_written, report)
    _notes(layout, roots, environ, config_written, report)
    return report


def check_privileges(layout: Layout) -> None:
    if layout.mode == "system" and layout.root is None and os.geteuid() != 0:
        raise InstallError(
            "a system installation needs root",
            "run it with sudo, use --user for your own account, or --root DESTDIR to stage the files",
        )


def normalize_roots(roots: Sequence[Path]) -> list[Path]:
    """Absolute, normalised, without duplicates, and nameable in a unit (no control characters)."""
    out = [Path(os.path.abspath(os.path.expanduser(r))) for r in roots]
    for r in out:
        unit_word(str(r))  # raises InstallError for a path systemd cannot name
    return list(dict.fromkeys(out))


def check_roots_exist(roots: Sequence[Path]) -> None:
    """Each --roots folder exists and is a folder: a typo would otherwise be indexed as nothing, silently."""
    for root in roots:
        if not root.is_dir():
            what = "is not a folder" if root.exists() else "does not exist"
            raise InstallError(
                f"--roots {root} {what}",
                f"correct the path, or create the folder first (mkdir -p {root}) and run the installer again",
            )


def version_key(version: str) -> tuple[int, ...]:
    """A version's release numbers, for ordering: "1.10.0" > "1.9.2" (a local part, "+g1a2b", is ignored)."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0].split("-")[0])[:4])


def installed_version(layout: Layout) -> str | None:
    current = layout.real(layout.current)
    return os.readlink(current) if current.is_symlink() else None


def check_not_older(layout: Layout, payload: Payload, force: bool) -> None:
    """Refuse to put an older version over a newer one unless forced (its index or config may be newer too)."""
    old, new = installed_version(layout), payload.info.version
    if old and version_key(new) < version_key(old) and not force:
        raise InstallError(
            f"ragd {old} is installed, newer than this installer's {new}: not downgrading",
            f"to upgrade, run the installer of {old} or later; to go back to {new} anyway, add --force",
        )


def check_links(layout: Layout) -> None:
    """Refuse to replace a `ragd`/`ragctl` in a bin dir that is not one of our links."""
    foreign = []
    for bin_dir in layout.bin_dirs:
        for name in PROGRAMS:
            real = layout.real(bin_dir / name)
            if (real.exists() or real.is_symlink()) and not link_points_into(real, layout.lib_dir):
                foreign.append(str(bin_dir / name))
    if foreign:
        raise InstallError(
            f"not replacing {', '.join(foreign)}: not installed by ragd-installer",
            "remove them (e.g. `pip uninstall ragd`), or install with another --prefix",
        )


def place_program(layout: Layout, writer: Writer, payload: Payload, report: Report) -> str | None:
    """Put the payload at lib/ragd/<version>, switch `current` to it, prune; returns the version replaced."""
    writer.mkdirs(layout.lib_dir)
    lib = layout.real(layout.lib_dir)
    for entry in lib.iterdir():
        if _DEBRIS.match(entry.name):  # left by an interrupted installation
            remove_tree(entry)
    version = payload.info.version
    staging = lib / f".{version}.new-{os.getpid()}"
    try:
        payload.place(staging)
        os.chmod(staging, 0o755)
        _swap_in(staging, lib / version)
    except BaseException:
        remove_tree(staging)
        raise
    current = layout.real(layout.current)
    old = os.readlink(current) if current.is_symlink() else None
    writer.symlink(layout.current, version)  # relative: the tree can be moved (DESTDIR staging)
    removed = prune_versions(lib, keep={version, old or version})
    verb = "reinstalled" if old == version else "installed" if old is None else "upgraded"
    if old and version_key(version) < version_key(old):
        verb = "downgraded"
    was = f", was {old}" if old and old != version else ""
    report.done.append(
        f"{verb} ragd {payload.info.version} ({layout.mode}{was}) in {layout.lib_dir / version}"
    )
    if removed:
        report.done.append("removed  old version(s) " + ", ".join(removed))
    return old


def _swap_in(staging: Path, target: Path) -> None:
    if not target.exists():
        os.rename(staging, target)
        return
    aside = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.rename(target, aside)
    os.rename(staging, target)
    remove_tree(aside)


def prune_versions(lib: Path, keep: set[str]) -> list[str]:
    """Remove version directories (ours: they hold a payload manifest) other than `keep`."""
    removed = []
    for entry in sorted(lib.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name not in keep and (entry / MANIFEST_NAME).is_file():
            remove_tree(entry)
            removed.append(entry.name)
    return removed


def write_config(layout: Layout, writer: Writer, roots: list[Path], report: Report) -> bool:
    """Write the default config unless one exists; True when written. User: 0600; system: 0640 (group ragd)."""
    real = layout.real(layout.config_path)
    if real.exists() or real.is_symlink():
        report.done.append(f"config   {layout.config_path} kept as it is")
        missing = [str(r) for r in roots if r not in _config_roots(layout, report)]
        if missing:
            report.notes.append(f"the kept config does not list {', '.join(missing)}: add them to its roots")
        return False
    user = layout.mode == "user"
    writer.mkdirs(layout.config_path.parent, mode=0o700 if user else 0o755)
    text = default_config(layout, roots, __version__)
    writer.write_text(layout.config_path, text, 0o600 if user else 0o640)
    report.done.append(f"config   {layout.config_path} written")
    return True


def writable_roots(layout: Layout, roots: list[Path], report: Report) -> list[Path]:
    """ReadWritePaths= of the system unit: --roots, the kept config's roots, and roots added with ragctl."""
    found = [*roots, *_config_roots(layout, report), *_added_roots(layout)]
    return list(dict.fromkeys(found))


def _config_roots(layout: Layout, report: Report) -> list[Path]:
    path = layout.real(layout.config_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        report.notes.append(
            f"could not read the roots of {layout.config_path} ({err}); the unit lists --roots only"
        )
        return []
    roots = data.get("roots", [])
    return (
        [Path(r) for r in roots if isinstance(r, str) and Path(r).is_absolute()]
        if isinstance(roots, list)
        else []
    )


def _added_roots(layout: Layout) -> list[Path]:
    try:
        raw = json.loads(layout.real(layout.data_dir / "roots.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    added = raw.get("added", []) if isinstance(raw, dict) else []
    return [Path(p) for p in added if isinstance(p, str) and Path(p).is_absolute()]


def write_units(
    layout: Layout, writer: Writer, payload: Payload, rw_roots: list[Path], report: Report
) -> None:
    template = payload.unit_template("ragd.service" if layout.mode == "user" else "ragd-system.service")
    writer.write_text(layout.unit_path, render_unit(template, layout.program("ragd"), rw_roots), 0o644)
    report.done.append(f"unit     {layout.unit_path}")
    if layout.sysusers_path is not None:
        writer.write_text(layout.sysusers_path, sysusers_entry(layout.data_dir), 0o644)
        report.done.append(f"account  {layout.sysusers_path} (user and group ragd)")


def _manifest(
    layout: Layout,
    writer: Writer,
    payload: Payload,
    previous: Manifest | None,
    old_version: str | None,
    config_written: bool,
    roots: list[Path],
) -> Manifest:
    created = [*(previous.created_dirs if previous else []), *map(str, writer.created_dirs)]
    return Manifest(
        mode=layout.mode,
        prefix=str(layout.prefix),
        version=payload.info.version,
        previous_version=old_version if old_version != payload.info.version else None,
        installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        unit=str(layout.unit_path),
        sysusers=str(layout.sysusers_path) if layout.sysusers_path else None,
        links=sorted_paths([d / n for d in layout.bin_dirs for n in PROGRAMS]),
        config=str(layout.config_path),
        config_written=config_written or bool(previous and previous.config_written),
        data_dir=str(layout.data_dir),
        roots=[str(r) for r in roots],
        created_dirs=sorted_paths(created),
    )


def activate(
    layout: Layout,
    opts: InstallOptions,
    environ: Mapping[str, str],
    upgrade: bool,
    config_written: bool,
    report: Report,
) -> None:
    """Create the account (system) and start the service, or say which commands to run instead."""
    setup, start = account_commands(layout, config_written), start_commands(layout, upgrade)
    if layout.root is not None:
        report.to_run, report.to_run_reason = setup + start, "--root: nothing outside DESTDIR was touched"
        return
    report.ran += run_all(setup)
    if report.failed:
        report.to_run, report.to_run_reason = start, "the account could not be set up"
    elif not opts.start:
        report.to_run, report.to_run_reason = start, "--no-start: the service was not started"
    elif not manager_reachable(layout, environ):
        if layout.mode == "user" and systemd_running():
            report.notes.append(
                _no_user_manager(start, environ)
            )  # `systemctl --user` would fail in this shell
        else:
            report.to_run, report.to_run_reason = start, "systemd is not running on this machine"
    else:
        report.ran += run_all(start, env=command_environ(layout, environ))


def lingering(environ: Mapping[str, str]) -> bool:
    """This user's manager runs without a login session (loginctl enable-linger: logind's flag file)."""
    user = environ.get("USER") or environ.get("LOGNAME") or pwd.getpwuid(os.getuid()).pw_name
    return Path("/var/lib/systemd/linger", user).exists()


def _no_user_manager(start: list[Command], environ: Mapping[str, str]) -> str:
    """What to do when this account's systemd manager is not running: a shell from runuser or sudo -u has no login
    session, so `systemctl --user` cannot work in it."""
    user = environ.get("USER") or environ.get("LOGNAME") or pwd.getpwuid(os.getuid()).pw_name
    commands = " && ".join(shell_line(c) for c in start)
    return (
        f"the service was not started: {user}'s systemd user manager is not running (this shell has no login "
        f"session: runuser and sudo -u start none). Either have it run always: as root, loginctl enable-linger "
        f"{user}, then run this installer again; or log in as {user} (a desktop, ssh, machinectl shell "
        f"{user}@) and run there: {commands}"
    )


def _notes(
    layout: Layout, roots: list[Path], environ: Mapping[str, str], config_written: bool, report: Report
) -> None:
    if layout.mode == "user":
        if not lingering(environ) and not any("enable-linger" in n for n in report.notes):
            report.notes.append(
                "to keep the agent running while you are logged out: loginctl enable-linger $USER"
            )
        path = environ.get("PATH", "").split(os.pathsep)
        if layout.root is None and str(layout.bin_dirs[0]) not in path:
            report.notes.append(f"{layout.bin_dirs[0]} is not on your PATH: add it to use ragd and ragctl")
    elif roots:
        dirs = " ".join(map(str, roots))
        report.notes.append(
            f"the ragd account needs access to the roots: setfacl -R -m u:ragd:rwX -m d:u:ragd:rwX {dirs}"
        )
    if config_written and not roots:
        report.notes.append(f"no roots given: add folders to {layout.config_path} (or ragctl roots add DIR)")
    if not report.failed:
        ragctl = layout.bin_dirs[0] / "ragctl"  # by its full path: AI tools do not see the shell's PATH
        report.notes.append(f"connect an AI tool (Claude, Cursor, VS Code): {ragctl} mcp-config")
