"""The cyclic garbage collector in a process that imports much, then allocates fast.

CPython's collector runs a young pass every 700 new container objects and, every so often, a full pass over every
object the process holds. After its imports the agent holds some hundreds of thousands (pydantic, zvec, the
embeddings API's client with its ~800 modules), none of them ever garbage, and a directory job makes and drops
objects at a high rate (entries, chunks, responses): the full passes were 6 % of the agent's CPU on the referee's
run (`perf`, docs/benchmarks/history.md), all of it re-reading objects that live as long as the process.

`settle()`, once a process's imports are done (and again after a large import made later, such as the embeddings
API's client): what exists now is moved out of the collector's passes (`gc.freeze`, meant for this), and the
young generation's threshold is raised, so a pass runs every YOUNG new containers. Garbage without cycles is
freed at once as ever (reference counts); cycles are still collected, a little later, except those among what was
frozen. So only a process that `manage()`s its collector settles: `ragd run`'s (edges/cli.py); a library caller's,
such as a test runner's that runs ragd's functions over and over, is left as it is.
"""

from __future__ import annotations

import gc

YOUNG = 20_000  # new container objects between two young passes (CPython's default: 700)
_managed = False


def manage() -> None:
    """This process is ragd's (`ragd run`): its `settle()` calls take effect."""
    global _managed
    _managed = True


def settle() -> None:
    """What this process holds now stays out of the collector's passes; young passes every YOUNG containers.
    Nothing unless the process `manage()`s its collector."""
    if not _managed:
        return
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
    gc.freeze()
