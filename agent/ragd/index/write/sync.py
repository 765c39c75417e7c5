"""Index sync: apply mushrooms to the index, reconcile the index with the sidecars, list orphans.

The sidecars are the truth. Every event is applied by re-reading the current sidecar state, so applying a
mushroom twice, late, or after a newer one is harmless (idempotent). A mushroom is deleted only after the index
has accepted its events; one that fails stays, is reported and is retried.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import IndexUnavailable, RagdError
from ...model import EmbeddingIdentity, vector_problem, vector_problems
from ...modes import display_name, valid_name
from ...paths import is_under, outermost, root_of
from ...pipeline import mushroom, sidecar
from ...pipeline.scan import Expected, Ignore, indexable, walk_dirs
from ...pipeline.sidecar import FileEntry
from ...vocabulary import NoteStatus
from ..backend import IndexBackend, IndexChunk, SourceSummary, SourceWrite

log = logging.getLogger(__name__)

BATCH = 256  # mushrooms applied per index flush
STAGE_CHUNKS = 1024  # chunks gathered for one index write (bounds the vectors a batch holds in memory)
# The index is flushed once this many chunks were written since its last flush, by the writer between notes and
# here within one re-sync of a subtree: zvec (and the keyword index) hold what was written until its flush, ~3 KiB a
# chunk of the agent's memory. A big folder's job writes ~120 chunks a second on two cores (100,000 notes: ~100 MiB
# held before each flush at 240 s), and a 100,000-note folder renamed is re-synced in one go (its 100,000 chunks
# held until the end; docs/benchmarks/history.md).
FLUSH_CHUNKS = 8192


@dataclass
class SyncReport:
    mushrooms: int = 0
    events: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    repaired: int = 0
    removed: int = 0
    applied: list[Path] = field(default_factory=list)  # with apply_batch(flush=False): to flush, then delete
    waiting: list[Path] = field(default_factory=list)  # with apply_batch(deletes_wait=True): see there


def bad_vector(entry: FileEntry) -> str | None:
    """Why the entry's vectors cannot be served (wrong length, zero or not finite), None when they can.

    ragd's embed stage never writes such vectors; another tool's sidecar may hold them. The index refuses them, so
    such a source is kept out of the index (and out of what the index should hold) instead of failing its note.
    """
    return decoded_vectors(entry)[1]


def decoded_vectors(entry: FileEntry) -> tuple[list[np.ndarray | None], str | None]:
    """Each chunk's vector (None: not embedded), decoded from its base64 once, and `bad_vector`'s verdict on them:
    their norms computed together (a source's write decoded and checked each vector twice, one at a time)."""
    vectors = [c.vector for c in entry.chunks]
    for i, vec in enumerate(vectors):
        if vec is not None and vec.shape[0] != entry.dimension:
            return vectors, f"chunk {i} has a {vec.shape[0]}-d vector, the entry says {entry.dimension}-d"
    present = [(i, vec) for i, vec in enumerate(vectors) if vec is not None]
    if present:
        problems = vector_problems(np.stack([vec for _i, vec in present]))
        for (i, _vec), problem in zip(present, problems, strict=True):
            if problem is not None:
                return vectors, f"chunk {i} has a {problem} vector"
    return vectors, None


def lead_vector(entry: FileEntry) -> np.ndarray | None:
    """The vector of the entry's lead, None when it has none or one that cannot be served (made again at the
    file's next job: a lead ranks, it never decides whether a document is served)."""
    if entry.lead is None:
        return None
    try:
        vec = entry.lead.vector
    except ValueError:  # not base64
        return None
    return (
        vec if vec is not None and vec.shape[0] == entry.dimension and vector_problem(vec) is None else None
    )


def servable(entry: FileEntry | None, identity: EmbeddingIdentity) -> bool:
    """The entry's chunks belong in the index: indexable (EMBEDDED, same identity, all vectors) and valid."""
    return indexable(entry, identity) and entry is not None and bad_vector(entry) is None


def to_index_chunks(
    source_path: Path, entry: FileEntry, vectors: Sequence[np.ndarray | None] | None = None
) -> list[IndexChunk]:
    """The entry's chunks as the index stores them; `vectors`: theirs, decoded already (`decoded_vectors`)."""
    chunks = []
    for i, c in enumerate(entry.chunks):
        meta = c.meta
        vec = c.vector if vectors is None else vectors[i]  # (`c.vector` decodes its base64 at each use)
        if vec is None:
            vec = np.zeros(entry.dimension, dtype=np.float32)
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


def differs(want: Expected | None, have: SourceSummary | None) -> bool:
    """What the sidecars say a source is (None: not served) and what the index holds for it (None: nothing) differ."""
    if want is None or have is None:
        return (want is None) != (have is None)
    return have.source_md5 != want.source_md5 or have.chunk_count != want.chunk_count


def note_there(path: Path) -> bool | None:
    """Whether the change note at `path` is there; None when its folder cannot be read now (chmod 000 made by the
    user: the folder is out of search, and its notes wait on disk until it can be read)."""
    try:
        return path.exists()
    except PermissionError:
        return None


def _delete_note(path: Path) -> None:
    """Delete a change note the index has applied for good. One that cannot be deleted is left where it is, never
    fatal to the flush of the others: gone with its folder, or its folder replaced by a file of the same name (a
    NotADirectoryError, which failed every flush after it for good and kept the agent busy), or made unreadable
    (applied again, harmlessly, once it can be read)."""
    try:
        path.unlink()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as err:
        log.info("applied change note %s left in place: %s", path, err)


class IndexSync:
    def __init__(
        self,
        index: IndexBackend,
        identity: EmbeddingIdentity,
        roots: Sequence[Path],
        ignore: Ignore,
        give_back: Callable[[], object] = lambda: None,
    ) -> None:
        """`give_back`: called after each flush within a re-sync of a big subtree, to return the memory its writes
        freed (the agent's `memory.trim_now_and_then`)."""
        self.index = index
        self._give_back = give_back
        self.identity = identity
        self.roots = list(roots)
        self.ignore = ignore
        # Writes gathered inside apply_batch and made together (the last one per source wins), each with the
        # note it came from; notes whose writes failed. Outside a batch every write is made at once.
        self._staged: dict[str, tuple[SourceWrite, Path | None]] = {}
        self._staged_chunks = 0
        self._batching = False
        self._note: Path | None = None
        self._failed: dict[Path, str] = {}
        # apply_batch(deletes_wait=True): the notes whose folder deletions were left for later; `apply_deletes`:
        # the one kind of event applied
        self._deletes_wait = False
        self._waiting: set[Path] = set()
        self._only: NoteStatus | None = None
        self.written = 0  # chunks written to the index so far
        self._written_at_flush = 0  # `written` at the last flush (see many_unflushed)

    def flush(self) -> None:
        """Make what was written durable (zvec's and the keyword index's flush), counted for `many_unflushed`."""
        self.index.flush()
        self._written_at_flush = self.written

    def _flush_if_many(self) -> None:
        """Within a big re-sync: flushed every FLUSH_CHUNKS chunks, and what the writes held given back: the
        index's mapped pages (mapped.py) and the freed memory the allocator keeps (`give_back`). A folder of 30,000
        notes renamed, then moved, peaked at 379 and 441 MiB (anonymous 270 and 293) against 205 idle before."""
        if self.many_unflushed:
            self.flush()
            self.index.give_back_pages()
            self._give_back()

    @property
    def many_unflushed(self) -> bool:
        """FLUSH_CHUNKS chunks or more were written since the last flush: a long stream of writes (the index
        writer's) or a big subtree re-synced in one go (`_converge`) flushes now rather than hold them all."""
        return self.written - self._written_at_flush >= FLUSH_CHUNKS

    # -- single sources and subtrees ---------------------------------------------------------------------------
    def sync_source(
        self, directory: Path, name: str, have: SourceSummary | None = None, *, listed: bool = False
    ) -> None:
        """Make the index hold exactly what `directory/.rag/name.ragjson` says (nothing, if not EMBEDDED).

        `listed`: the caller listed the index (`sources()`) and `have` is what it holds for this source (None:
        nothing), so the index need not look that up."""
        path = directory / name
        held = self._held(path, have) if listed else None
        entry = sidecar.try_read(sidecar.entry_path(directory, name))  # gone or unreadable: nothing to serve
        self._sync_entry(path, entry, held)

    def _sync_entry(self, path: Path, entry: FileEntry | None, held: int | None) -> None:
        """Stage the index's write for the source at `path` whose sidecar holds `entry` (None: none, nothing to
        serve); `held`: the chunks the index holds for it, None when not looked up."""
        write = SourceWrite(str(path), "", "", (), held)  # no chunks: remove what the index holds
        root = root_of(path, self.roots)  # None: e.g. a job's note applied after its root was removed
        # Not `path.exists()`: the index mirrors the sidecar. A file missing for a moment (a git checkout deletes
        # and writes it again) comes back with the same text, which its folder's job records without a change
        # note; a file really gone is recorded by that job as deleted, and its note removes it then.
        if root is not None and entry is not None and indexable(entry, self.identity):
            vectors, why = decoded_vectors(entry)
            if why is None:
                chunks = to_index_chunks(path, entry, vectors)
                fields = entry.metadata.fields if entry.metadata else {}
                write = SourceWrite(
                    str(path), entry.source.md5_hash, str(root), chunks, held, fields, lead_vector(entry)
                )
            else:
                log.error("not serving %s: its sidecar holds invalid vectors (%s); re-embed it with "
                          "`ragctl sync %s --force`", path, why, path)  # fmt: skip
        self._stage(write)

    def _held(self, path: Path, have: SourceSummary | None) -> int:
        """Chunks the index holds for `path` by its listing. A source whose chunks disagree (a write cut short
        by a crash, possibly with gaps) is deleted by filter first, the one way that finds all its chunks."""
        if have is None:
            return 0
        if have.source_md5:
            return have.chunk_count
        self.index.delete_source(str(path))
        return 0

    def sync_subtree(self, top: Path) -> int:
        """Re-sync every source below the folder `top` from its sidecars; drop indexed sources that have none. A
        source at `top` itself is a file of that name, not in the folder (the folder replaced by a file, its
        note applied before a late retry of the folder's own): left to its own events.

        Each sidecar is read once, compared with what the index holds and, when they differ, written from what was
        read (a folder renamed read each twice: its md5, then its chunks), flushed every FLUSH_CHUNKS chunks."""
        self._write_staged()  # the listing below must see them
        indexed = self.index.sources(str(top))
        indexed.pop(str(top), None)
        changed = 0
        with self._gathered():
            for d in walk_dirs(top, self.ignore) if top.is_dir() else ():
                for en in sidecar.list_entries(d):
                    path = d / en.name
                    have = indexed.pop(str(path), None)
                    entry = self._served(d, en)
                    want = Expected(entry.source.md5_hash, len(entry.chunks)) if entry is not None else None
                    if differs(want, have):
                        self._sync_entry(path, entry, self._held(path, have))
                        changed += 1
                        self._flush_if_many()  # a big subtree: not all held until the end
            changed += self._drop(indexed)
            self._write_staged()
        if changed:
            self.flush()
        return changed

    def prune_gone(self, top: Path) -> int:
        """Drop the indexed sources below the folder `top` whose file and sidecar are both gone: no job can name
        them any more (the folder was replaced by another of the same name, or emptied with its `.rag/`, while the
        agent did not look: stopped, or stopping before its watcher's events were handled). A source whose file or
        sidecar is there is left to its folder's job. Returns how many were dropped."""
        self._write_staged()
        indexed = self.index.sources(str(top))
        indexed.pop(str(top), None)  # a file of that name, not in the folder: its own events'
        gone = {path: have for path, have in indexed.items() if not _there(Path(path))}
        dropped = self._converge({}, gone)  # what it holds, made to hold none of them
        if dropped:
            log.info("%s: %d indexed sources whose files and sidecars are gone left the index", top, dropped)
        return dropped

    # -- staged writes -----------------------------------------------------------------------------------------
    @contextmanager
    def _gathered(self) -> Iterator[None]:
        """Inside: writes are staged and made STAGE_CHUNKS chunks at a time (`_write_staged` writes the rest). When
        the outermost block ends, whatever it left staged (a failure raised) is dropped, not left to a later write,
        and no note is current."""
        outer, self._batching = self._batching, True
        try:
            yield
        finally:
            self._batching = outer
            if not outer:
                self._note, self._staged, self._staged_chunks = None, {}, 0

    def _stage(self, write: SourceWrite) -> None:
        old = self._staged.pop(write.source_path, None)
        self._staged_chunks += len(write.chunks) - (len(old[0].chunks) if old else 0)
        self._staged[write.source_path] = (write, self._note)
        if not self._batching or self._staged_chunks >= STAGE_CHUNKS:
            self._write_staged()

    def _write_staged(self) -> None:
        """Write the staged sources in one call. In a batch, a failure is retried source by source and charged
        to the notes whose sources failed (they stay and are retried); outside one it is raised."""
        staged, self._staged, self._staged_chunks = self._staged, {}, 0
        if not staged:
            return
        self.written += sum(len(w.chunks) for w, _ in staged.values())
        try:
            self.index.write_sources([w for w, _ in staged.values()])
            return
        except IndexUnavailable as err:  # a server down: every source would fail alike; said once, all wait
            if not self._batching or any(note is None for _, note in staged.values()):
                raise
            log.warning("%d sources wait for the index: %s", len(staged), err.message)
            for _, note in staged.values():
                self._failed.setdefault(note, str(err))  # type: ignore[arg-type]  # not None: checked above
            return
        except RagdError:
            if not self._batching:
                raise
        for write, note in staged.values():
            try:
                self.index.write_sources([write])
            except RagdError as err:
                if note is None:
                    raise
                log.error("index write of %s failed: %s", write.source_path, err)
                self._failed.setdefault(note, str(err))

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
        if ev.status in (NoteStatus.UPSERT, NoteStatus.DELETE):
            self.sync_source(directory, ev.file)
        elif ev.status == NoteStatus.DIR_DELETE and not target.is_dir():
            if self._deletes_wait and self._note is not None:
                self._waiting.add(self._note)  # applied by `apply_deletes`: see apply_batch
                return
            self._write_staged()  # in order: staged writes below `target` go first
            self.index.delete_subtree(str(target))
        else:  # dir_recover, or a dir_delete for a directory that has come back
            self.sync_subtree(target)

    def consume(self, path: Path) -> int | None:
        """Apply one mushroom's events under its directory's lock, without flushing. None: it is gone.

        The caller flushes the index, then deletes the mushroom (see apply_batch)."""
        directory = path.parent.parent
        there = note_there(path)
        # None: its folder cannot be read (chmod 000), out of search with it; the note is applied once readable
        if there is None:
            log.debug("change note %s waits: its folder cannot be read", path)
            return None
        if not there:  # consumed by someone else, and maybe its store removed: not made again
            return None
        if mushroom.held_back(path):  # a big folder's job runs there: it offers the note again at its end
            log.debug("change note %s waits for the job in its folder", path)
            return None
        # a note a running job handed over final announces only changes it made: applied beside the job
        lock: AbstractContextManager[object] = (
            nullcontext() if mushroom.is_final(path) else sidecar.DirLock(directory)
        )
        with lock:
            if not path.exists():
                return None  # consumed by someone else meanwhile
            note = mushroom.read(path)
            events = [ev for ev in note.events if self._only is None or ev.status == self._only]
            for ev in events:
                self.apply_event(directory, ev)
        return len(events)

    def apply_batch(
        self, paths: Sequence[Path], *, flush: bool = True, deletes_wait: bool = False
    ) -> SyncReport:
        """Apply several mushrooms in order with one flush (the costly step), then delete the applied ones.

        Their writes are gathered and made a thousand chunks at a time; a crash before the flush leaves every
        mushroom on disk, and applying them again gives the same index (see ZvecIndex.write_sources). With
        `flush=False` the applied mushrooms are left on disk and listed in the report's `applied`: the caller
        flushes later and deletes them then (`flushed`).

        `deletes_wait` (with `flush=False`): a folder's deletion (`dir_delete` of a name that is no folder now) is
        not applied; its note, its other events applied, is listed in the report's `waiting`, not in `applied`, and
        stays on disk until the caller applies its deletions with `apply_deletes`. A folder moved into another
        folder is two notes of two jobs, its old parent's `dir_delete` and its new parent's `dir_recover`, in no set
        order; applied as they came, the folder's files were out of search while the recover re-synced them (tens
        of seconds for a big folder: bench_bigfolder --move). The index writer holds the deletions until a pause."""
        report = SyncReport()
        applied: list[Path] = []
        self._failed = {}
        self._waiting = set()
        self._deletes_wait = deletes_wait and not flush
        try:
            self._apply_each(paths, report, applied)
        finally:
            self._deletes_wait = False
        report.waiting = [p for p in applied if p in self._waiting]
        applied = [p for p in applied if p not in self._waiting]
        if not flush:
            report.applied = applied
            return report
        self.flushed(applied)
        return report

    def apply_deletes(self, paths: Sequence[Path]) -> SyncReport:
        """The folder deletions of notes `apply_batch(deletes_wait=True)` left waiting (their other events were
        applied): applied now, the notes listed in the report's `applied` to flush and delete (or in `failed`)."""
        self._only = NoteStatus.DIR_DELETE
        try:
            report = self.apply_batch(paths, flush=False)
        finally:
            self._only = None
        report.events = 0  # counted when their notes were applied
        return report

    def _apply_each(self, paths: Sequence[Path], report: SyncReport, applied: list[Path]) -> None:
        with self._gathered():
            # a note named twice is applied once (it is deleted after the flush)
            for p in dict.fromkeys(paths):
                self._note = p
                try:
                    n = self.consume(p)
                except (RagdError, OSError) as err:
                    # its folder deleted, moved or made unreadable meanwhile: not a failure
                    if not note_there(p):
                        log.debug("mushroom %s gone or out of reach before it was applied", p)
                        continue
                    log.error("mushroom %s not applied: %s", p, err)
                    report.failed.append((p, str(err)))
                    continue
                if n is not None:
                    report.events += n
                    report.mushrooms += 1
                    applied.append(p)
            self._note = None
            self._write_staged()
        for p, why in self._failed.items():
            if p in applied:
                log.error("mushroom %s not applied: %s", p, why)
                applied.remove(p)
                report.mushrooms -= 1
                report.failed.append((p, why))

    def flushed(self, applied: Sequence[Path]) -> None:
        """Flush the index, then delete the mushrooms it has now applied for good (and the store of a folder they
        left with nothing: sidecar.drop_emptied)."""
        if applied:
            self.flush()
        for p in applied:
            _delete_note(p)
        for directory in {
            p.parent.parent for p in applied
        }:  # a folder whose last documents these notes deleted
            sidecar.drop_emptied(directory)

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
                entry = self._served(d, en)
                if entry is not None:
                    out[str(d / en.name)] = Expected(entry.source.md5_hash, len(entry.chunks))
        return out

    def _served(self, directory: Path, en: sidecar.EntryName) -> FileEntry | None:
        """The entry `en` of `directory`'s store when the index is to serve it (a live entry of a file that is
        there, EMBEDDED with sound vectors of this identity), else None."""
        if en.deleted or not (directory / en.name).is_file():
            return None
        entry = sidecar.try_read(en.path)
        return entry if servable(entry, self.identity) else None

    def reconcile(self, expected: dict[str, Expected] | None = None) -> SyncReport:
        """Check the index against the sidecars per source (md5, chunk count) and repair what differs."""
        report = SyncReport()
        self._write_staged()
        for root in outermost(self.roots):
            exp = expected if expected is not None else self.expected(walk_dirs(root, self.ignore))
            exp = {k: v for k, v in exp.items() if is_under(Path(k), root)}
            before = self.index.sources(str(root))
            report.repaired += self._converge(exp, before)
            report.removed += len(set(before) - set(exp))
        return report

    def _converge(self, expected: dict[str, Expected], indexed: dict[str, SourceSummary]) -> int:
        """Make the index hold `expected`, given what it holds (`indexed`): the sources that differ are written
        STAGE_CHUNKS chunks at a time, as a batch of notes is, not one call per source (each call commits the
        keyword index: filling a new index of 923 sources took 14 s that way, docs/benchmarks.md)."""
        changed = 0
        with self._gathered():
            for path, want in expected.items():
                have = indexed.get(path)
                if differs(want, have):
                    p = Path(path)
                    self.sync_source(p.parent, p.name, have, listed=True)
                    changed += 1
                    self._flush_if_many()  # a big subtree: not all held until the end
            changed += self._drop({path: have for path, have in indexed.items() if path not in expected})
            self._write_staged()
        if changed:
            self.flush()
        return changed

    def _drop(self, indexed: dict[str, SourceSummary]) -> int:
        """Stage the removal of these indexed sources (what the index holds for each); how many."""
        for path, have in indexed.items():
            self._stage(SourceWrite(path, "", "", (), self._held(Path(path), have)))
        return len(indexed)

    def orphans(self, prefix: Path | None = None) -> list[str]:
        """Indexed sources whose file or live EMBEDDED sidecar is gone."""
        found = []
        for path in sorted(self.index.sources(str(prefix) if prefix else None)):
            p = Path(path)
            entry = sidecar.try_read(sidecar.entry_path(p.parent, p.name))
            if not p.is_file() or not indexable(entry, self.identity):
                found.append(path)
        return found


def _there(path: Path) -> bool:
    """`path` is there, as a file, a link or its sidecar (an error other than "no such file": taken as there)."""
    for candidate in (path, sidecar.entry_path(path.parent, path.name)):
        try:
            os.lstat(candidate)
            return True
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError):
            return True
    return False
