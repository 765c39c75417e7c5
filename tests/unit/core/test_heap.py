"""heap.settle: what a process holds after its imports leaves the cyclic collector's passes; cycles made later are
still collected; only in a process that manages its collector (`ragd run`). Run in a child process: freezing the
test runner's own objects would outlive the test."""

from __future__ import annotations

import json
import subprocess
import sys

from ragd import heap

CHILD = """
import gc, json, weakref
from ragd import heap

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)

before = gc.get_freeze_count()
heap.settle()          # a library caller's process (a test runner's): left as it is
unmanaged = gc.get_freeze_count(), gc.get_threshold()[0]
old = cycle()          # a cycle made before settle: frozen with the rest, kept
heap.manage()          # as `ragd run` does
heap.settle()
frozen = gc.get_freeze_count()
new = cycle()          # a cycle made after: collected as ever
gc.collect()
print(json.dumps({"before": before, "unmanaged": unmanaged, "frozen": frozen, "threshold": gc.get_threshold()[0],
                  "old_kept": old() is not None, "new_collected": new() is None}))
"""


def test_settle_freezes_what_is_held_and_later_cycles_are_still_collected() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60
    )
    seen = json.loads(out.stdout)
    assert seen["unmanaged"] == [0, 700]  # CPython's own
    assert seen["before"] == 0 and seen["frozen"] > 1000  # the imports' objects
    assert seen["threshold"] == heap.YOUNG
    assert seen["old_kept"], (
        "a frozen cycle is never collected: why settle runs before the work, not during it"
    )
    assert seen["new_collected"]
