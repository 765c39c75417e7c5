"""`browse`: a folder's documents and subfolders with their state, or (no path) the roots.

One implementation for MCP's `ragd://dir/{+path}` resources and whoever lists a folder of the knowledge base.
The path passes the same checks as every path a caller names (paths.py), and a scoped caller (docs/access.md)
lists only folders it can list, and of their entries those it may see.
"""

from __future__ import annotations

from typing import Any

from ragctl import protocol as p

from .. import access
from ..errors import RagdError
from ..pipeline.scan import list_dir
from ..vocabulary import FileState
from .arguments import Args
from .documents import checked, resource_uri
from .paths import leads_inside
from .runtime import Resident


class BrowseArgs(Args):
    path: str = ""  # an absolute folder (a missing leading slash is added); "" or "/": the roots


def browse(rt: Resident, args: BrowseArgs | None = None) -> dict[str, Any]:
    args = args or BrowseArgs()
    scope = access.scope()
    if not args.path.strip("/"):
        return {"roots": [{"path": str(r), "uri": resource_uri("dir", r), "watcher": rt.watch_mode(r)}
                          for r in list(rt.roots) if scope.enterable(r)]}  # fmt: skip
    safe = checked(rt, args.path)
    if not scope.listable(safe.path):
        raise access.NotReadable(f"path refused: {safe.path} cannot be listed by {scope.caller.describe()}",
                                 "ragd lists only the folders you can list yourself")  # fmt: skip
    if not safe.path.is_dir():
        raise RagdError(f"{safe.path} is not a directory", f"read ragd://file{safe.path} for a file",
                        code=p.NOT_FOUND)  # fmt: skip
    try:
        listing = list_dir(safe.path, rt.ignore)
    except OSError as err:
        raise RagdError(f"cannot list {safe.path}: {err.strerror or err}", code=p.FAILED) from None
    dirs = [{"name": d, "type": "dir", "uri": resource_uri("dir", safe.path / d)} for d in listing.dirs
            if scope.enterable(safe.path / d)]  # fmt: skip
    files = []
    for name in sorted(listing.files):
        path = safe.path / name
        if path.is_symlink() and not leads_inside(path, rt.roots):
            continue  # a link out of the roots: refused when read, so not offered either
        if not scope.readable(path):
            continue
        st = rt.tracker.file_state(path)
        files.append({"name": name, "type": "file", "size_bytes": listing.files[name].st_size,
                      "state": st.state if st else FileState.PENDING, "reason": st.reason if st else "",
                      "uri": resource_uri("file", path)})  # fmt: skip
    return {"path": str(safe.path), "root": str(safe.root), "entries": dirs + files}
