"""A process's resident memory in the maps of files, read from /proc/PID/smaps (Linux; this process by default)."""

from __future__ import annotations

from collections.abc import Callable


def resident_kib(mapped_file: Callable[[str], bool], pid: int | str = "self") -> int:
    """The resident KiB of the maps of process `pid` (this one by default) whose file's path `mapped_file` accepts."""
    total, current = 0, False
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if fields and "-" in fields[0] and not fields[0].endswith(":"):
                current = len(fields) == 6 and mapped_file(fields[5].rstrip("\n"))
            elif current and fields[0] == "Rss:":
                total += int(fields[1])
    return total
