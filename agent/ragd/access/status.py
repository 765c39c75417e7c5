"""The agent's status as a scoped caller sees it: the roots it can enter, and of the files and directories named
(failures, skipped files, directory errors, change notes that failed, the last verification's repairs) only
those it can see. Counts stay as they are: how many files the agent holds is not a secret of any one file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .scope import Scope


def limit_status(data: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
    """`data` (the status verb's snapshot) for `scope`'s caller; unchanged for an unrestricted caller."""
    out = dict(data)
    if scope.full:
        return out
    out["roots"] = [_root(r, scope) for r in data["roots"] if scope.enterable(r["path"])]
    if isinstance(data.get("health"), Mapping):  # what each is about names folders: the reasons stay
        out["health"] = {k: {f: v for f, v in c.items() if f != "detail"} for k, c in data["health"].items()}
    index = data.get("index")
    if isinstance(index, Mapping) and "failed_mushrooms" in index:
        out["index"] = _index(index, scope)
    return out


def _root(root: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
    out = dict(root)
    for key in ("failures", "skipped"):
        if key in root:
            out[key] = scope.keep(root[key], lambda f: f["path"], gone_ok=True)
    if "dir_errors" in root:
        out["dir_errors"] = scope.keep(root["dir_errors"], lambda f: f["path"], gone_ok=True)
    return out


def _index(index: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
    out = dict(index)
    # a change note lives in <dir>/.rag/: it names files of <dir>
    out["failed_mushrooms"] = [
        m for m in index["failed_mushrooms"] if scope.listable(Path(m["path"]).parent.parent)
    ]
    verify = index.get("verify")
    last = verify.get("last") if isinstance(verify, Mapping) else None
    if isinstance(verify, Mapping) and isinstance(last, Mapping):
        shown = dict(last)
        for key in ("repaired_paths", "removed_paths"):
            shown[key] = scope.keep(last.get(key, []), lambda path: path, gone_ok=True)
        out["verify"] = {**verify, "last": shown}
    return out
