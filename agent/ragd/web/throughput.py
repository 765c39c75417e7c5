"""Samples of the agent's progress every PERIOD_S seconds, kept for WINDOW_S: the page's throughput chart (texts
embedded and files done per second) and its estimate of the time left in a phase."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

PERIOD_S = 2.0
WINDOW_S = 600.0  # the chart's last ten minutes
ETA_WINDOW_S = 120.0  # the time left is estimated from the rate of the last two minutes


@dataclass(frozen=True)
class Sample:
    at: float  # time.time()
    texts: int  # texts the embedder has embedded since the agent started
    phase: int  # which phase the two counts below belong to (a new phase starts them at 0)
    dirs_done: int
    files_done: int
    errors: int = 0  # batches the embedder failed since the agent started


class Throughput:
    def __init__(self, get_rt: Callable[[], Resident]) -> None:
        self._get_rt = get_rt
        self._samples: deque[Sample] = deque(maxlen=int(WINDOW_S / PERIOD_S) + 1)
        self._lock = threading.Lock()

    def sample(self) -> None:
        """Take a sample of the agent now."""
        rt = self._get_rt()
        prog = rt.tracker.progress
        stats = rt.embed.stats
        self.record(Sample(time.time(), stats.texts_embedded, id(prog), prog.dirs_done, prog.files_done,
                           stats.failed_batches))  # fmt: skip

    def record(self, sample: Sample) -> None:
        with self._lock:
            self._samples.append(sample)

    async def run(self) -> None:
        """Sample until cancelled (the event loop's end)."""
        while True:
            self.sample()
            await asyncio.sleep(PERIOD_S)

    def series(self) -> list[dict[str, Any]]:
        """Per interval between two samples: when it ended, texts embedded per second, files done per second."""
        with self._lock:
            samples = list(self._samples)
        out = []
        for a, b in itertools.pairwise(samples):
            dt = b.at - a.at
            if dt <= 0:
                continue
            files = b.files_done - a.files_done if a.phase == b.phase else b.files_done
            out.append({"at": round(b.at, 1), "texts_per_s": round(max(0, b.texts - a.texts) / dt, 2),
                        "files_per_s": round(max(0, files) / dt, 2)})  # fmt: skip
        return out

    def errors_since(self, seconds: float) -> int:
        """Batches the embedder failed in the last `seconds` (as far as the samples go back)."""
        with self._lock:
            samples = list(self._samples)
        if not samples:
            return 0
        last = samples[-1]
        first = next((s for s in samples if s.at >= last.at - seconds), last)
        return last.errors - first.errors

    def time_left(self, dirs_total: int, dirs_done: int) -> float | None:
        """Seconds left in the current phase at the pace of the last ETA_WINDOW_S; None while it cannot be told
        (no phase, no progress yet, or too few samples)."""
        with self._lock:
            samples = list(self._samples)
        if len(samples) < 2 or dirs_done >= dirs_total:
            return None
        last = samples[-1]
        first = next((s for s in samples if s.phase == last.phase and s.at >= last.at - ETA_WINDOW_S), last)
        done, dt = last.dirs_done - first.dirs_done, last.at - first.at
        if done <= 0 or dt < PERIOD_S:
            return None
        return (dirs_total - dirs_done) * dt / done


def chart(series: list[dict[str, Any]], key: str, width: int = 600, height: int = 80) -> dict[str, Any]:
    """An SVG polyline of `series`' `key` over the last WINDOW_S (the newest at the right), scaled to its peak."""
    if not series:
        return {"points": "", "peak": 0.0, "last": 0.0}
    end = series[-1]["at"]
    peak = max(s[key] for s in series) or 1.0
    points = []
    for s in series:
        x = width - (end - s["at"]) / WINDOW_S * width
        if x >= 0:
            points.append(f"{x:.1f},{height - s[key] / peak * (height - 4) - 2:.1f}")
    return {
        "points": " ".join(points),
        "peak": round(max(s[key] for s in series), 1),
        "last": series[-1][key],
    }
