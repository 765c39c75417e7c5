"""What the resident agent and `ragd run --once` share around a directory job: its context, and its outcome.

`Outcomes.done` is the per-directory boundary (the scheduler's done callback), the same for both drivers:

- a finished job is recorded in the tracker (the files' states, and the phase's tally);
- a job whose directory vanished meanwhile is forgotten: its parent's next job records the deletion;
- a directory the agent cannot read (or reach) is held out of search: the topmost such folder is recorded with
  "permission denied", its files and those below it leave the tracker and the index (their sidecars stay), and
  the next job that finishes there (the watcher sees the chmod) brings the subtree back from its sidecars;
- any other failure is recorded as the directory's error, where `status` and the run's summary show it.

A job that found its folder empty, with a store left from before, removes that store (sidecar.drop_emptied; after
a deletion, the index writer does it once the change note is applied).

The resident agent then follows up (`FollowUps`): the job's change note goes to the index writer at once, the
subdirectories it began tracking are walked and queued, the parent of a vanished directory is looked at again, and
a failed directory (or the first failed file due for a retry) runs again later. `run --once` follows up on nothing:
its change notes wait for the index sync at the end, its walk found the subdirectories already, and a failed
directory stays failed until the next run.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..config import Config
from ..errors import RagdError
from ..paths import root_of
from ..pipeline import mushroom, sidecar
from ..pipeline.dirjob import DirResult, JobContext
from ..pipeline.filerecord import STORE_GONE_S, store_went
from ..pipeline.identity import Identify, fallback
from ..pipeline.outcome import MovedFromFn, SubmitFn
from ..pipeline.parse import SUPPORTED_EXTENSIONS
from ..pipeline.parse.image import IMAGE_EXTENSIONS
from ..pipeline.parse.ocr import unavailable as ocr_unavailable
from ..pipeline.scan import PERMISSION_DENIED, Ignore, unreadable, walk_dirs
from ..pipeline.sidecar import parse_stamp, utc_stamp
from ..pipeline.statcache import StatCache
from ..pipeline.workers import Parsers
from ..vocabulary import FileState
from .changes import ChangeLog
from .scheduler import Scheduler
from .tracker import Tracker

log = logging.getLogger(__name__)

FILE_RETRY_SLACK_S = 0.5  # a directory runs this long after its first failed file is due, so that it is due


FORMATS = f"{zlib.crc32(' '.join(sorted(SUPPORTED_EXTENSIONS)).encode()):08x}"  # the file types read


# the files whose SKIPPED verdict OCR can change: an image, a PDF without a text layer
OCR_READS = IMAGE_EXTENSIONS | {".pdf"}


def reads_by_ocr(name: str) -> bool:
    """Whether OCR may read the file `name` (its extension, case-insensitive, as the parsers choose)."""
    return os.path.splitext(name)[1].lower() in OCR_READS


def skip_policy(config: Config, ocr: bool = True) -> str:
    """What a SKIPPED verdict depends on: a different policy (version, limits, a converter) re-evaluates it. `ocr`:
    the file is one OCR may read (`reads_by_ocr`), whose policy says whether OCR loads. Only such a file's asks it:
    finding out takes a child process (parse/ocr.py, ~0.45 CPU-seconds), which a run of text files, some of them
    skipped (empty, too large), need not start."""
    lim = config.limits
    return (
        f"ragd {__version__}; max_file_size={lim.max_file_size}; max_text_chars={lim.max_text_chars}; "
        f"soffice={shutil.which('soffice') is not None}; "
        + (f"ocr={ocr_unavailable(config.parse) is None}; " if ocr else "")
        + f"named-text=1; formats={FORMATS}"
    )  # OCR turned on (or installed) re-reads the images and scanned PDFs it skipped; named-text: README & co.;
    # formats: a type newly supported (.odt) is read where it was skipped as unsupported


def policies(config: Config) -> Callable[[str], str]:
    """The skip policy of each file name: each of its two forms found out once, when first asked."""
    found: dict[bool, str] = {}

    def policy(name: str) -> str:
        ocr = reads_by_ocr(name)
        if ocr not in found:
            found[ocr] = skip_policy(config, ocr)
        return found[ocr]

    return policy


def real_roots(roots: Iterable[Path]) -> tuple[Path, ...]:
    """The roots with every symbolic link resolved: a linked file whose target lies outside all of them is skipped."""
    return tuple(Path(os.path.realpath(r)) for r in roots)


def job_context(
    config: Config,
    submit: SubmitFn,
    ignore: Ignore,
    roots: Iterable[Path] = (),
    *,
    force: bool = False,
    stat_cache: StatCache | None = None,
    parsers: Parsers | None = None,
    identify: Identify = fallback,
    moved_from: MovedFromFn | None = None,
) -> JobContext:
    return JobContext(config, submit, ignore, policies(config), force=force,
                      roots=real_roots(roots), stat_cache=stat_cache, parsers=parsers,
                      identify=identify, moved_from=moved_from)  # fmt: skip


@dataclass(frozen=True)
class FollowUps:
    """What the resident agent does once an outcome is recorded (`run --once` does none of it)."""

    scheduler: Scheduler  # queues the new subdirectories' jobs and the retries
    roots: Callable[[], Sequence[Path]]  # the roots watched now
    hand_note: Callable[[Path], None]  # the index writer applies a job's change note
    # ... and any other note found in the job's folder, unless it knows of it already (`Indexer.offer`)
    offer_note: Callable[[Path], object]
    look_again: Callable[[Path], None]  # a directory to reconcile again soon (the parent of a vanished one)
    subdirs_found: Callable[[], object]  # a job began tracking subdirectories: the watcher checks them
    retry_dir_s: float  # a directory whose job failed runs again after this
    changes: ChangeLog  # the journal of what changed (for MCP: recent changes, change announcements)
    out_of_search: Callable[[Path], object]  # a folder that cannot be read: the index drops its subtree
    back_in_search: Callable[[Path], object]  # readable again: its subtree is served from its sidecars
    watch_below: Callable[[Path], object]  # ... and watched again, the folders below it too (watcher.py)
    # a folder found with no store: the index drops what is gone below it
    prune_gone: Callable[[Path], object]


class Outcomes:
    """The per-directory boundary: what a finished, vanished or failed directory job leaves behind."""

    def __init__(self, tracker: Tracker, ignore: Ignore, follow_ups: FollowUps | None = None) -> None:
        self.tracker = tracker
        self.ignore = ignore
        self.follow_ups = follow_ups

    def done(self, directory: Path, result: DirResult | None, err: BaseException | None) -> None:
        """The scheduler's done callback: exactly one of `result` and `err` is set."""
        if result is not None:
            self._finished(result)
        elif unreadable(directory):
            self._denied(directory)
        elif vanished(directory, err):
            self._vanished(directory)
        else:
            self._failed(directory, err)

    def step(self, result: DirResult) -> None:
        """A step of a job that reports as it goes (a big folder, dirjob.py): its files' states and the phase's
        tally move, and its change note goes to the index writer at once (the rest waits for the job's end)."""
        self.tracker.record_step(result)
        fu = self.follow_ups
        if fu is None:
            return
        fu.changes.record(result)
        if result.mushroom is not None:
            fu.hand_note(result.mushroom)

    def _finished(self, result: DirResult) -> None:
        back = self.tracker.is_held_out(result.directory)
        self.tracker.record(result)
        if gone(result.directory):
            # deleted while its job ran: the deletion may have been handled (and the directory forgotten) before
            # this result came in, which would leave what the job saw (its files, FAILED ones too) tracked for ever
            self._vanished(result.directory)
            return
        if not (
            result.files or result.subdirs or result.mushroom
        ):  # emptied before (an earlier ragd kept it)
            sidecar.drop_emptied(result.directory)
        fu = self.follow_ups
        if fu is None:
            return
        fu.changes.record(result)
        if back:
            self._readable_again(result.directory, fu)
        if result.mushroom is not None:
            fu.hand_note(result.mushroom)
        if result.storeless:  # replaced, or emptied with its store, while the agent did not look (dirjob.py)
            fu.prune_gone(result.directory)
        # A note applied in a folder that was then moved, before its flush deleted it, came along with the folder:
        # the writer deletes it at its old path (gone), and the watcher passes over the agent's own notes. Applied
        # again here (idempotent), and then deleted where it is.
        for note in mushroom.pending(result.directory):
            fu.offer_note(note)
        for sub in result.new_subdirs:
            dirs = list(walk_dirs(sub, self.ignore))
            self.tracker.add_to_phase(dirs)
            # a folder whose job already runs is not run again for this: a folder moved in as a whole (a mail
            # export, 30,000 notes) was listed twice, its second job reading every entry at the end of the first
            fu.scheduler.enqueue(dirs, urgent=True, again=False)
        if result.new_subdirs:
            fu.subdirs_found()
        retry = soonest_retry(result)
        if retry is not None:
            due = time.monotonic() + max(0.0, retry - time.time()) + FILE_RETRY_SLACK_S
            fu.scheduler.retry_later(result.directory, due)

    def _denied(self, directory: Path) -> None:
        """`directory` cannot be read, nor anything below it: the topmost such folder under its root is held out."""
        fu = self.follow_ups
        top = directory
        while (
            (fu is None or root_of(top.parent, fu.roots())) and top.parent != top and unreadable(top.parent)
        ):
            top = top.parent
        if not self.tracker.record_denied(top, PERMISSION_DENIED, utc_stamp()):
            return  # known already (a folder below it, or the watcher saw it twice)
        log.warning("%s cannot be read (permission denied): its files are out of search until the agent's user "
                    "may read it", top)  # fmt: skip
        if fu is not None:
            fu.out_of_search(top)

    def _readable_again(self, directory: Path, fu: FollowUps) -> None:
        """A folder held out of search can be read again: its subtree is served from its sidecars (nothing is
        embedded again), and the folders below it are looked at (the tracker forgot their files)."""
        log.info("%s can be read again: its files are back in search", directory)
        fu.back_in_search(directory)
        fu.watch_below(directory)
        # its folders, and itself again: what was written in it before its watch was made is seen now
        again = list(walk_dirs(directory, self.ignore))
        self.tracker.add_to_phase(again)
        fu.scheduler.enqueue(again)

    def _vanished(self, directory: Path) -> None:
        self.tracker.forget(directory)
        fu = self.follow_ups
        if fu is not None:
            fu.changes.removed(directory)
        parent = directory.parent
        if fu is not None and root_of(parent, fu.roots()) and not gone(parent):
            fu.look_again(parent)

    def _failed(self, directory: Path, err: BaseException | None) -> None:
        fu = self.follow_ups
        if store_went(err):
            # its store went while it ran: the folder being deleted (`rm -r` takes `.rag/` before the folder), or
            # `.rag/` deleted alone. Not an error of the agent's: looked at again soon (gone by then: forgotten)
            log.info(
                "%s: its sidecars went while its job ran; looked at again in %.0f s", directory, STORE_GONE_S
            )
            if fu is not None:
                fu.scheduler.retry_later(directory, time.monotonic() + STORE_GONE_S)
            return
        reason = failure_reason(err)
        self.tracker.record_error(directory, reason)
        internal = (
            None if isinstance(err, RagdError | OSError) else err
        )  # ragd's own fault: log the traceback
        retry = "" if fu is None else f" (retry in {fu.retry_dir_s:.0f} s)"
        log.error("job for %s failed: %s%s", directory, reason, retry, exc_info=internal)
        if fu is not None:
            fu.scheduler.retry_later(directory, time.monotonic() + fu.retry_dir_s)


def gone(directory: Path) -> bool:
    """`directory` is no directory now. One the agent may not reach (a folder above it closed) is not gone: that
    folder's job holds it out of search (pathlib's `is_dir` raised PermissionError there)."""
    try:
        return not stat.S_ISDIR(os.stat(directory).st_mode)
    except PermissionError:
        return False
    except OSError:
        return True


def vanished(directory: Path, err: BaseException | None) -> bool:
    """The job failed because its directory is gone: it is no directory now, or the error names the directory
    itself. A missing path inside it (a subdirectory's store, say) is a failure of the job like any other."""
    if gone(directory):
        return True
    if not isinstance(err, FileNotFoundError | NotADirectoryError) or err.filename is None:
        return False
    return Path(os.fsdecode(err.filename)) == directory


def failure_reason(err: BaseException | None) -> str:
    """What a failed directory job reports: the error's own words, or what went wrong inside ragd."""
    if isinstance(err, RagdError | OSError):
        return str(err)
    return f"internal error: {type(err).__name__}: {err}"


def soonest_retry(result: DirResult) -> float | None:
    """When the first of the job's FAILED files is due for its retry (epoch seconds; None: none waits for time)."""
    stamps = [
        parse_stamp(f.retry_at) for f in result.files if f.final_state == FileState.FAILED and f.retry_at
    ]
    stamps += [parse_stamp(at) for at in result.retries]  # those of the steps it reported before
    times = [t for t in stamps if t is not None]
    return min(times) if times else None
