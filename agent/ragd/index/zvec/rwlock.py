"""A phase-fair readers-writer lock: many readers together, or one writer alone, and neither side starves.

A writer that arrives holds off new readers; when it is done, every reader that waited goes before the next writer.
The index runs queries under `reading()` and writes under `writing()` (zvec allows one writer or many readers).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadWriteLock:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0  # active
        self._readers_waiting = 0
        self._writer = False  # active
        self._writers_waiting = 0
        self._readers_turn = False  # set when a writer leaves while readers wait: they go first
        self.serial = False  # readers one at a time too (`reading` is then `writing`)

    @contextmanager
    def reading(self) -> Iterator[None]:
        if self.serial:
            with self.writing():
                yield
            return
        with self._cond:
            self._readers_waiting += 1
            while self._writer or (self._writers_waiting and not self._readers_turn):
                self._cond.wait()
            self._readers_waiting -= 1
            self._readers += 1
            if self._readers_waiting == 0:
                self._readers_turn = False
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers or self._readers_turn:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._readers_turn = self._readers_waiting > 0
                self._cond.notify_all()
