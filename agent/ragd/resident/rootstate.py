"""Roots added or removed at run time (`ragctl roots add|remove`), kept in `<data dir>/roots.json`.

They apply on top of the config file's roots and the command line's, so they survive restarts and reloads:
    effective = (config roots + command-line roots + added) - removed
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

FILE_NAME = "roots.json"


@dataclass
class RootOverlay:
    added: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def apply(self, base: list[Path]) -> list[Path]:
        out = [r for r in dict.fromkeys([*base, *self.added]) if r not in self.removed]
        return out

    def add(self, root: Path) -> None:
        if root in self.removed:
            self.removed.remove(root)
        if root not in self.added:
            self.added.append(root)

    def remove(self, root: Path, *, configured: bool) -> None:
        if root in self.added:
            self.added.remove(root)
        if configured and root not in self.removed:
            self.removed.append(root)


def load(data_dir: Path) -> RootOverlay:
    path = data_dir / FILE_NAME
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return RootOverlay()
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot read {path}: {err}", f"fix or delete {path} (roots added with ragctl)"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} is not a JSON object", f"fix or delete {path}")
    return RootOverlay([Path(p) for p in raw.get("added", [])], [Path(p) for p in raw.get("removed", [])])


def save(data_dir: Path, overlay: RootOverlay) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / FILE_NAME
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    payload = {"added": [str(p) for p in overlay.added], "removed": [str(p) for p in overlay.removed]}
    tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
