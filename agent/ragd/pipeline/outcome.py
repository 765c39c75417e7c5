"""What a directory job gives each of its files and gets back: the job's context (`JobContext`), a file's
outcome (`FileOutcome`) and the states beyond an entry's (ABANDONED, RELABELED), and when a FAILED file is
retried (`BACKOFF_CODES`, with a backoff from `run.retry_after` (60 s) to RETRY_MAX_S; any other code waits for a change)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ..config import Config
from ..errors import EmbedError, StorageError
from ..model import EmbeddingIdentity
from ..vocabulary import FileState
from .identity import Identify, fallback
from .scan import Ignore
from .statcache import StatCache
from .workers import CRASHED, MEMORY, TIMEOUT, Parsers

WORKER_FAILURES = (TIMEOUT, CRASHED, MEMORY)  # a parse worker's: the file may parse another time


SubmitFn = Callable[[Sequence[str]], "Future[np.ndarray]"]
ReuseFn = Callable[[Sequence[str]], dict[str, str]]
# (path, md5) -> the path a document of that content left (a file moved in from another folder), or None
MovedFromFn = Callable[[str, str], str | None]
# why a file is ABANDONED: left as it was (its old entry, or none) because the file's root was removed while its
# job ran (or, written CHUNKED, because the agent stopped): redone when the root is added again (at the next start)
ROOT_REMOVED = "its root was removed while its directory's job ran"
VANISHED = "vanished during the job"
RETRY_MAX_S = 6 * 3600.0
# FAILED with one of these is retried by time (with a backoff); any other waits for a change to the file
BACKOFF_CODES = frozenset({EmbedError.code, StorageError.code, "internal", *WORKER_FAILURES})


@dataclass(frozen=True)
class JobContext:
    config: Config
    submit: SubmitFn  # queue texts for embedding (EmbedQueue.submit)
    ignore: Ignore
    # what a SKIPPED verdict of the file named depends on (`policy`), found out when a job first needs it: whether
    # OCR loads takes a child process (parse/ocr.py), which a run of text files waited for before its first job
    # (~0.3 s of 4), and which only a file OCR may read asks (resident/jobs.py: `skip_policy`)
    skip_policy: Callable[[str], str]
    force: bool = False
    roots: tuple[Path, ...] = ()  # a symlink whose target lies outside all of them is not indexed
    stat_cache: StatCache | None = None  # entries' digests by their stat, so unchanged entries are not read
    parsers: Parsers | None = None  # the parse workers; None: parse in the job's thread
    express: bool = False  # a change was seen in this directory: its files go to the parse workers first
    identify: Identify = fallback  # a file's document id (identity.py); the agent's history links moves
    # where a file new at its path came from (the history's `left_from`): the entry it left there holds vectors it
    # may reuse (pipeline/rounds.py); None: no history to ask
    moved_from: MovedFromFn | None = None
    # True once the directory has left the roots (`ragctl roots remove` while its job ran): its files not yet
    # recorded are left alone (ABANDONED), so that no FAILED verdict and its backoff outlive the root
    dropped: Callable[[], bool] = lambda: False

    @cached_property
    def identity(self) -> EmbeddingIdentity:
        return self.config.identity

    def policy(self, name: str) -> str:
        """What a SKIPPED verdict of the file `name` depends on; a different policy re-evaluates skipped files."""
        return self.skip_policy(name)


@dataclass(frozen=True)
class FileOutcome:
    name: str
    state: FileState  # EMBEDDED, SKIPPED, FAILED, UNCHANGED, TOUCHED, RELABELED, ABANDONED
    chunks: int = 0
    embedded: int = 0  # texts sent to the embedder
    reused: int = 0  # chunk vectors taken from stored entries
    reason: str = ""
    md5: str = ""  # of the source, when the file ends EMBEDDED
    recorded: FileState | None = (
        None  # for UNCHANGED: the state its entry records (EMBEDDED, SKIPPED, FAILED)
    )
    retry_at: str | None = (
        None  # for FAILED (and UNCHANGED FAILED): when it will be retried (None: on change)
    )
    document_id: str = ""  # of the file's entry ("" when none was written: vanished, abandoned)
    size: int = -1  # of the source, as recorded
    parser: str | None = None
    recorded_at: str = ""  # for UNCHANGED: when its entry was written (modify_dt)

    @property
    def final_state(self) -> FileState:
        """The state the file is in after the job: EMBEDDED, SKIPPED or FAILED."""
        if self.state == FileState.UNCHANGED:
            return self.recorded or FileState.EMBEDDED
        if self.state == FileState.ABANDONED:
            return FileState.PENDING
        return FileState.EMBEDDED if self.state in (FileState.TOUCHED, FileState.RELABELED) else self.state
