"""Retry timing: exponential backoff with full jitter, and the server's own Retry-After."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

BASE_DELAY = 0.5  # seconds before the first retry's jitter


def backoff_delay(attempt: int, max_backoff: float, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(max_backoff, BASE_DELAY * 2**attempt)] (attempt 0 = first retry)."""
    ceiling = min(max_backoff, BASE_DELAY * 2.0 ** min(attempt, 30))
    return (rng or random).uniform(0.0, ceiling)


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `Retry-After` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def next_delay(attempt: int, max_backoff: float, asked: float | None) -> float:
    """The wait before retry number `attempt`: the server's Retry-After when given, else jittered backoff.

    Both are capped by `max_backoff`, so one answer can never park a worker for longer than configured.
    """
    if asked is not None:
        return min(asked, max_backoff)
    return backoff_delay(attempt, max_backoff)
