"""<prefix>/lib/ragd/install.json: what an installation wrote, so that uninstall removes exactly that.

    {"format": 1, "mode": "user", "prefix": …, "version": "0.1.0", "previous_version": null,
     "installed_at": "…Z", "unit": …, "sysusers": null, "links": […], "config": …, "config_written": true,
     "data_dir": …, "roots": […], "created_dirs": […]}
All paths are final paths (without DESTDIR).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .layout import InstallError, Layout

FORMAT = 1


@dataclass(frozen=True)
class Manifest:
    mode: str
    prefix: str
    version: str
    unit: str
    config: str
    data_dir: str
    installed_at: str
    previous_version: str | None = None
    sysusers: str | None = None
    config_written: bool = False
    links: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1) + "\n"


def read_manifest(layout: Layout) -> Manifest | None:
    """The manifest of the installation at this layout's prefix, or None when there is none."""
    path = layout.real(layout.manifest_path)
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise InstallError(
            f"cannot read the installation record {path}: {err}",
            "fix or remove it (re-installing writes a new one)",
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise InstallError(f"{path} is not an installation record this installer knows", "re-install")
    known = {k: v for k, v in raw.items() if k in Manifest.__dataclass_fields__}
    try:
        return Manifest(**known)
    except TypeError as err:
        raise InstallError(f"{path} misses fields: {err}", "re-install") from None


def sorted_paths(paths: list[str] | list[Path]) -> list[str]:
    return sorted({str(p) for p in paths})
