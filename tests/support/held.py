"""What a call leaves held (the bytes it allocated in one module that are still in use once it returns), and what
it holds for a while (its peak beyond what it keeps)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def held_by(module_file: str, call: Callable[[], T], *, frames: int) -> tuple[T, int]:
    """`call()`'s result, and the bytes of the blocks allocated with `module_file` among their `frames` innermost
    frames that are still held when it returns (not other threads' allocations). `call` runs once before, untraced:
    what a first call sets up once (imports, caches) is not counted. A block of 64 KiB or more is left out: the
    process's table of interned strings, resized when a name interned during the call crosses its bound, depending
    on what the process imported before."""
    call()
    gc.collect()
    tracemalloc.start(frames)
    try:
        result = call()
        mine = tracemalloc.Filter(True, module_file, all_frames=True)
        traces = tracemalloc.take_snapshot().filter_traces([mine])
    finally:
        tracemalloc.stop()
    return result, sum(t.size for t in traces.traces if t.size < 65536)


def held_meanwhile(call: Callable[[], T]) -> tuple[T, int]:
    """`call()`'s result, and the bytes it held at its peak beyond what is still held when it returns (the whole
    process's traced allocations: its other threads' too). `call` runs once before, untraced, as in `held_by`."""
    call()
    gc.collect()
    tracemalloc.start()
    try:
        result = call()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - kept
