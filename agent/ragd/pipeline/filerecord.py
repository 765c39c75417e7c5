"""What a file's task holds and records (`FileRecord`, the base of filejob.FileTask): its fields, its document id,
its entry written never more readable than its source, and its verdicts: SKIPPED, FAILED with when it is
retried, and `guard`, the per-file boundary (whatever happens, the file ends in a recorded state and the job
goes on)."""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbedError, FileSkipped, RagdError, StorageError
from ..model import Chunk, Extracted
from ..vocabulary import FileState
from . import sidecar
from .metadata import Labels
from .outcome import (
    BACKOFF_CODES,
    RETRY_MAX_S,
    ROOT_REMOVED,
    VANISHED,
    FileOutcome,
    JobContext,
)
from .scan import Change, FileStat
from .sidecar import FileEntry, SourceInfo, StoredChunk, StoredLead
from .structure import SPLIT_REVISION
from .workers import Pending

log = logging.getLogger(__name__)

# A file, or a job, whose folder's store (`.rag/`) went while it ran (an `rm -r` of the folder takes `.rag/` before
# the folder; or `.rag/` deleted alone): its folder is looked at again this much later (gone by then: forgotten).
STORE_GONE_S = 2.0


def store_went(err: BaseException | None) -> bool:
    """`err` is a write into a folder's store that failed with "No such file": the store, its `tmp/`, or the write's
    own temporary file was deleted under it. The job holds the folder's lock, so none of the agent's own writes
    removes them: the store is going (`rm -r` of the folder, or of `.rag/` alone), or went and was made again by
    another thread's lock, or is being emptied (`rm -r` failed on a file the agent wrote meanwhile, and the user runs
    it again). Not one that could never be made: a folder the agent may not write in keeps failing, and says so."""
    return isinstance(err, StorageError) and err.errno == errno.ENOENT


def source_info(name: str, st: os.stat_result, md5: str) -> SourceInfo:
    return SourceInfo(file_name=name, md5_hash=md5, size_bytes=st.st_size, mtime=int(st.st_mtime),
                      inode=st.st_ino, mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)  # fmt: skip


@dataclass
class FileRecord:
    """One file of a directory job: what it is known by, what its parse and the embedder gave, and its entry
    written with each verdict; filejob.FileTask adds the steps."""

    ctx: JobContext
    directory: Path
    name: str
    change: Change
    old: FileEntry | None
    st: os.stat_result | None = None
    source: SourceInfo | None = None
    chunks: list[Chunk] = field(default_factory=list)
    stored: list[StoredChunk] = field(default_factory=list)
    todo: list[int] = field(default_factory=list)
    parser: str | None = None
    ocr: dict[str, Any] | None = None  # the entry's `ocr` key: what OCR did (OcrReport.to_json)
    warning: str | None = None  # the entry's `warning` key: what the parse read with damage
    labels: Labels = field(default_factory=Labels)  # the folder defaults and keys in force in the directory
    # the file's stat its change was decided on (the directory's listing)
    planned: FileStat | None = None
    document: Extracted | None = None  # the document's own metadata, from its parse
    parsing: Pending | None = None
    lead: StoredLead | None = None  # the document's lead; its vector "" while it waits for the embedder
    future: Future[np.ndarray] | None = None
    _document_id: str | None = None

    @property
    def path(self) -> Path:
        return self.directory / self.name

    def document_id(self) -> str:
        """The file's document id, decided once (identity.py): its entry's, or the history's, or a new one."""
        if self._document_id is None:
            md5 = self.source.md5_hash if self.source else ""
            known = self.old.document_id if self.old else None
            self._document_id = self.ctx.identify(str(self.path), md5, known, self.old is not None)
        return self._document_id

    def _size(self) -> int:
        return self.source.size_bytes if self.source else (self.st.st_size if self.st else -1)

    def guard(self, step: Callable[[], FileOutcome | None]) -> FileOutcome | None:
        """The per-file boundary: whatever happens, the file ends in a recorded state and the job goes on."""
        try:
            return step()
        except StorageError as err:  # a sidecar write failed (disk full, permissions): retried by time
            if not os.path.lexists(self.path):  # the file, or its whole folder, went away meanwhile
                return FileOutcome(self.name, FileState.UNCHANGED, reason=VANISHED)  # the next job records it
            if store_went(err):  # (`rm -r` of the folder under way)
                retry = sidecar.utc_stamp(time.time() + STORE_GONE_S)  # not an error; its job says it once
                return FileOutcome(self.name, FileState.FAILED, reason=err.message, retry_at=retry)
            log.error("%s", err)
            return self.failed(err)
        except Exception as err:  # record, log, go on
            if replaced(err, self.path):
                return FileOutcome(self.name, FileState.UNCHANGED, reason=VANISHED)  # the next job records it
            log.exception("internal error while processing %s", self.path)
            internal = RagdError(f"internal error: {type(err).__name__}: {err}",
                                 "please report this with the log", code="internal")  # fmt: skip
            return self.failed(internal)

    def _lead_failed(self, err: RagdError) -> FileOutcome:
        """An old entry's lead could not be made (the embedder failed): the entry is left as it is (EMBEDDED,
        served without a lead) and the next job tries again; nothing is recorded as FAILED."""
        log.warning("cannot make the lead of %s yet: %s", self.path, err.message)
        assert self.old is not None
        return FileOutcome(self.name, FileState.UNCHANGED, recorded=FileState.EMBEDDED, chunks=len(self.old.chunks),
                           md5=self.old.source.md5_hash, reason=err.message)  # fmt: skip

    def _write(self, status: str, source: SourceInfo | None = None, **kw: Any) -> None:
        stamp = sidecar.utc_stamp()
        ident = self.ctx.identity
        src = source or self.source
        assert src is not None
        created = self.old.create_dt if self.old and self.old.create_dt else stamp
        revision = SPLIT_REVISION if kw.get("chunks") else None
        metadata = self.labels.entry(self.document) if kw.get("chunks") else None
        kw.setdefault("warning", self.warning)
        entry = FileEntry(status=status, create_dt=created, modify_dt=stamp, source=src,
                          model_name=ident.model_name, dimension=ident.dimension,
                          splitter=ident.splitter.fingerprint, split_revision=revision, metadata=metadata,
                          document_id=self.document_id(), **kw)  # fmt: skip
        sidecar.write_entry(self.directory, entry, like=self.st)

    def skipped(self, err: FileSkipped, md5: str) -> FileOutcome:
        assert self.st is not None
        error = {**err.to_dict(), "policy": self.ctx.policy(self.name)}
        self._write(FileState.SKIPPED, source=source_info(self.name, self.st, md5), error=error)
        return FileOutcome(self.name, FileState.SKIPPED, reason=err.message, md5=md5, document_id=self.document_id(),
                           size=self.st.st_size, parser=self.parser)  # fmt: skip

    def failed(self, err: RagdError) -> FileOutcome:
        """FAILED with the error and when it is retried (BACKOFF_CODES back off, others wait for a change); nothing
        once the file's root is gone (the embedder failed after `roots remove`, say): adding the root again redoes
        the file at once, as a root added for the first time."""
        if self.ctx.dropped():
            return FileOutcome(self.name, FileState.ABANDONED, reason=ROOT_REMOVED)
        if self.change == Change.LEAD and self.old is not None:  # its entry is served as it is: kept
            return self._lead_failed(err)
        old = self.old
        attempts = (
            int((old.error or {}).get("attempts", 0)) + 1 if old and old.status == FileState.FAILED else 1
        )
        first = self.ctx.config.run.retry_after
        backoff = sidecar.utc_stamp(time.time() + min(first * 2 ** (attempts - 1), RETRY_MAX_S))
        retry_at = backoff if isinstance(err, EmbedError) or err.code in BACKOFF_CODES else None
        if self.st is None:  # nothing known about the file to record
            return FileOutcome(self.name, FileState.FAILED, reason=err.message, retry_at=backoff)
        error = {**err.to_dict(), "at": sidecar.utc_stamp(), "attempts": attempts, "retry_at": retry_at}
        src = self.source or source_info(self.name, self.st, "")
        chunks = tuple(self.stored) if isinstance(err, EmbedError) else ()
        try:
            self._write(
                FileState.FAILED, source=src, chunks=chunks, error=error, parser=self.parser, ocr=self.ocr
            )
        except StorageError as unwritten:  # not even this could be written: the agent retries it by time
            if unwritten.message != err.message:
                log.error("%s", unwritten)
            reason = err.message if err.code == StorageError.code else f"{err.message}; {unwritten.message}"
            return FileOutcome(self.name, FileState.FAILED, reason=reason, retry_at=backoff)
        return FileOutcome(self.name, FileState.FAILED, reason=err.message, retry_at=retry_at, md5=src.md5_hash,
                           document_id=self.document_id(), size=src.size_bytes, parser=self.parser)  # fmt: skip


def permission_denied(path: Path) -> RagdError:
    return RagdError(f"permission denied: {path}",
                     "give the agent's user read access to the file; it is tried again when the file changes "
                     "(a chmod counts)", code="permission")  # fmt: skip


def replaced(err: Exception, path: Path) -> bool:
    """`err` says the file went away while it was processed: gone (or its folder, replaced by a file of its name:
    NotADirectoryError), or replaced by a folder of its name (IsADirectoryError). The next job records it."""
    if isinstance(err, (FileNotFoundError, NotADirectoryError)):
        return not os.path.lexists(path)
    return isinstance(err, IsADirectoryError) and os.path.isdir(path) and not os.path.islink(path)
