"""One embedding queue shared by every directory job: batches texts across callers, bounded concurrency.

Callers block in `embed(texts)`. Their texts wait in one FIFO; each of `concurrency` worker threads takes up
to `batch_size` waiting texts (from as many callers as it takes to fill the batch, splitting a caller's texts
over several batches when they do not fit), calls the embedder once and hands each caller its rows. A failed
batch fails exactly the callers that had texts in it; their texts still waiting are dropped, other callers are
untouched.

Every row is checked here, whatever the provider (`base.row_problems`): a zero, NaN or infinite vector never
reaches a caller. A caller with such a row gets an EmbedError naming the embedder and what was wrong, and the
other callers of the same batch get their vectors: one bad text fails its own file, never its neighbours.

An embedder that is down (a batch failed with EmbedUnavailable: no answer, or only 5xx or 429, through all its
retries) is held down: every text waiting fails at once with the same error, and so does every text submitted for
the next `down_pause` seconds (`embedding.down_pause`, doubling while it stays down, up to DOWN_GROWTH times
that). Then one batch is sent as a probe, the others waiting behind it: answered, the embedder is up again;
failed, it is held down longer. `try_now()` (a person's `ragctl sync`) ends the pause: the next batch is the
probe. Without that, a folder of 2,000 files met an API outage batch by batch, each batch through its retries and
timeouts, for minutes; now its files are FAILED within one batch's retries, each retried later (pipeline/outcome.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

import numpy as np

from ...errors import EmbedError, EmbedRateLimited, EmbedUnavailable
from .base import Embedder, check_vectors, invalid_vectors_error, row_problems, shut_down_error, source_of

log = logging.getLogger(__name__)

DOWN_GROWTH = 10.0  # an embedder found down again and again is held down up to this many times `down_pause`


@dataclass(frozen=True)
class EmbedStats:
    texts_embedded: int = 0  # texts handed to their callers with a usable vector
    requests: int = 0  # batches sent to the embedder
    retries: int = 0  # attempts the embedder retried (a provider with no retries reports 0)
    failed_batches: int = 0  # batches that failed at least one caller (the request, or some of its rows)
    last_error: str | None = None
    queued: int = 0  # texts waiting for a worker
    in_flight: int = 0  # texts in batches being embedded now
    rejected: int = 0  # texts whose vector came back unusable (zero, NaN, infinite)
    last_error_at: float | None = None  # when a batch last failed (time.time())
    last_ok_at: float | None = None  # when the embedder last answered a batch
    down_until: float | None = None  # held down until then (time.time()): texts fail at once, none is sent
    rate_limited: bool = False  # the last failure was the API's 429 through all retries (EmbedRateLimited)


@dataclass(eq=False)
class _Piece:
    """One caller's request: its texts, where the next unsent one is, and its result being filled in."""

    texts: Sequence[str]
    result: np.ndarray
    future: Future[np.ndarray] = field(default_factory=Future)
    sent: int = 0  # texts handed to workers so far
    remaining: int = 0  # texts whose vectors have not arrived yet

    def __post_init__(self) -> None:
        self.remaining = len(self.texts)


@dataclass(frozen=True)
class _Slice:
    piece: _Piece
    start: int
    end: int


class EmbedQueue:
    """Thread-safe, blocking front of an `Embedder`. Use one per agent; `close()` it at shutdown."""

    def __init__(
        self, embedder: Embedder, batch_size: int, concurrency: int, *, down_pause: float = 15.0
    ) -> None:
        if batch_size < 1 or concurrency < 1:
            raise ValueError("batch_size and concurrency must be at least 1")
        self.embedder = embedder
        self.down_pause = down_pause
        self.batch_size = batch_size
        self._pending: deque[_Piece] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._queued = 0
        self._in_flight = 0
        self._active: set[_Piece] = set()  # callers not answered yet
        self._texts_embedded = 0
        self._requests = 0
        self._failed_batches = 0
        self._rejected = 0
        self._last_error: str | None = None
        self._last_error_at: float | None = None
        self._last_ok_at: float | None = None
        self._rate_limited = False
        # held down (see the module's doc): until when (monotonic), for how long, with which error; a probe out
        self._down_until: float | None = None
        self._down_for = 0.0
        self._down_error: EmbedUnavailable | None = None
        self._probing = False
        self._workers = [
            threading.Thread(target=self._work, name=f"embed-{i}", daemon=True) for i in range(concurrency)
        ]
        for worker in self._workers:
            worker.start()

    @property
    def stats(self) -> EmbedStats:
        with self._cond:
            return EmbedStats(
                self._texts_embedded,
                self._requests,
                int(getattr(self.embedder, "retries", 0)),
                self._failed_batches,
                self._last_error,
                self._queued,
                self._in_flight,
                self._rejected,
                self._last_error_at,
                self._last_ok_at,
                None if self._down_until is None else time.time() + self._down_until - time.monotonic(),
                self._rate_limited,
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for `texts`, shape (len(texts), dimension), float32. Raises EmbedError."""
        return self.submit(texts).result()

    def submit(self, texts: Sequence[str], *, priority: bool = False) -> Future[np.ndarray]:
        """Queue `texts`; the future resolves to their vectors or fails with EmbedError.

        Submitting several callers' texts before waiting lets them share requests. `priority` puts them at the
        head of the queue (a search query must not wait behind an indexing backlog).
        """
        piece = _Piece(list(texts), np.empty((len(texts), self.embedder.dimension), dtype=np.float32))
        if not piece.texts:
            piece.future.set_result(piece.result)
            return piece.future
        with self._cond:
            if self._closed:
                raise shut_down_error()
            down = self._held_down()
            if down is not None:  # not sent: it would fail the same way
                piece.future.set_exception(down)
                return piece.future
            if priority:
                self._pending.appendleft(piece)
            else:
                self._pending.append(piece)
            self._active.add(piece)
            self._queued += len(piece.texts)
            self._cond.notify()
        return piece.future

    def close(self) -> None:
        """Stop the workers and fail every caller still waiting with EmbedError("embedder shut down")."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            outstanding, self._active = list(self._active), set()
            self._pending.clear()
            self._queued = 0
            self._cond.notify_all()
        closer = getattr(self.embedder, "close", None)
        if callable(closer):
            closer()  # interrupts retry waits; the in-flight batches then fail promptly
        error = shut_down_error()
        for piece in outstanding:
            _fail(piece, error)
        for worker in self._workers:
            worker.join(timeout=5.0)

    def _work(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            self._run(batch)

    def _held_down(self) -> EmbedUnavailable | None:
        """(Under the lock.) The error to fail texts with at once while the embedder is held down; None once that
        time is over (the next batch is a probe)."""
        left = 0.0 if self._down_until is None else self._down_until - time.monotonic()
        err = self._down_error
        if err is None or left <= 0:
            return None
        return type(err)(f"{err.message}; not tried again for {left:.0f} s", err.hint)

    def _take(self) -> list[_Slice] | None:
        """Up to batch_size waiting texts, in arrival order; None once closed. While the embedder is held down
        after a probe was sent, the other workers wait for its answer."""
        with self._cond:
            while (not self._pending or self._probing) and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            if self._down_until is not None:
                self._probing = True  # held down until now: this batch tells whether it is up again
            batch: list[_Slice] = []
            room = self.batch_size
            while room and self._pending:
                piece = self._pending[0]
                take = min(room, len(piece.texts) - piece.sent)
                batch.append(_Slice(piece, piece.sent, piece.sent + take))
                piece.sent += take
                room -= take
                if piece.sent == len(piece.texts):
                    self._pending.popleft()
            taken = self.batch_size - room
            self._queued -= taken
            self._in_flight += taken
            if self._pending:
                self._cond.notify()  # more work: wake another idle worker
            return batch

    def _run(self, batch: list[_Slice]) -> None:
        texts = [t for s in batch for t in s.piece.texts[s.start : s.end]]
        source = source_of(self.embedder)
        try:
            vectors = check_vectors(self.embedder.embed(texts), len(texts), self.embedder.dimension, source)
        except EmbedError as err:
            self._failed(batch, len(texts), err)
            return
        except (
            Exception
        ) as err:  # the worker loop's boundary: a bug in an embedder fails its callers, not the queue
            log.exception("embedder %s failed unexpectedly", self.embedder.model_name)
            self._failed(
                batch,
                len(texts),
                EmbedError(
                    f"{source} failed: {type(err).__name__}: {err}",
                    "see the agent's log",
                ),
            )
            return
        self._deliver(batch, vectors, source)

    def _deliver(self, batch: list[_Slice], vectors: np.ndarray, source: str) -> None:
        """Hand each caller its rows; a caller with an unusable row gets an EmbedError instead."""
        problems = row_problems(vectors)
        good: list[_Slice] = []
        bad: list[tuple[_Piece, EmbedError]] = []
        row = 0
        for s in batch:
            n = s.end - s.start
            mine = problems[row : row + n]
            if any(mine):
                bad.append((s.piece, invalid_vectors_error(source, self.embedder.model_name, mine)))
            else:
                s.piece.result[s.start : s.end] = vectors[row : row + n]
                good.append(s)
            row += n
        for _, err in bad:
            log.warning("embedding a batch of %d texts: %s", len(vectors), err)
        with self._cond:
            self._requests += 1
            self._texts_embedded += sum(s.end - s.start for s in good)
            self._in_flight -= len(vectors)
            done = []
            for s in good:
                s.piece.remaining -= s.end - s.start
                if s.piece.remaining == 0:
                    done.append(s.piece)
                    self._active.discard(s.piece)
            if bad:
                self._failed_batches += 1
                self._rejected += sum(p is not None for p in problems)
                self._last_error = str(bad[0][1])
                self._rate_limited = False
                self._drop([piece for piece, _ in bad])
            # it answered: a text whose vector is unusable fails its own file, not the embedder's health
            self._last_ok_at = time.time()
            if self._down_until is not None:
                log.info("%s answers again", source)
            self._down_until, self._down_for, self._down_error = None, 0.0, None
            self._end_probe()
        for piece in done:
            _settle(piece)
        for piece, err in bad:
            _fail(piece, err)

    def _failed(self, batch: list[_Slice], count: int, err: EmbedError) -> None:
        log.warning("embedding a batch of %d texts failed: %s", count, err)
        pieces = list(dict.fromkeys(s.piece for s in batch))
        waiting: list[_Piece] = []
        down: EmbedUnavailable | None = None
        with self._cond:
            self._requests += 1
            self._failed_batches += 1
            self._in_flight -= count
            self._last_error = str(err)
            self._last_error_at = time.time()
            self._rate_limited = isinstance(err, EmbedRateLimited)
            self._drop(pieces)
            if isinstance(err, EmbedUnavailable) and self.down_pause > 0 and not self._closed:
                self._hold_down(err)
                waiting = list(self._pending)  # they would fail the same way, one batch after another
                self._drop(waiting)
                down = self._held_down()
            elif self._probing:  # the probe met another error (say, a text refused): not a sign either way
                self._end_probe()
        for piece in pieces:
            _fail(piece, err)
        for piece in waiting:
            _fail(piece, down or err)

    def _hold_down(self, err: EmbedUnavailable) -> None:
        """(Under the lock.) The embedder is down: hold it down, for longer each time in a row it is found so."""
        self._down_for = min(self.down_pause * DOWN_GROWTH, max(self.down_pause, self._down_for * 2))
        self._down_until = time.monotonic() + self._down_for
        self._down_error = err
        log.warning("%s is down: the texts waiting fail now, and every text for the next %.0f s (then one batch "
                    "is tried)", source_of(self.embedder), self._down_for)  # fmt: skip
        self._end_probe()

    def try_now(self) -> None:
        """End a pause of an embedder held down: the next batch is sent, as the probe."""
        with self._cond:
            if self._down_until is not None:
                self._down_until = time.monotonic()

    def _end_probe(self) -> None:
        """(Under the lock.) The probe's answer is in: the other workers go on."""
        if self._probing:
            self._probing = False
            self._cond.notify_all()

    def _drop(self, pieces: list[_Piece]) -> None:
        """Forget failed callers (under the lock): their texts still waiting are not sent for nothing."""
        for piece in pieces:
            if piece.sent < len(piece.texts) and not self._closed:
                self._queued -= len(piece.texts) - piece.sent
                piece.sent = len(piece.texts)
                self._pending.remove(piece)
            self._active.discard(piece)


def _settle(piece: _Piece) -> None:
    with contextlib.suppress(InvalidStateError):  # already failed by close() or by another batch
        piece.future.set_result(piece.result)


def _fail(piece: _Piece, err: EmbedError) -> None:
    with contextlib.suppress(InvalidStateError):
        piece.future.set_exception(err)
