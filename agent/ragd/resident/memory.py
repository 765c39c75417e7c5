"""Keep the resident process small: glibc's allocator told to hold fewer arenas, and to give freed memory back.

The agent runs some fifty threads (control connections, the embed queue's, the directory jobs', zvec's own), and
glibc gives each thread that allocates its own malloc arena (up to 8 per core); memory freed in an arena stays in
it. After an initial index the agent held 480 MiB of which about 160 MiB was such free memory (docs/benchmarks.md,
issue 14). So:

- `limit_arenas()` (at the start of `ragd run`, before any thread) caps the arenas at ARENAS: threads share them,
  which costs nothing measurable here (the agent's threads mostly wait; the heavy work is in worker processes);
- `release()` (each time the agent becomes idle) runs the garbage collector and `malloc_trim(0)`, which returns
  the free pages of every arena to the system;
- `limit_arenas()` also fixes the size from which an allocation gets pages of its own (`M_MMAP_THRESHOLD`, at
  glibc's default): left to itself glibc raises it to the size of each such block freed, up to 32 MiB, so that the
  next ones come from the arenas, where what they leave when freed stays. The agent's first big blocks (the model's
  arrays inflated once, 62 MiB) raised it for its whole life;
- `compact()` (from `release()`, once jobs have recorded COMPACT_AFTER files since the last time, at most once in
  COMPACT_EVERY_S: one skipped for that is made by the idle agent once it is due, `compact_due`) copies the records
  the agent keeps for every file (the tracker's states, the stat cache's and the verifier's records: `register`ed),
  one name string shared by the three. Python's small-object allocator gives an arena (1 MiB) back only when every
  object in it is freed: the records a big folder's job made, each beside the job's own short-lived objects, held
  arenas that were mostly free (30,000 notes: 103 arenas for 62 MiB of objects). Copied at a quiet moment they fill
  the fullest arenas, and the emptied ones go back to the system (89 arenas, 14 MiB less; docs/benchmarks/history.md);
- `trim_now_and_then()` (from each step of a big folder's job, which never leaves the agent idle for minutes, and
  after each flush of a big folder's re-sync, `IndexSync(give_back=…)`) returns the arenas' free pages at most every
  TRIM_EVERY_S: at 30,000 notes the main arena held 36 MiB of free
  memory at the job's end, given back only once the agent was idle (docs/benchmarks/history.md, issue 36).

Both are glibc calls made through ctypes; on another C library they do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
import threading
import time
import weakref
from typing import Protocol

log = logging.getLogger(__name__)

ARENAS = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's default, kept fixed (bytes)
TRIM_EVERY_S = 10.0
COMPACT_AFTER = 5_000  # files recorded by jobs since the last compaction
COMPACT_EVERY_S = 60.0  # at most one compaction in this time (100,000 files: ~0.15 s of CPU each)
_M_ARENA_MAX = -8  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - glibc only (musl has no malloc_trim)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` for the threads started from now on, and keep big blocks in pages of
    their own (MMAP_THRESHOLD, fixed). True if both took effect."""
    if _LIBC is None:
        return False
    capped = _LIBC.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas))
    return bool(capped and _LIBC.mallopt(ctypes.c_int(_M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD)))


class Compactable(Protocol):
    def compact(self) -> int:
        """Copy the records kept for each file (a name shared by interning it); return how many were copied."""
        ...


_compactable: weakref.WeakSet[Compactable] = weakref.WeakSet()
_recorded = 0  # files recorded since the last compaction
_compacted_at: float | None = None
_recorded_lock = threading.Lock()


def register(holder: Compactable) -> None:
    """`holder`'s records are copied by `compact()` for as long as it lives."""
    _compactable.add(holder)


def recorded(files: int) -> None:
    """A job recorded `files` files (their records made anew, among its own short-lived objects)."""
    global _recorded
    with _recorded_lock:
        _recorded += files


def compact(after: int | None = None, every: float | None = None) -> int:
    """Copy the registered holders' records, if jobs recorded at least `after` (COMPACT_AFTER) files since the last
    time and that was at least `every` (COMPACT_EVERY_S) seconds ago (a job of a huge folder records all its files at
    each edit in it). Returns the records copied (0: not due)."""
    global _recorded, _compacted_at
    started = time.monotonic()
    with _recorded_lock:
        if not _due(started, after, every):
            return 0
        _recorded, _compacted_at = 0, started
    copied = sum(holder.compact() for holder in list(_compactable))
    log.debug("%d records copied in %.3f s", copied, time.monotonic() - started)
    return copied


def compact_due(after: int | None = None, every: float | None = None) -> bool:
    """`compact()` would copy the records now. The agent's main loop asks once a second while it is idle: a
    compaction due by its count but skipped because the last one was less than COMPACT_EVERY_S ago (a big folder
    renamed just after its job) is made once that time has passed, not at the agent's rest or its next job."""
    with _recorded_lock:
        return _due(time.monotonic(), after, every)


def _due(now: float, after: int | None, every: float | None) -> bool:
    after = COMPACT_AFTER if after is None else after
    every = COMPACT_EVERY_S if every is None else every
    return _recorded >= after and (_compacted_at is None or now - _compacted_at >= every)


def release() -> bool:
    """Copy the per-file records if due, collect garbage and give the allocator's free pages back to the system.
    True if memory was returned."""
    compact()
    gc.collect()
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(ctypes.c_size_t(0)))


_trim_lock = threading.Lock()
_trimmed_at = 0.0


def trim_now_and_then(every: float = TRIM_EVERY_S) -> bool:
    """Give the arenas' free pages back (`malloc_trim`, without a collection of garbage: a few milliseconds) unless
    that was done less than `every` seconds ago. True if it ran."""
    global _trimmed_at
    now = time.monotonic()
    with _trim_lock:
        if _LIBC is None or now - _trimmed_at < every:
            return False
        _trimmed_at = now
    _LIBC.malloc_trim(ctypes.c_size_t(0))
    return True
