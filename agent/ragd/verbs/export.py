"""`export`: the `.ragjson` entries under a root or a path, for `ragctl export` to pack (docs/protocol.md)."""

from __future__ import annotations

import os
from typing import TypedDict

from .. import access
from ..pipeline import sidecar
from ..pipeline.scan import walk_dirs
from .arguments import Args, under_a_root
from .runtime import Runtime


class ExportArgs(Args):
    path: str | None = None
    recursive: bool = False


class Exported(TypedDict):
    path: str  # the entry's file
    arcname: str  # its name in the archive, relative to `base`


class ExportResult(TypedDict):
    base: str
    files: list[Exported]


def export(rt: Runtime, args: ExportArgs | None = None) -> ExportResult:
    args = args or ExportArgs()
    path = under_a_root(args.path, rt.roots)
    tops = [path] if path is not None else list(rt.roots)
    files: list[Exported] = []
    # a scoped caller gets the entries of the files it can read, that it can read itself (ragctl reads them as
    # that user; an entry is the agent's account's, with its source's mode: a private file's is not its owner's)
    scope = access.scope()
    for top in tops:
        base = top if path is not None else top.parent
        dirs = walk_dirs(top, rt.ignore) if args.recursive else iter([top])
        for d in dirs:
            for en in sidecar.list_entries(d):
                if not en.deleted and scope.visible(d / en.name) and scope.readable(en.path):
                    files.append({"path": str(en.path), "arcname": os.path.relpath(en.path, base)})
    base_out = str(path) if path is not None else os.path.commonpath([str(t.parent) for t in tops] or ["/"])
    return {"base": base_out, "files": files}
