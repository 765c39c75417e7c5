"""The small pieces every renderer uses: a path as typed, counts with their nouns, one-line reasons, durations,
a progress bar, and numbers that may be missing (`?`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]


MAX_REASON = 160  # characters of a failure reason on one line


def show_path(path: object) -> str:
    """A path as typed; quoted when it holds control characters (a newline would break the layout)."""
    text = str(path)
    return repr(text) if any(ord(c) < 32 or c == "\x7f" for c in text) else text


def plural(n: object, one: str, many: str | None = None) -> str:
    """'1 directory', '2 directories', '0 entries'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def one_line(text: object, limit: int = MAX_REASON) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def duration(seconds: object) -> str:
    """12.5 -> '12s', 3723 -> '1h 2m', 90061 -> '1d 1h'."""
    if not isinstance(seconds, (int, float)):
        return "?"
    rest = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        if n or parts or unit == "s":
            parts.append(f"{n}{unit}")
    return " ".join(parts[:2])


def bar(done: int, total: int, width: int) -> str:
    frac = min(1.0, max(0.0, done / total)) if total > 0 else 0.0
    filled = int(frac * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: object) -> str:
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _g(value: object) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _count(value: object, one: str, many: str | None = None) -> str:
    """A count with its noun in the right number ('1 directory', '3 directories'); '? directories' if unknown."""
    return (
        plural(value, one, many)
        if isinstance(value, int) and not isinstance(value, bool)
        else f"? {many or one + 's'}"
    )
