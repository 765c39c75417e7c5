"""Opening, creating and deleting zvec collections: never in a way that lets a damaged one crash this process.

See health.py for how a collection is checked before zvec opens it here, and docs/zvec-notes.md for the errors
zvec gives (all mapped to IndexError_, a held lock to IndexBusy).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import zvec

from ...config import IndexConfig
from ...errors import IndexBusy, IndexError_
from ...model import EmbeddingIdentity
from ..backend import BUSY_HINT
from ..keyword import keywords
from . import health
from .schema import build_schema, schema_problem

log = logging.getLogger(__name__)


_init_lock = threading.Lock()
_initialized = False


def _ensure_init() -> None:
    """Configure zvec once per process, before the first collection is opened.

    One query thread: with zvec 0.8.0's default (one per core), a write or an optimize beside two or more
    queries deadlocked within seconds; with `query_threads=1` it never did in our stress runs (zvec-notes.md).
    """
    global _initialized
    with _init_lock:
        if not _initialized:
            try:
                zvec.init(query_threads=1, log_level=zvec.LogLevel.WARN)
            except RuntimeError as err:  # initialised elsewhere already: keep going, but say so
                log.warning("zvec was already initialised (%s): concurrent queries may deadlock", err)
            _initialized = True


@contextlib.contextmanager
def zvec_errors(op: str, path: Path) -> Iterator[None]:
    """zvec's exceptions during `op` as IndexError_ naming the collection."""
    try:
        yield
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise IndexError_(
            f"index {op} failed at {path}: {err}", "see the agent log; `ragd` can rebuild the index"
        ) from err


def check_statuses(statuses: Any, op: str, path: Path, *, missing_ok: bool = False) -> None:
    """zvec reports a failed write as a Status, not an exception: raise IndexError_ for the first that failed."""
    for st in statuses if isinstance(statuses, list) else [statuses]:
        if not st.ok() and not (missing_ok and st.code() == zvec.StatusCode.NOT_FOUND):
            raise IndexError_(f"index {op} failed at {path}: {st.message()}", "see the agent log")


class Resting(NamedTuple):
    """A resting collection: its document count, and the `flock` on its LOCK file, held as zvec holds it."""

    documents: int
    fd: int

    @classmethod
    def hold(cls, path: Path, documents: int) -> Resting:
        try:
            fd = os.open(path / "LOCK", os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # gone: waking will report what is wrong
            return cls(documents, -1)
        with contextlib.suppress(OSError):  # taken in the moment since the close: waking reports IndexBusy
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return cls(documents, fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # drops the flock


def _busy(path: Path) -> IndexBusy:
    return IndexBusy(f"the index at {path} is held by another process (a running ragd agent?)", BUSY_HINT)


def _open_error(path: Path, err: Exception) -> IndexError_:
    if "Can't lock" in str(err):
        return _busy(path)
    return IndexError_(f"the index at {path} is damaged: cannot open it: {err}", health.DAMAGED_HINT)


def _check_health(path: Path, read_only: bool) -> None:
    """Raise IndexError_ for a collection that would crash zvec in this process (see health.py)."""
    problem = health.cheap_problem(path)
    if problem is None and not health.stamp_matches(path):
        if health.held_for_writing(path):
            raise _busy(path)
        verdict = health.probe(path)
        log.info("checked the index at %s in a child process: %s", path, verdict.detail)
        if verdict.damaged:
            problem = verdict.detail
        elif read_only and verdict.detail.startswith("ok"):
            health.write_stamp(path)  # sound as probed: later read-only opens skip the probe
    if problem is not None:
        raise IndexError_(f"the index at {path} is damaged: {problem}", health.DAMAGED_HINT)


def segment_count(path: Path) -> int:
    """How many segments the collection at `path` has on disk (zvec 0.8: one numbered directory each)."""
    try:
        return sum(1 for entry in os.scandir(path) if entry.is_dir() and entry.name.isdigit())
    except OSError:
        return 0


COMPACTING, COMPACTED = ".compacting", ".compacted"  # beside a collection: the copy being made, the old one


def block_count(path: Path) -> int:
    """How many vector index blocks the collection at `path` holds on disk: zvec 0.8 writes one file
    (`embedding.index.N.proxima`) per block in the segment's directory, one more at each flush that wrote
    documents, until an optimize folds them."""
    try:
        return sum(
            1
            for seg in os.scandir(path)
            if seg.is_dir() and seg.name.isdigit()
            for entry in os.scandir(seg.path)
            if entry.name.startswith("embedding.index.") and entry.name.endswith(".proxima")
        )
    except OSError:
        return 0


def remove_debris(path: Path) -> None:
    """What a compaction of the collection at `path` left beside it (a copy not swapped in, an old collection
    not removed): deleted."""
    for suffix in (COMPACTING, COMPACTED):
        shutil.rmtree(path.with_name(path.name + suffix), ignore_errors=True)


def _recover(path: Path) -> None:
    """After a compaction cut short: the old collection back if the copy never took its place; debris removed."""
    old = path.with_name(path.name + COMPACTED)
    if not path.exists() and old.is_dir():
        log.warning("a compaction of %s was cut short: the collection before it is used", path)
        old.rename(path)
    remove_debris(path)


def open_collection(
    path: Path, identity: EmbeddingIdentity, cfg: IndexConfig, read_only: bool, kind: str | None = None
) -> zvec.Collection:
    """Open (or, writable and absent, create, with the vector index `kind`: schema.created_type when None)
    the collection at `path` for `identity`."""
    _ensure_init()
    if not read_only and not path.name.endswith(COMPACTING):
        _recover(path)
    if path.exists():
        _check_health(path, read_only)
        coll = _open_existing(path, read_only)
        if not read_only:
            health.clear_stamp(path)  # a crash while we hold it must make the next opener probe first
    elif read_only:
        raise IndexError_(f"there is no index at {path}", "start the agent once so that it builds the index")
    else:
        coll = _create(path, identity, cfg, kind)
    problem = schema_problem(coll.schema, identity)
    if problem:
        coll.close()
        raise IndexError_(f"the index at {path} cannot be used: {problem}", health.DAMAGED_HINT)
    return coll


def _open_existing(path: Path, read_only: bool) -> zvec.Collection:
    try:
        return zvec.open(str(path), zvec.CollectionOption(read_only=read_only))
    except (RuntimeError, ValueError, KeyError, OSError) as err:
        raise _open_error(path, err) from err


def _create(path: Path, identity: EmbeddingIdentity, cfg: IndexConfig, kind: str | None) -> zvec.Collection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return zvec.create_and_open(str(path), build_schema(identity, cfg, kind))
    except ValueError as err:
        if path.exists():  # another process created it meanwhile
            return _open_existing(path, read_only=False)
        raise IndexError_(f"cannot create the index at {path}: {err}", health.DAMAGED_HINT) from err
    except (RuntimeError, OSError) as err:
        raise _open_error(path, err) from err


def destroy(path: Path) -> bool:
    """Delete the collection directory at `path`, unless another process holds it. Returns whether it existed."""
    path = Path(path)
    if not path.exists():
        return False
    lock = path / "LOCK"
    fd = os.open(lock, os.O_RDWR) if lock.is_file() else None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise IndexBusy(
                    f"the index at {path} is held by another process (a running ragd agent?)", BUSY_HINT
                ) from None
        shutil.rmtree(path)
        keywords.destroy(path)
        health.clear_stamp(path)
    finally:
        if fd is not None:
            os.close(fd)
    log.info("deleted the index at %s", path)  # asked for (a rebuild); damage is warned of where it is found
    return True
