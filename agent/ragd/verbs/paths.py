"""Path safety: every path a client names (MCP's tools and resources, the web page) must lie inside a configured
root, also after symlinks.

A client (an AI tool, or whatever prompt it was fed, or a link followed in a browser) chooses the paths it reads,
so each one is checked before anything is opened:
- NUL bytes and `..` components are refused outright (no normalisation can make `..` mean something safe);
- an absolute path must be inside a root, compared component-wise (`/kb2` is not inside `/kb`);
- a relative path is taken relative to each root in turn (the first root where it exists wins), so the
  `rel_path` of a search result works as well as its `path`;
- the real path (symlinks resolved) must be inside a root's real path: a symlink in a root that points outside
  every root is refused, even when the index holds an entry under the link's name.
The checked path keeps its lexical form (the one the index and the sidecars use); only the check resolves links.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragctl import protocol as p

from ..errors import RagdError
from ..paths import is_under
from ..pipeline.scan import Ignore

MAX_PATH_CHARS = 4096


class PathRefused(RagdError):
    """A path outside the configured roots (or one that tries to leave them)."""

    code = p.NOT_FOUND


@dataclass(frozen=True)
class SafePath:
    path: Path  # absolute, normalised, symlinks not resolved (as the index names it)
    root: Path  # the innermost configured root that holds it


def _roots_text(roots: Sequence[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "(none configured)"


def _refuse(raw: str, why: str, roots: Sequence[Path]) -> PathRefused:
    return PathRefused(
        f"path refused: {raw!r} {why}",
        f"only paths inside the agent's roots can be read; roots: {_roots_text(roots)}",
    )


def _innermost(path: str, roots: Sequence[Path]) -> Path | None:
    found = [r for r in roots if is_under(Path(path), Path(os.path.normpath(r)))]
    return max(found, key=lambda r: len(str(r))) if found else None


def _candidates(raw: str, roots: Sequence[Path]) -> list[str]:
    if os.path.isabs(raw):
        return [os.path.normpath(raw)]
    joined = [os.path.normpath(os.path.join(r, raw)) for r in roots]
    existing = [j for j in joined if os.path.lexists(j)]
    return existing[:1] or joined[:1]


def leads_inside(path: Path, roots: Sequence[Path]) -> bool:
    """Whether `path`, symlinks resolved, is inside one of `roots` (for listings: links out are not shown)."""
    real = os.path.realpath(path)
    return any(is_under(Path(real), Path(os.path.realpath(r))) for r in roots)


def check_path(raw: object, roots: Sequence[Path]) -> SafePath:
    """The path `raw` names, if it is inside one of `roots`; else PathRefused (naming the roots)."""
    if not isinstance(raw, str) or not raw.strip():
        raise _refuse(str(raw), "is not a path", roots)
    if "\x00" in raw:
        raise _refuse(raw.replace("\x00", "\\0"), "contains a NUL byte", roots)
    if len(raw) > MAX_PATH_CHARS:
        raise _refuse(raw[:80] + "…", f"is longer than {MAX_PATH_CHARS} characters", roots)
    if ".." in Path(raw).parts:
        raise _refuse(raw, "contains '..'", roots)
    if not roots:
        raise _refuse(raw, "cannot be checked: the agent has no roots", roots)
    candidates = _candidates(raw, roots)
    path = candidates[0]
    root = _innermost(path, roots)
    if root is None:
        raise _refuse(raw, "is outside every root", roots)
    if not leads_inside(Path(path), roots):
        raise _refuse(raw, f"leads outside every root (it resolves to {os.path.realpath(path)})", roots)
    return SafePath(Path(path), root)


def check_tracked(safe: SafePath, ignore: Ignore) -> None:
    """Refuse what ragd does not index: ignored names, dot-directories, skipped folders, the `.rag/` sidecars."""
    parts = safe.path.relative_to(safe.root).parts
    for i, part in enumerate(parts):
        as_file = i == len(parts) - 1 and not safe.path.is_dir()
        if ignore.file(part) if as_file else ignore.dir(part):
            raise PathRefused(
                f"path refused: {safe.path} is not part of the knowledge base ({part!r} is ignored by ragd)",
                "ragd serves only what it indexes; see [ignore] in the configuration",
            )
