"""A readers-writer lock: many readers together, or one writer alone.

zvec 0.8 deadlocked within seconds when one thread wrote while others queried the same collection once it had
been optimized (docs/zvec-notes.md), so the index runs queries under `reading()` and writes under `writing()`.
A waiting writer closes the turnstile, so a stream of readers cannot starve it; readers queue behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadWriteLock:
    def __init__(self) -> None:
        self._turnstile = threading.Lock()  # held by a writer from its arrival until it has the room
        self._room_empty = threading.Lock()  # held by the group of readers, or by one writer
        self._count_lock = threading.Lock()
        self._readers = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._turnstile:
            pass
        with self._count_lock:
            self._readers += 1
            if self._readers == 1:
                self._room_empty.acquire()
        try:
            yield
        finally:
            with self._count_lock:
                self._readers -= 1
                if self._readers == 0:
                    self._room_empty.release()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._turnstile:
            self._room_empty.acquire()
        try:
            yield
        finally:
            self._room_empty.release()
