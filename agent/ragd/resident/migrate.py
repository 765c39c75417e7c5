"""`ragd index migrate --to milvus|zvec`: fill the other backend from the `.ragjson` sidecars, embedding nothing.

The sidecars hold every chunk's text and vector, so the index on either backend is derived from them: the target
is opened with the same `[index]` settings except `backend`, and checked against the sidecars of every root as the
agent's verification does (missing or different sources written, sources without a sidecar removed). Then the
user switches `[index] backend` and restarts the agent. The source index is left as it was (switching back needs
no migration while its files are unchanged; otherwise the agent's verification repairs it at start).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from ..config import Config, data_dir
from ..errors import IndexBusy, RagdError
from ..pipeline.scan import Ignore
from . import rootstate

log = logging.getLogger(__name__)


def migrate(config: Config, to: str, roots: list[Path], uri: str | None = None) -> dict[str, Any]:
    from ..index import open_index, open_or_rebuild
    from ..index.write.sync import IndexSync

    if to == config.index.backend and not uri:
        raise RagdError(f"the index is configured on {to} already", "name the other backend: --to milvus or "
                        "--to zvec (or give --uri to fill another Milvus)", code="usage")  # fmt: skip
    home = data_dir(config)
    update: dict[str, Any] = {"backend": to, **({"uri": uri} if uri else {})}
    target_cfg = config.index.model_copy(update=update)
    every = rootstate.load(home).apply([*config.roots, *roots])
    if not every:
        raise RagdError("no roots to migrate", "name the folders, or configure `roots`", code="usage")
    started = time.monotonic()
    try:
        if to == "zvec":
            target, _ = open_or_rebuild(home, config.identity, target_cfg)
        else:
            target = open_index(home, config.identity, target_cfg)
    except IndexBusy as err:
        raise RagdError(f"{err.message}: the running agent holds the target index",
                        "stop the agent (systemctl --user stop ragd), migrate, then start it") from err  # fmt: skip
    try:
        sync = IndexSync(target, config.identity, every, Ignore(config.ignore))
        report = sync.reconcile(None)
        target.flush()
        chunks = target.count()
    finally:
        target.close()
    return {"to": to, "path": str(target.path), "roots": [str(r) for r in every], "sources": report.repaired,
            "removed": report.removed, "chunks": chunks,
            "elapsed_s": round(time.monotonic() - started, 2)}  # fmt: skip
