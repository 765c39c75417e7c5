"""What `ragd run --once` last found the index to hold, so that a run with nothing to sync need not open it.

Opening the collection for writing costs about a second (zvec loads the jieba dictionary), and the check against
the sidecars lists every indexed source; a run over an unchanged tree would pay both to find nothing to do. So after
a sync that left the index equal to the sidecars, the run records, beside the collection (`<collection>.checked`):
the roots, a digest of what the sidecars say the index should hold (per source: md5 and chunk count), the chunk
count, and the collection's state on disk (the collection directory's and its newest manifest's inode, size,
mtime and ctime). The next run skips the open only when all of these still hold:

- every directory's job finished (the run knows what every sidecar says), no change note is pending anywhere,
  and the digest of what the sidecars say is the recorded one, for the same roots;
- the collection on disk is untouched since: the same directory and manifest stat (every write, and every writable
  open and close, rewrites the manifest), its `.verified` stamp matches (it was closed cleanly; see health.py), and
  no one holds it for writing (a running agent's changes may not be on disk yet: the run leaves it to the agent);
- its keyword index too: the same `meta.json` (rewritten at every commit) and no journal of writes in flight (a
  keyword index deleted or cut short is made level with the collection by the open).

Otherwise the index is opened and checked as always. The record is derived state: deleting it costs one open.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..index import collection_dir
from ..index.keyword import keywords
from ..index.zvec import health
from ..model import EmbeddingIdentity
from ..pipeline.scan import Expected

log = logging.getLogger(__name__)

SUFFIX = ".checked"


def _record_path(collection: Path) -> Path:
    return collection.with_name(collection.name + SUFFIX)


def _on_disk(collection: Path) -> list[Any] | None:
    """The collection's state on disk (None: no collection, or no manifest)."""
    manifest = health.newest_manifest(collection)
    if manifest is None:
        return None
    words = keywords.place(collection)
    if (words / keywords.JOURNAL).exists():
        return None
    try:
        d, m, k = os.stat(collection), os.stat(manifest), os.stat(words / "meta.json")
    except OSError:
        return None
    return [d.st_dev, d.st_ino, d.st_mtime_ns, d.st_ctime_ns,
            manifest.name, m.st_ino, m.st_size, m.st_mtime_ns, m.st_ctime_ns,
            k.st_ino, k.st_size, k.st_mtime_ns]  # fmt: skip


def _digest(expected: Mapping[str, Expected]) -> str:
    h = hashlib.md5(usedforsecurity=False)
    for path in sorted(expected):
        want = expected[path]
        h.update(f"{path}\0{want.source_md5}\0{want.chunk_count}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _state(collection: Path, roots: list[Path], expected: Mapping[str, Expected]) -> dict[str, Any] | None:
    disk = _on_disk(collection)
    if disk is None:
        return None
    return {"roots": sorted(map(str, roots)), "expected": _digest(expected), "collection": disk}


def unchanged(
    data_dir: Path, identity: EmbeddingIdentity, roots: list[Path], expected: Mapping[str, Expected]
) -> dict[str, object] | None:
    """The index report of a run that found nothing to sync (see the module), or None: open and check the index."""
    collection = collection_dir(data_dir, identity)
    try:
        recorded = json.loads(_record_path(collection).read_bytes())
        chunks = recorded.pop("chunks")
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    if not isinstance(chunks, int) or recorded != _state(collection, roots, expected):
        return None
    if not health.stamp_matches(collection) or health.held_for_writing(collection):
        return None
    return {"mushrooms_applied": 0, "events": 0, "mushrooms_failed": [], "repaired": 0, "filled": 0,
            "rebuilt": False, "optimized": False, "chunks": chunks, "path": str(collection),
            "opened": False}  # fmt: skip


def remember(
    data_dir: Path,
    identity: EmbeddingIdentity,
    roots: list[Path],
    expected: Mapping[str, Expected],
    chunks: int,
) -> None:
    """Record that the index (closed now) holds what `expected` says. A failure only costs an open next time."""
    collection = collection_dir(data_dir, identity)
    target = _record_path(collection)
    state = _state(collection, roots, expected)
    if state is None or not health.stamp_matches(collection) or health.held_for_writing(collection):
        target.unlink(missing_ok=True)  # closed uncleanly, or someone else has it now: nothing to vouch for
        return
    try:
        atomic_write(target, json.dumps({**state, "chunks": chunks}).encode(), mode=0o644)
    except OSError as err:
        log.warning("cannot write %s: %s", target, err.strerror or err)


def forget(data_dir: Path, identity: EmbeddingIdentity) -> None:
    """The index is about to change (or did, in ways the record cannot tell): the next run opens it."""
    _record_path(collection_dir(data_dir, identity)).unlink(missing_ok=True)
