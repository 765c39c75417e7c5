"""Opening an index: the backend the configuration names, and a zvec collection rebuilt when it cannot be opened.

The index can always be rebuilt from the `.ragjson` sidecars; `open_or_rebuild` recreates a collection that cannot
be opened (corrupt, or incompatible). The backends are imported only when one is opened (zvec is heavy; Milvus is
an extra).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..config import IndexConfig
from ..errors import IndexBusy, IndexError_
from ..model import EmbeddingIdentity
from .backend import SCHEMA_VERSION, IndexBackend, collection_dir, collection_name

log = logging.getLogger(__name__)


def open_index(
    data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig, *, read_only: bool = False
) -> IndexBackend:
    """Open (creating if needed, unless read-only) the collection for `identity`.

    Raises IndexBusy when another process (or another handle in this one) holds it for writing, and IndexError_
    when it exists but cannot be opened (corrupt, or created for another schema); see `open_or_rebuild`.
    """
    if cfg.backend == "milvus":
        from .milvus.backend import MilvusIndex  # lazy: the milvus extra, only when configured

        return MilvusIndex.open(data_dir, identity, cfg, read_only=read_only)
    from .zvec.backend import ZvecIndex  # lazy: zvec is heavy and only the agent needs it

    return ZvecIndex.open(collection_dir(data_dir, identity), identity, cfg, read_only=read_only)


def check_index(data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig) -> str | None:
    """What a shared index says of itself, checked without creating anything: on a Milvus server its version and the
    state of the identity's collection, in a line (IndexError_ when the server is too old or the collection was not
    made as ragd needs it; a server that does not answer is said, not raised). None for zvec, which is checked when
    it is opened."""
    if cfg.backend != "milvus":
        return None
    from .milvus.connection import check_server_of

    return check_server_of(data_dir, identity, cfg)


def destroy_index(data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig | None = None) -> bool:
    """Delete the identity's collection from disk (it must not be open). Returns whether there was one.

    On a shared index (`cfg.backend == "milvus"`) only this agent's chunks are deleted: the collection, and every
    other agent's chunks in it, stay."""
    if cfg is not None and cfg.backend == "milvus":
        from .milvus.backend import MilvusIndex

        index = MilvusIndex.open(data_dir, identity, cfg)
        try:
            return index.delete_all() > 0
        finally:
            index.close()
    from .zvec.collection import destroy

    return destroy(collection_dir(data_dir, identity))


def _drop_older_schemas(data_dir: Path, identity: EmbeddingIdentity) -> None:
    """Delete this identity's collections made by earlier versions of ragd (an older SCHEMA_VERSION): derived data
    no version of ragd from now on can open. The new one is filled from the sidecars (no embedding)."""
    from .zvec.collection import destroy

    for schema in range(1, SCHEMA_VERSION):
        old = Path(data_dir) / "index" / collection_name(identity, schema)
        try:
            if destroy(old):
                log.info("removed the index of an earlier ragd (schema %d) at %s; the new one (schema %d) is "
                         "filled from the sidecars", schema, old, SCHEMA_VERSION)  # fmt: skip
            # its verification's stamp, and what the last run --once found it to hold
            for stamp in (".verified", ".checked"):
                old.with_name(old.name + stamp).unlink(missing_ok=True)
        except (IndexBusy, OSError) as err:  # kept for now; tried again at the next start
            log.warning("cannot remove the index of an earlier ragd at %s: %s", old, err)


def open_or_rebuild(
    data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig
) -> tuple[IndexBackend, bool]:
    """Open the collection for writing; if it is unreadable, delete it and create an empty one.

    Returns (index, rebuilt). When `rebuilt` is true the caller must re-sync every source from its sidecar.
    IndexBusy is never swallowed: a collection held by another process is not ours to delete.
    """
    if cfg.backend == "milvus":  # a shared collection is never dropped; an unreachable server is not a damage
        return open_index(data_dir, identity, cfg), False
    _drop_older_schemas(data_dir, identity)
    try:
        index = open_index(data_dir, identity, cfg)
    except IndexBusy:
        raise
    except IndexError_ as err:
        log.warning("%s; rebuilding it from the .ragjson sidecars", err.message)
    else:
        return index, False
    destroy_index(data_dir, identity)
    return open_index(data_dir, identity, cfg), True
