"""Keep the resident process small: glibc's allocator told to hold fewer arenas, and to give freed memory back.

The agent runs some fifty threads (control connections, the embed queue's, the directory jobs', zvec's own), and
glibc gives each thread that allocates its own malloc arena (up to 8 per core); memory freed in an arena stays in
it. After an initial index the agent held 480 MiB of which about 160 MiB was such free memory (docs/benchmarks.md,
issue 14). So:

- `limit_arenas()` (at the start of `ragd run`, before any thread) caps the arenas at ARENAS: threads share them,
  which costs nothing measurable here (the agent's threads mostly wait; the heavy work is in worker processes);
- `release()` (each time the agent becomes idle) runs the garbage collector and `malloc_trim(0)`, which returns
  the free pages of every arena to the system.

Both are glibc calls made through ctypes; on another C library they do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys

log = logging.getLogger(__name__)

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


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
    """Cap glibc's malloc arenas at `arenas` for the threads started from now on. True if it took effect."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas)))


def release() -> bool:
    """Collect garbage and give the allocator's free pages back to the system. True if memory was returned."""
    gc.collect()
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(ctypes.c_size_t(0)))
