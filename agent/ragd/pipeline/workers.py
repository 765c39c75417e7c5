"""Parse and split in worker processes: the heavy converters' imports, memory and crashes stay out of the agent.

`Parsers(run, limits, options)` is the front every directory job calls: `start(path, splitter)` hands one file to a worker
(pool.py: `run.workers` processes, one per core by default, started with the first file and gone after
`run.worker_idle` seconds without one) and returns at once; `Pending.result()` waits for its chunks. With
`run.workers = 0` the file is parsed in the calling thread instead (tests and debugging).

- Every file has a deadline, `limits.parse_timeout` seconds from the moment a worker takes it (the stages' own
  modules are imported as the worker starts, a converter's libraries with its first file), and a little grace,
  so that an external converter, which has the same limit, is stopped by its own timeout and takes its helper
  processes with it. A worker past it is killed and replaced: the file fails with "timed out after N s" (code
  "timeout").
- A worker that dies (a segfault in a parser, a kill) fails only its file, with "parser crashed" (code "crashed").
- Each worker's address space is capped at `run.worker_memory` MiB; a file that needs more fails with code
  "memory" (or, when a C library aborts instead of raising, as a crash).
- When the agent stops the workers, files under way end with code "shutdown" (ABANDONED: redone at the next start).
- Given a `cut`, a worker also cuts its file's chunks into the keyword index's words, which the job keeps for the
  index writer (cutwords.py): work taken out of the agent's one process.

The directory job records the first three as FAILED entries retried with a backoff (outcome.BACKOFF_CODES), and
its other files go on.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path

from ..config import LimitsConfig, ParseConfig, RunConfig
from ..errors import SHUTDOWN, ParseError, RagdError
from ..model import Chunk, Extracted, OcrReport, SplitterSettings
from . import preload
from .cutwords import Cut, Words
from .parse import TEXT_EXTENSIONS
from .pool import FEW_WINDOW_S, Few, WorkerPool, worker_count, worker_death

log = logging.getLogger(__name__)

GRACE_S = 2.0  # at most this long past limits.parse_timeout before a worker is stopped
TIMEOUT, CRASHED, MEMORY = "timeout", "crashed", "memory"  # the codes of a worker's failures
# imported as a worker starts, outside any deadline: the stages, and the splitter's langchain module (which
# split.py imports with its first text: 0.15 s of a 0.3 s deadline on a loaded machine)
PRELOAD = preload.PARSE
# While the workers are not running, a few small text files (a fresh agent's first note, a new note in a quiet
# folder: at most FEW_FILES in FEW_WINDOW_S seconds, each at most HERE_BYTES of .md, .txt, ...) are parsed in the
# job's thread: decoding a few KiB needs no worker, and starting two (a process each, its imports: 1-2 s) held a
# fresh agent's first note back (docs/benchmarks.md, the first minute). Every other file goes to a worker.
FEW_FILES = 8  # in pool.FEW_WINDOW_S seconds
HERE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Parsed:
    """What a worker sends back: the parser's name, the file's chunks, what OCR did (if it ran), the document's
    own metadata (if it has any) and what was read with damage (Document.warning)."""

    parser: str
    chunks: tuple[Chunk, ...]
    ocr: OcrReport | None = None
    metadata: Extracted | None = None
    warning: str | None = None
    # the chunks' keyword texts and words, when the worker was given a cut (cutwords.py)
    words: tuple[Words, ...] = ()


def parse_and_split(
    path: Path,
    limits: LimitsConfig,
    splitter: SplitterSettings,
    options: ParseConfig | None = None,
    cut: str | None = None,
) -> Parsed:
    """One file through the parse and split stages (in a worker, or in the caller with `run.workers = 0`); `cut`
    (`module:function`, a `cutwords.Cut`): its chunks cut into the keyword index's words too."""
    from .parse import parse
    from .split import split

    doc = parse(path, limits, options)
    chunks = tuple(split(doc, splitter))
    words = _cut(cut, chunks) if cut is not None and chunks else ()
    return Parsed(doc.parser, chunks, doc.ocr, doc.metadata, doc.warning, words)


def _cut(cut: str, chunks: tuple[Chunk, ...]) -> tuple[Words, ...]:
    """The chunks' words by the function `cut` names, or none: a cut that fails leaves the words to the index
    writer, which meets the same failure where it is reported (the file itself is parsed)."""
    module, _, name = cut.partition(":")
    try:
        fn: Cut = getattr(importlib.import_module(module), name)
        return tuple(fn([(c.header, c.content) for c in chunks]))
    except Exception as err:  # the cut's boundary, as above
        log.debug("cutting the chunks of a file into words failed: %s", err)
        return ()


class Pending:
    """A file handed to a worker; `result()` waits for it and turns a worker's failure into a ParseError."""

    def __init__(self, future: Future[Parsed], path: Path, timeout: float, memory_mib: int) -> None:
        self._future, self._path, self._timeout, self._memory = future, path, timeout, memory_mib

    def result(self) -> Parsed:
        try:
            return self._future.result()
        except RagdError:
            raise  # the parser's own verdict (FileSkipped, ParseError), raised in the worker
        except FutureTimeout:
            raise ParseError(f"timed out after {self._timeout:g} s: {self._path}",
                             "the parser was stopped; raise limits.parse_timeout for large files (it is tried "
                             "again later)", code=TIMEOUT) from None  # fmt: skip
        except CancelledError:
            raise ParseError("parsing stopped: the agent is stopping", "the file is parsed at its next start",
                             code=SHUTDOWN) from None  # fmt: skip
        except MemoryError:
            raise ParseError(f"the parser needed more than run.worker_memory ({self._memory} MiB): {self._path}",
                             "raise run.worker_memory to index it (it is tried again later)",
                             code=MEMORY) from None  # fmt: skip
        except Exception as err:
            why = worker_death(err)
            if why is None:
                raise
            raise ParseError(f"parser crashed ({why}): {self._path}",
                             "the file is tried again later; if it keeps crashing, report the file type",
                             code=CRASHED) from None  # fmt: skip


class Parsers:
    """The parse front: a worker pool, or the calling thread (`run.workers = 0`)."""

    def __init__(
        self,
        run: RunConfig,
        limits: LimitsConfig,
        options: ParseConfig | None = None,
        *,
        few: int = FEW_FILES,
        cut: str | None = None,
    ) -> None:
        """`few`: small text files parsed here, at most, in FEW_WINDOW_S seconds while the workers are not running
        (0: every file goes to a worker). `cut`: the function (`module:function`, a `cutwords.Cut`) with which a
        worker cuts its chunks into the keyword index's words (`Parsed.words`); its module is imported by the
        workers (and their fork server) only, never in the calling process."""
        self.workers = worker_count(run.workers)
        self.memory_mib, self.limits, self.options = run.worker_memory, limits, options or ParseConfig()
        self.cut = cut
        preload = PRELOAD + ((cut.partition(":")[0],) if cut is not None else ())
        self.pool = (
            WorkerPool("parse", self.workers, run.worker_memory, run.worker_idle, preload=preload)
            if self.workers
            else None
        )
        self._few = Few(few, FEW_WINDOW_S)  # files parsed here while the workers were not running
        self._when_used: Callable[[], object] | None = None

    def when_used(self, callback: Callable[[], object]) -> None:
        """Call `callback` (once) when the first file is handed over: something will be parsed, so maybe embedded."""
        self._when_used = callback

    def start(self, path: Path, splitter: SplitterSettings, *, first: bool = False) -> Pending:
        """Hand `path` to a worker (or parse it now, with no workers); the result waits in `Pending`. `first`: ahead
        of the files waiting for a worker (an edited file during a big index)."""
        callback, self._when_used = self._when_used, None
        if callback is not None:
            callback()
        timeout = self.limits.parse_timeout
        if self.pool is None or self._here(path):
            return parse_here(path, self.limits, splitter, self.options)
        future = self.pool.submit(parse_and_split, (path, self.limits, splitter, self.options, self.cut),
                                  timeout=timeout + min(GRACE_S, timeout / 4), first=first)  # fmt: skip
        return Pending(future, path, timeout, self.memory_mib)

    def expect(self, files: int) -> None:
        """A job is about to hand over `files` files. More than a few, and none of them (nor, for `FEW_WINDOW_S`,
        another job's) is parsed here: the workers start at once, rather than after a few files parsed one by one in
        the job's thread, the first of them waiting for the splitter's imports (a run of 400 text files began ~0.8 s
        later, the agent's process importing beside the workers)."""
        if files > self._few.most:
            self._few.fill()

    def _here(self, path: Path) -> bool:
        """Whether `path` is one of a few small text files, parsed here while the workers are not running."""
        if self.pool is None or self.pool.running or path.suffix.lower() not in TEXT_EXTENSIONS:
            return False
        try:
            if path.stat().st_size > HERE_BYTES:
                return False
        except OSError:
            return False  # the worker meets the same error and says it
        return self._few.take(1)

    def keep_one_free(self, seconds: float) -> None:
        """Keep a worker for edited files (`start(first=True)`) for the next `seconds` (WorkerPool.keep_one_free)."""
        if self.pool is not None:
            self.pool.keep_one_free(seconds)

    @property
    def running(self) -> bool:
        return self.pool is not None and self.pool.running

    @property
    def started(self) -> int:
        return self.pool.started if self.pool is not None else 0

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def parse_here(
    path: Path, limits: LimitsConfig, splitter: SplitterSettings, options: ParseConfig | None = None
) -> Pending:
    """`path` parsed now, in the calling thread; its verdict waits in `Pending` as a worker's would."""
    future: Future[Parsed] = Future()
    try:
        future.set_result(parse_and_split(path, limits, splitter, options))
    except Exception as err:  # delivered by result(), where a worker's would be
        future.set_exception(err)
    return Pending(future, path, limits.parse_timeout, 0)
