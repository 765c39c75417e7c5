"""`ragctl export`: write the `.ragjson` entries the agent listed into a tar.gz, atomically.

The agent names the files (verb `export`: `{"base", "files": [{"path", "arcname"}]}`); ragctl reads them as the
invoking user and writes `ARCHIVE.tmp-<pid>` beside the target, then renames it over ARCHIVE. A file that vanished
since the agent listed it is skipped (the caller is told through `warn`); any other read or write error removes
the temporary file and propagates.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Entry:
    path: Path  # absolute path of the file to read
    arcname: str  # its name inside the archive (relative, '/'-separated)


@dataclass(frozen=True)
class Written:
    archive: Path
    entries: int
    skipped: tuple[str, ...]  # paths that vanished meanwhile


def entries(result: Mapping[str, Any]) -> list[Entry]:
    """The files of an `export` result; relative paths are taken against `base`. Unsafe arcnames are refused."""
    base = Path(str(result.get("base") or "/"))
    out = []
    for item in result.get("files") or []:
        arcname = posixpath.normpath(str(item["arcname"]))
        if arcname.startswith(("/", "../")) or arcname in ("..", "."):
            raise ValueError(f"the agent sent an unsafe archive name {item['arcname']!r}")
        out.append(Entry(base / str(item["path"]), arcname))
    return out


def temp_path(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.tmp-{os.getpid()}")


def write_archive(archive: Path, files: Iterable[Entry], warn: Callable[[str], object]) -> Written:
    """Write `files` into the tar.gz `archive` (atomic: a temp file renamed over it)."""
    tmp = temp_path(archive)
    skipped: list[str] = []
    count = 0
    try:
        with open(tmp, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz") as tar:
                for entry in files:
                    if _add(tar, entry):
                        count += 1
                    else:
                        skipped.append(str(entry.path))
                        warn(f"{entry.path} vanished before it could be archived; skipped")
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, archive)
    except BaseException:  # also Ctrl-C: never leave a half-written temp file behind
        tmp.unlink(missing_ok=True)
        raise
    return Written(archive, count, tuple(skipped))


def _add(tar: tarfile.TarFile, entry: Entry) -> bool:
    """Add one file, read whole first so a concurrent rewrite cannot tear the entry; False if it is gone."""
    try:
        with open(entry.path, "rb") as f:
            info = tar.gettarinfo(fileobj=f, arcname=entry.arcname)
            data = f.read()
    except FileNotFoundError:
        return False
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return True
