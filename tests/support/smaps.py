"""This process's resident memory in the maps of files, read from /proc/self/smaps (Linux)."""

from __future__ import annotations

from collections.abc import Callable


def resident_kib(mapped_file: Callable[[str], bool]) -> int:
    """The resident KiB of this process's maps whose file's path `mapped_file` accepts."""
    total, current = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if fields and "-" in fields[0] and not fields[0].endswith(":"):
                current = len(fields) == 6 and mapped_file(fields[5].rstrip("\n"))
            elif current and fields[0] == "Rss:":
                total += int(fields[1])
    return total
