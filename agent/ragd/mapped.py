"""Pages of mapped files taken out of this process's resident set; the page cache keeps them.

zvec maps its collection's files (the vector index, the scalar columns) and tantivy its segments; every page a
search or a compaction's copy touches then counts in the agent's RSS for as long as the file stays mapped: after
the compaction that builds a 200,000-chunk collection's HNSW graph, 645 MiB of the process's 961 MiB were such
pages (docs/benchmarks/history.md, issue 36). `give_back(folder)` advises the kernel that this process no longer
needs the pages of the files mapped below `folder` (`madvise(MADV_DONTNEED)`): their page table entries go, the
pages stay in the page cache (a page written through a shared map is marked dirty there and written back as
ever), and the next access maps what it reads again, a minor fault each, or a read if the kernel dropped it.

Only maps where that loses nothing are advised: read-only ones, and shared ones (the file is their backing). A
private writable map of a file may hold pages copied on write, which the advice would throw away: never touched.
(Nor would a private map written and then made read-only, as the loader does with a library's relocations: only
the files below the folder asked for are advised, which zvec maps read-only from the start.)
The maps are read from /proc/self/maps and then advised: had one been unmapped in between and its addresses given
to memory of another kind, the advice would zero that memory. So the caller holds what keeps the library that
mapped the files from unmapping any (for zvec: the index's lock that no query or write runs beside), and tantivy's
segments, which its own thread maps and unmaps when a commit is seen, are never advised. Anywhere but Linux (no
/proc/self/maps) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

MADV_DONTNEED = 4  # <sys/mman.h>, the same on every Linux architecture
_SAFE = {"r--s", "rw-s", "r--p"}  # map permissions whose pages a re-read gives back as they were

_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    _libc.madvise.restype = ctypes.c_int
except (OSError, AttributeError):
    _libc = None


def maps(folder: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """The (start, end) addresses of this process's maps of files below `folder` whose permissions make giving
    their pages back harmless (`_SAFE`)."""
    prefix = os.fspath(folder).rstrip("/") + "/"
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.readlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.rstrip("\n").split(maxsplit=5)
        if len(fields) < 6 or fields[1] not in _SAFE or not fields[5].startswith(prefix):
            continue
        start, _, end = fields[0].partition("-")
        found.append((int(start, 16), int(end, 16)))
    return found


def give_back(folder: str | os.PathLike[str]) -> int:
    """Take the pages of the files mapped below `folder` out of this process's resident set; the caller keeps
    them mapped meanwhile (above). Returns the bytes of the maps advised (0 where nothing is mapped or this cannot
    be done). Threads reading those maps meanwhile fault the pages in again."""
    if _libc is None:
        return 0
    done = 0
    for start, end in maps(folder):
        if _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_DONTNEED) == 0:
            done += end - start
        else:
            log.debug("madvise of %#x-%#x: %s", start, end, os.strerror(ctypes.get_errno()))
    return done
