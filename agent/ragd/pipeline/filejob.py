"""One file's way through the pipeline, in two steps so that a directory's files share embedding requests:

    begin():   stat/precheck -> md5 -> hand the file to a parse worker (workers.py)
    prepare(): wait for its chunks -> reuse stored vectors -> submit texts (and its lead's)
    finish():  wait for the vectors -> EMBEDDED entry

A file's entry is written once, when its vectors are back (until then its old entry, or none, stands: a crash
leaves a file whose entry no longer matches it, done again at the next start). A file the agent stops under after
it was chunked is written CHUNKED ("not done yet": redone at the next start). Writing every file's CHUNKED entry
before its texts went out cost a big folder's agent a fifth of its CPU (docs/benchmarks/history.md).

An EMBEDDED entry of an earlier ragd, with no lead (lead.py), gets one from its stored chunks (`Change.LEAD`):
nothing is parsed, one text is embedded.

Every outcome is recorded in the file's entry (EMBEDDED, SKIPPED or FAILED with the reason). `guard` is the
per-file boundary: nothing a single file does can stop its directory's job. A FAILED file is retried with a
backoff when the cause may pass by itself (the embedder, a sidecar that could not be written, an internal error),
and when the file changes otherwise (a parse error, no read permission: a chmod is a change too). When even the
FAILED entry cannot be written, the outcome still carries the reason and the retry time, so the agent retries.
Every entry is written never more readable than its source (`sidecar.write_entry(..., like=stat)`).

This module holds the steps (`FileTask`); filerecord.py what a task holds and records (its verdicts, `guard`),
outcome.py what a job gives a file and gets back (`JobContext`, `FileOutcome`, the retry policy).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import modes
from ..errors import SHUTDOWN, EmbedError, FileSkipped, ParseError, StorageError
from ..model import Chunk, fields_json, vector_problem
from ..vocabulary import FileState
from . import sidecar
from .cutwords import CUT_WORDS
from .filerecord import FileRecord, permission_denied, replaced, source_info
from .lead import lead_hash, lead_text
from .outcome import ROOT_REMOVED, VANISHED, FileOutcome, ReuseFn
from .parse import IMAGE_EXTENSIONS, kind_of, refuse_image, unsupported
from .scan import OUTSIDE_ROOTS, Change, md5_file, not_regular, stat_matches, under_real_roots
from .sidecar import FileEntry, StoredChunk, StoredLead
from .statcache import stat_key
from .workers import parse_here

log = logging.getLogger(__name__)


def chunk_meta(c: Chunk) -> dict[str, object]:
    """A stored chunk's meta, without the keys that have no value: as its entry's JSON leaves them out, so that the
    entry written and the entry read back are equal (the index writer may take the one written: sidecar/recent.py)."""
    meta = {"start_index": c.start_index, "end_index": c.end_index, "start_line": c.start_line,
            "end_line": c.end_line, "page": c.page, "header": c.header,
            "heading_path": list(c.heading_path) or None}  # fmt: skip
    return {k: v for k, v in meta.items() if v is not None}


def _labels_changed(before: Any, after: Any) -> str:
    """What a relabel changed, for the history: "tag: draft -> final; owner: (none) -> ops"."""
    old = fields_json(before.fields) if before is not None else {}
    new = fields_json(after.fields) if after is not None else {}
    parts = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            parts.append(f"{key}: {_shown(old.get(key))} -> {_shown(new.get(key))}")
    return "; ".join(parts)[:500] or "metadata made again"


def _shown(value: Any) -> str:
    if value is None or value == [] or value == "":
        return "(none)"
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


class FileTask(FileRecord):
    """A file's steps through the pipeline: begin(), prepare(), finish() (see the module's docstring)."""

    def begin(self) -> FileOutcome | None:
        """The cheap checks, then the file to the parsers. None: it is being parsed, call prepare()."""
        if self.ctx.dropped():
            return FileOutcome(self.name, FileState.ABANDONED, reason=ROOT_REMOVED)
        try:
            self.st = os.stat(self.path)
        except OSError:
            return FileOutcome(self.name, FileState.UNCHANGED, reason=VANISHED)
        if self.change in (Change.TOUCHED, Change.LEAD) and self.old is not None and self._edited_since():
            self.change = Change.CHANGED  # edited since its directory's job was planned: done again whole
        if self.change == Change.TOUCHED and self.old is not None:
            return self._touch(self.old, self.st)
        if self.change == Change.RELABEL and self.old is not None:
            return self._relabel(self.old, self.st)
        if self.change == Change.LEAD and self.old is not None:
            return None  # nothing to parse: prepare() makes the lead from the stored chunks
        return self._parsed(self._start)

    def _edited_since(self) -> bool:
        """A touch or a lead keeps the entry's md5 for the file's stat now: true when the file may have been edited
        since its change was decided (its stat differs from the planned one) and its content is not the entry's.
        Recording the old md5 under the new stat would hide that edit from every later job."""
        assert self.st is not None and self.old is not None
        if self.planned is not None and stat_key(self.st) == stat_key(self.planned):
            return False
        if self.planned is None and stat_matches(self.old, self.st):
            return False
        try:
            return md5_file(self.path) != self.old.source.md5_hash
        except (
            OSError
        ):  # unreadable now, or gone: done again whole, where the error is recorded as for any file
            return True

    def _start(self) -> None:
        assert self.st is not None
        self._precheck()
        self.source = source_info(self.name, self.st, md5_file(self.path))
        splitter, parsers = self.ctx.identity.splitter, self.ctx.parsers
        if parsers is None:
            self.parsing = parse_here(self.path, self.ctx.config.limits, splitter, self.ctx.config.parse)
        else:
            self.parsing = parsers.start(self.path, splitter, first=self.ctx.express)

    def _chunks(self) -> None:
        assert self.parsing is not None
        parsed = self.parsing.result()
        self.parser, self.chunks = parsed.parser, list(parsed.chunks)
        if parsed.words:
            CUT_WORDS.keep(self.chunks, parsed.words)  # for the index writer (cutwords.py)
        self.ocr = parsed.ocr.to_json() if parsed.ocr is not None else None
        self.document = parsed.metadata
        self.warning = parsed.warning
        if self.warning:
            log.warning("%s: read with %s", self.path, self.warning)
        if not self.chunks:
            raise FileSkipped("no text to index after splitting")

    def _parsed(self, step: Callable[[], None]) -> FileOutcome | None:
        """`step` of the parse, with its verdicts recorded: None when it went through."""
        try:
            step()
        except FileSkipped as err:
            return self.skipped(err, md5=self.source.md5_hash if self.source else "")
        except ParseError as err:
            if err.code == SHUTDOWN:  # the agent stopped the parsers under the file
                return FileOutcome(self.name, FileState.ABANDONED, reason=err.message)
            return self.failed(err)
        except (FileNotFoundError, NotADirectoryError):  # gone; or its folder replaced by a file of its name
            return FileOutcome(self.name, FileState.UNCHANGED, reason=VANISHED)
        except IsADirectoryError as err:  # replaced by a folder of its name: the folder's job records it
            if not replaced(err, self.path):
                raise
            return FileOutcome(self.name, FileState.UNCHANGED, reason=VANISHED)
        except PermissionError:
            return self.failed(permission_denied(self.path))
        return None

    def prepare(self, reuse: ReuseFn) -> FileOutcome | None:
        """Everything after begin() up to the embedder. None: texts were submitted, call finish()."""
        if self.change == Change.LEAD and self.old is not None:
            return self._prepare_lead(self.old)
        stop = self._parsed(self._chunks)
        if stop is not None:
            return stop
        if self.ctx.dropped():  # nothing written yet: its entry stays as it was
            return FileOutcome(self.name, FileState.ABANDONED, reason=ROOT_REMOVED)
        known = reuse([c.content_hash for c in self.chunks])
        self.stored = [StoredChunk(c.content, c.content_hash, c.overlap_size, known.get(c.content_hash),
                                   chunk_meta(c)) for c in self.chunks]  # fmt: skip
        self.todo = [i for i, c in enumerate(self.stored) if c.vector_base64 is None]
        self.lead = self._lead(self.chunks[0].header, [c.content for c in self.chunks], reuse)
        texts = [self.chunks[i].embed_text for i in self.todo] + self._lead_todo()
        if not texts:
            return self.finish()
        return self._submit(texts)

    def _submit(self, texts: list[str]) -> FileOutcome | None:
        try:
            self.future = self.ctx.submit(texts)
        except EmbedError as err:  # the embedder closed before this file got to it (the agent is stopping)
            if err.code == SHUTDOWN:
                return self._stopped(err)
            return self.failed(err)
        return None

    def _stopped(self, err: EmbedError) -> FileOutcome:
        """The agent stopped while this file's texts were on their way to the embedder or awaited: its entry is
        written CHUNKED (its chunks, with the vectors it reuses), "not done yet", redone at the next start. An
        entry being given its lead is left as it is (served without one); a file whose root was removed, too (the
        job records nothing more of its files)."""
        if not (self.change == Change.LEAD and self.old is not None) and not self.ctx.dropped():
            try:
                self._write(FileState.CHUNKED, chunks=tuple(self.stored), parser=self.parser, ocr=self.ocr)
            # not written: the old entry stays, which the file no longer matches, so it is redone all the same
            except StorageError as unwritten:
                log.warning("%s", unwritten)
        return FileOutcome(self.name, FileState.ABANDONED, reason=err.message)

    def _lead(self, header: str, contents: Sequence[str], reuse: ReuseFn | None = None) -> StoredLead:
        """The document's lead (lead.py): the old entry's while its text is the same and its vector sound, or one
        whose vector `reuse` finds (the directory's other entries: a file renamed), else one whose vector the
        embedder is to make ("" for a document with no title nor prose: nothing to embed)."""
        text = lead_text(header, contents)
        digest = lead_hash(text)
        old, ident = self.old, self.ctx.identity
        if old is not None and (old.model_name, old.dimension) == (ident.model_name, ident.dimension):
            kept = old.lead
            if kept is not None and kept.content == text and (not text or self._sound(kept)):
                return kept
        found = reuse([sidecar.LEAD_KEY + digest]) if reuse is not None and text else {}
        return StoredLead(text, digest, found.get(sidecar.LEAD_KEY + digest, ""))

    def _sound(self, lead: StoredLead) -> bool:
        try:
            vec = lead.vector
        except ValueError:  # not base64
            return False
        return vec is not None and vec.shape[0] == self.ctx.identity.dimension and vector_problem(vec) is None

    def _lead_todo(self) -> list[str]:
        """The lead's text when its vector is still to be made (it goes last in the file's request)."""
        return [self.lead.content] if self.lead is not None and self.lead.content and not self.lead.vector_base64 \
            else []  # fmt: skip

    def _prepare_lead(self, old: FileEntry) -> FileOutcome | None:
        """An entry with no lead (of an earlier ragd): the lead made from its stored chunks, nothing parsed."""
        # the same content (classify, `_edited_since`), maybe a new stat: recorded as a touch records it
        assert self.st is not None
        self.source = source_info(self.name, self.st, old.source.md5_hash)
        self.parser, self.stored = old.parser, list(old.chunks)
        first = old.chunks[0].meta.get("header") if old.chunks else None
        self.lead = self._lead(str(first or ""), [c.content for c in old.chunks])
        texts = self._lead_todo()
        return self._submit(texts) if texts else self.finish()

    def _touch(self, old: FileEntry, st: os.stat_result) -> FileOutcome:
        """Same content, new stat (a touch, a chmod): refresh the recorded stat and the entry's mode."""
        refreshed = source_info(self.name, st, old.source.md5_hash)
        self.source = refreshed
        labelled = self.labels.again(old.metadata) if old.status == FileState.EMBEDDED else old.metadata
        touched = old.with_status(
            old.status, source=refreshed, metadata=labelled, document_id=self.document_id()
        )
        try:
            sidecar.write_entry(self.directory, touched, like=st)
        except StorageError as err:  # the entry is still right about the content; the next job tries again
            log.error("%s", err)
            with contextlib.suppress(OSError):  # but a narrower mode needs no space: never leave it wider
                modes.restrict(sidecar.entry_path(self.directory, self.name), st)
        return FileOutcome(self.name, FileState.TOUCHED, chunks=len(old.chunks), md5=refreshed.md5_hash,
                           document_id=self.document_id(), size=refreshed.size_bytes, parser=old.parser)  # fmt: skip

    def _relabel(self, old: FileEntry, st: os.stat_result) -> FileOutcome:
        """Same file, new folder defaults or keys: its metadata made again from its document's (nothing parsed).
        An entry that cannot be written keeps its old fields, which are still its document's: the next job tries
        again."""
        labelled = old.with_status(old.status, metadata=self.labels.again(old.metadata))
        try:
            sidecar.write_entry(self.directory, labelled, like=st)
        except StorageError as err:
            log.error("%s", err)
            return FileOutcome(
                self.name, FileState.UNCHANGED, recorded=FileState.EMBEDDED, chunks=len(old.chunks)
            )
        return FileOutcome(self.name, FileState.RELABELED, chunks=len(old.chunks), md5=old.source.md5_hash,
                           document_id=self.document_id(), size=old.source.size_bytes, parser=old.parser,
                           reason=_labels_changed(old.metadata, labelled.metadata))  # fmt: skip

    def finish(self) -> FileOutcome:
        if self.future is not None:
            try:
                vectors = self.future.result()
            except EmbedError as err:
                if err.code == SHUTDOWN:  # the agent is stopping
                    return self._stopped(err)
                return self.failed(err)
            if self._lead_todo():
                assert self.lead is not None
                self.lead = replace(self.lead, vector_base64=sidecar.encode_vector(vectors[-1]))
                vectors = vectors[:-1]
            for i, vec in zip(self.todo, vectors, strict=True):
                c = self.stored[i]
                self.stored[i] = StoredChunk(c.content, c.content_hash, c.overlap_size,
                                             sidecar.encode_vector(vec), c.meta)  # fmt: skip
        if self.change == Change.LEAD and self.old is not None:
            return self._finish_lead(self.old)
        self._write(
            FileState.EMBEDDED, chunks=tuple(self.stored), parser=self.parser, ocr=self.ocr, lead=self.lead
        )
        n = len(self.stored)
        md5 = self.source.md5_hash if self.source else ""
        return FileOutcome(self.name, FileState.EMBEDDED, chunks=n, embedded=len(self.todo), reused=n - len(self.todo),
                           md5=md5, document_id=self.document_id(), size=self._size(), parser=self.parser)  # fmt: skip

    def _finish_lead(self, old: FileEntry) -> FileOutcome:
        """The old entry with its lead (and its metadata made again, as a touch does), the rest as it was."""
        assert self.st is not None
        entry = old.with_status(FileState.EMBEDDED, lead=self.lead, source=self.source,
                                metadata=self.labels.again(old.metadata), document_id=self.document_id())  # fmt: skip
        try:
            sidecar.write_entry(self.directory, entry, like=self.st)
        except StorageError as err:  # still served as it was, without a lead: the next job tries again
            log.error("%s", err)
            return FileOutcome(
                self.name, FileState.UNCHANGED, recorded=FileState.EMBEDDED, chunks=len(old.chunks)
            )
        relabeled = entry.metadata != old.metadata
        return FileOutcome(self.name, FileState.RELABELED if relabeled else FileState.TOUCHED, chunks=len(old.chunks),
                           embedded=1 if self.future is not None else 0, reused=len(old.chunks),
                           md5=old.source.md5_hash, document_id=self.document_id(), size=self.st.st_size,
                           parser=old.parser, reason=_labels_changed(old.metadata, entry.metadata) if relabeled
                           else "")  # fmt: skip

    def _precheck(self) -> None:
        """Cheap refusals before the file is read at all (so a video is never hashed)."""
        assert self.st is not None
        if not stat.S_ISREG(self.st.st_mode):  # replaced since the listing (a FIFO is never opened)
            raise FileSkipped(not_regular(self.st.st_mode))
        if self.ctx.roots and self.path.is_symlink():
            target = Path(os.path.realpath(self.path))
            if not under_real_roots(target, self.ctx.roots):
                raise FileSkipped(f"symbolic link to {modes.display_name(str(target))}, {OUTSIDE_ROOTS}",
                                  "move the file into a root, or add its folder as a root")  # fmt: skip
        if kind_of(self.path) is None:  # a README with no extension is read as text; a video is never hashed
            raise unsupported(self.path)
        if self.path.suffix.lower() in IMAGE_EXTENSIONS:  # before the image is hashed
            refuse_image(self.ctx.config.parse)
        limit = self.ctx.config.limits.max_file_size
        if self.st.st_size > limit:
            raise FileSkipped(f"file too large: {self.st.st_size} bytes > limits.max_file_size {limit}",
                              "raise limits.max_file_size to index it")  # fmt: skip
