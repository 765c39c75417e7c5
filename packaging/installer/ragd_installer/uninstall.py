"""`ragd-installer uninstall [--purge]`: stop the service and remove what install wrote (its manifest says what).

Kept without --purge: the config and the data directory (index, agent state). --purge removes those too, and
the unit's drop-in directory. Never removed: the documents in the roots and the `.rag/` sidecar folders beside
them (they are the knowledge base, readable by the ragjson tool), and the system account `ragd` (files in the
roots may belong to it).
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .fsops import link_points_into, remove_tree
from .install import check_privileges
from .layout import APP, InstallError, Layout, Mode, resolve_layout
from .manifest import Manifest, read_manifest
from .report import Report
from .systemd import command_environ, manager_reachable, reload_commands, run_all, stop_commands


@dataclass(frozen=True)
class UninstallOptions:
    mode: Mode = "user"
    prefix: Path | None = None
    root: Path | None = None
    purge: bool = False


def uninstall(opts: UninstallOptions, environ: Mapping[str, str]) -> Report:
    layout = resolve_layout(opts.mode, opts.prefix, opts.root, environ)
    check_privileges(layout)
    manifest = read_manifest(layout)
    if manifest is None and opts.purge:
        return purge_leftovers(layout)
    if manifest is None:
        raise InstallError(
            f"no ragd installation found in {layout.lib_dir} ({layout.mode})",
            "give the --prefix (and --user/--system) it was installed with",
        )
    report = Report()
    live = layout.root is None and manager_reachable(layout, environ)
    if live:
        report.ran += run_all(stop_commands(layout), keep_going=True, env=command_environ(layout, environ))
    remove_files(layout, manifest, report)
    if opts.purge:
        purge(layout, manifest, report)
    _remove_empty_dirs(layout, manifest)
    if live:
        report.ran += run_all(reload_commands(layout), env=command_environ(layout, environ))
    else:
        report.to_run = stop_commands(layout) + reload_commands(layout)
        report.to_run_reason = "if the service still runs somewhere, stop it"
    _notes(layout, manifest, opts.purge, report)
    return report


def remove_files(layout: Layout, manifest: Manifest, report: Report) -> None:
    for link in manifest.links:
        real = layout.real(Path(link))
        if link_points_into(real, layout.lib_dir):
            real.unlink()
    report.done.append(f"removed  links {', '.join(manifest.links)}")
    for path in (manifest.unit, manifest.sysusers):
        if path and remove_tree(layout.real(Path(path))):
            report.done.append(f"removed  {path}")
    remove_tree(layout.real(layout.lib_dir))
    report.done.append(f"removed  ragd {manifest.version} ({layout.lib_dir})")


def purge(layout: Layout, manifest: Manifest, report: Report) -> None:
    """The config directory, the data directory and the unit's drop-ins; a custom data_dir is only named."""
    _purge(layout, Path(manifest.config), Path(manifest.data_dir), Path(manifest.unit + ".d"), report)


def purge_leftovers(layout: Layout) -> Report:
    """`uninstall --purge` after an `uninstall` that kept the config and the data: the program and its manifest
    are gone, so what is left is found where this layout puts it (it once said "no ragd installation found",
    and the config and the data stayed behind for good)."""
    report = Report()
    dropin = layout.dropin_dir
    left = [p for p in (layout.config_path.parent, layout.data_dir, dropin) if layout.real(p).exists()]
    if not left:
        raise InstallError(
            f"no ragd installation found in {layout.lib_dir} ({layout.mode}), and no config or data of one",
            "give the --prefix (and --user/--system) it was installed with",
        )
    _purge(layout, layout.config_path, layout.data_dir, dropin, report)
    _remove_empty_dirs(layout, None)
    report.notes.append("the program was removed before: this removed the config and the data it had kept")
    return report


def _purge(layout: Layout, config: Path, data: Path, dropin: Path, report: Report) -> None:
    custom = _custom_data_dir(layout.real(config))
    for path in (config.parent, data, dropin):
        if path.name not in (APP, APP + ".service.d"):  # never anything but ragd's own directories
            continue
        if remove_tree(layout.real(path)):
            report.done.append(f"removed  {path}")
    if custom is not None and custom != data:
        report.notes.append(f"not removed: the data_dir named in the config, {custom}; remove it yourself")


def _custom_data_dir(config: Path) -> Path | None:
    try:
        value = tomllib.loads(config.read_text(encoding="utf-8")).get("data_dir")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return Path(os.path.expanduser(value)) if isinstance(value, str) else None


def _remove_empty_dirs(layout: Layout, manifest: Manifest | None) -> None:
    """Directories the installation created, deepest first, if nothing else lives in them now (without a
    manifest: the layout's own, ragd's directories only)."""
    made = manifest.created_dirs if manifest is not None else [str(layout.lib_dir)]
    for path in sorted(made, key=lambda p: p.count("/"), reverse=True):
        real = layout.real(Path(path))
        with contextlib.suppress(OSError):  # not empty (a kept config, others' files) or already gone
            real.rmdir()


def _notes(layout: Layout, manifest: Manifest, purged: bool, report: Report) -> None:
    if not purged:
        report.notes.append(
            f"kept the config {manifest.config} and the data in {manifest.data_dir} (--purge removes them)"
        )
    report.notes.append(
        "your documents and their .rag/ sidecar folders are left as they are; to remove the sidecars: "
        "find ROOT -type d -name .rag -prune -exec rm -r {} +"
    )
    if layout.mode == "system":
        report.notes.append(
            "the system account ragd is kept (files may belong to it); remove it with: userdel ragd"
        )
