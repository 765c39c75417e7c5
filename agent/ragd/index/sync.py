"""Index sync: apply mushrooms to the index, reconcile the index with the sidecars, list orphans.

The sidecars are the truth. Every event is applied by re-reading the current sidecar state, so applying a
mushroom twice, late, or after a newer one is harmless (idempotent). A mushroom is deleted only after the index
has accepted its events; one that fails stays, is reported and is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import RagdError
from ..model import EmbeddingIdentity, vector_problem
from ..modes import display_name, valid_name
from ..paths import is_under, outermost, root_of
from ..pipeline import mushroom, sidecar
from ..pipeline.scan import Expected, Ignore, indexable, walk_dirs
from ..pipeline.sidecar import FileEntry
from . import IndexBackend, IndexChunk

log = logging.getLogger(__name__)

BATCH = 256  # mushrooms applied per index flush


@dataclass
class SyncReport:
    mushrooms: int = 0
    events: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    repaired: int = 0
    removed: int = 0


def bad_vector(entry: FileEntry) -> str | None:
    """Why the entry's vectors cannot be served (wrong length, zero or not finite), None when they can.

    ragd's embed stage never writes such vectors; another tool's sidecar may hold them. The index refuses them, so
    such a source is kept out of the index (and out of what the index should hold) instead of failing its note.
    """
    for i, c in enumerate(entry.chunks):
        vec = c.vector
        if vec is None:
            continue
        if vec.shape[0] != entry.dimension:
            return f"chunk {i} has a {vec.shape[0]}-d vector, the entry says {entry.dimension}-d"
        problem = vector_problem(vec)
        if problem is not None:
            return f"chunk {i} has a {problem} vector"
    return None


def servable(entry: FileEntry | None, identity: EmbeddingIdentity) -> bool:
    """The entry's chunks belong in the index: indexable (EMBEDDED, same identity, all vectors) and valid."""
    return indexable(entry, identity) and entry is not None and bad_vector(entry) is None


def to_index_chunks(source_path: Path, entry: FileEntry) -> list[IndexChunk]:
    chunks = []
    for i, c in enumerate(entry.chunks):
        meta = c.meta
        vec = c.vector if c.vector is not None else np.zeros(entry.dimension, dtype=np.float32)
        chunks.append(
            IndexChunk(
                source_path=str(source_path),
                chunk_index=i,
                content=c.content,
                content_hash=c.content_hash,
                header=str(meta.get("header") or f"File: {source_path.name}"),
                vector=vec,
                heading_path=tuple(meta.get("heading_path") or ()),
                page=meta.get("page"),
                start_line=int(meta.get("start_line") or 0),
                end_line=int(meta.get("end_line") or 0),
            )
        )
    return chunks


class IndexSync:
    def __init__(
        self, index: IndexBackend, identity: EmbeddingIdentity, roots: Sequence[Path], ignore: Ignore
    ) -> None:
        self.index = index
        self.identity = identity
        self.roots = list(roots)
        self.ignore = ignore

    # -- single sources and subtrees ---------------------------------------------------------------------------
    def sync_source(self, directory: Path, name: str) -> None:
        """Make the index hold exactly what `directory/.rag/name.ragjson` says (nothing, if not EMBEDDED)."""
        path = directory / name
        entry = sidecar.try_read(sidecar.entry_path(directory, name))  # gone or unreadable: nothing to serve
        root = root_of(path, self.roots)  # None: e.g. a job's note applied after its root was removed
        if root is None or not indexable(entry, self.identity) or not path.exists():
            self.index.delete_source(str(path))
            return
        assert entry is not None
        why = bad_vector(entry)
        if why is not None:
            log.error("not serving %s: its sidecar holds invalid vectors (%s); re-embed it with "
                      "`ragctl sync %s --force`", path, why, path)  # fmt: skip
            self.index.delete_source(str(path))
            return
        self.index.replace_source(str(path), entry.source.md5_hash, str(root), to_index_chunks(path, entry))

    def sync_subtree(self, top: Path) -> int:
        """Re-sync every source under `top` from its sidecars; drop indexed sources that have none."""
        expected = self.expected(walk_dirs(top, self.ignore)) if top.is_dir() else {}
        return self._converge(expected, self.index.sources(str(top)))

    # -- mushrooms -----------------------------------------------------------------------------------------
    def apply_event(self, directory: Path, ev: mushroom.Event) -> None:
        if not valid_name(ev.file):  # another producer's note: such a name is never tracked nor indexed
            log.warning(
                "change note in %s names %s, which is not valid UTF-8: ignored",
                directory,
                display_name(ev.file),
            )
            return
        target = directory / ev.file
        if ev.status in (mushroom.UPSERT, mushroom.DELETE):
            self.sync_source(directory, ev.file)
        elif ev.status == mushroom.DIR_DELETE and not target.is_dir():
            self.index.delete_subtree(str(target))
        else:  # dir_recover, or a dir_delete for a directory that has come back
            self.sync_subtree(target)

    def consume(self, path: Path) -> int | None:
        """Apply one mushroom's events under its directory's lock, without flushing. None: it is gone.

        The caller flushes the index, then deletes the mushroom (see apply_batch)."""
        directory = path.parent.parent
        with sidecar.DirLock(directory):
            if not path.exists():
                return None  # consumed by someone else meanwhile
            note = mushroom.read(path)
            for ev in note.events:
                self.apply_event(directory, ev)
        return len(note.events)

    def apply_batch(self, paths: Sequence[Path]) -> SyncReport:
        """Apply several mushrooms in order with one flush (the costly step), then delete the applied ones."""
        report = SyncReport()
        applied = []
        for p in paths:
            try:
                n = self.consume(p)
            except (RagdError, OSError) as err:
                if not p.exists():  # its folder was deleted or moved meanwhile: the note went with it
                    log.debug("mushroom %s gone before it was applied", p)
                    continue
                log.error("mushroom %s not applied: %s", p, err)
                report.failed.append((p, str(err)))
                continue
            if n is not None:
                report.events += n
                report.mushrooms += 1
                applied.append(p)
        if applied:
            self.index.flush()
        for p in applied:
            p.unlink(missing_ok=True)
        return report

    def apply_pending(self, dirs: Iterable[Path]) -> SyncReport:
        paths = sorted(mushroom.walk_pending(dirs), key=lambda p: mushroom.sort_key(p.name))
        report = SyncReport()
        for start in range(0, len(paths), BATCH):
            part = self.apply_batch(paths[start : start + BATCH])
            report.mushrooms += part.mushrooms
            report.events += part.events
            report.failed += part.failed
        return report

    # -- reconcile and orphans -----------------------------------------------------------------------------
    def expected(self, dirs: Iterable[Path]) -> dict[str, Expected]:
        out: dict[str, Expected] = {}
        for d in dirs:
            for en in sidecar.list_entries(d):
                if en.deleted or not (d / en.name).is_file():
                    continue
                entry = sidecar.try_read(en.path)
                if servable(entry, self.identity):
                    assert entry is not None
                    out[str(d / en.name)] = Expected(entry.source.md5_hash, len(entry.chunks))
        return out

    def reconcile(self, expected: dict[str, Expected] | None = None) -> SyncReport:
        """Check the index against the sidecars per source (md5, chunk count) and repair what differs."""
        report = SyncReport()
        for root in outermost(self.roots):
            exp = expected if expected is not None else self.expected(walk_dirs(root, self.ignore))
            exp = {k: v for k, v in exp.items() if is_under(Path(k), root)}
            before = self.index.sources(str(root))
            report.repaired += self._converge(exp, before)
            report.removed += len(set(before) - set(exp))
        return report

    def _converge(self, expected: dict[str, Expected], indexed: dict) -> int:
        changed = 0
        for path, want in expected.items():
            have = indexed.get(path)
            if have is None or have.source_md5 != want.source_md5 or have.chunk_count != want.chunk_count:
                p = Path(path)
                self.sync_source(p.parent, p.name)
                changed += 1
        for path in set(indexed) - set(expected):
            self.index.delete_source(path)
            changed += 1
        if changed:
            self.index.flush()
        return changed

    def orphans(self, prefix: Path | None = None) -> list[str]:
        """Indexed sources whose file or live EMBEDDED sidecar is gone."""
        found = []
        for path in sorted(self.index.sources(str(prefix) if prefix else None)):
            p = Path(path)
            entry = sidecar.try_read(sidecar.entry_path(p.parent, p.name))
            if not p.is_file() or not indexable(entry, self.identity):
                found.append(path)
        return found
