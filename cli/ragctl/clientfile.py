"""Merging the `ragd` entry into an MCP client's JSON config file, touching nothing else in it.

The file is read whole; a file that is not a JSON object (or whose object of servers is not one) is refused with
nothing changed. Otherwise a copy of it is kept beside it (`<file>.bak-YYYYmmdd-HHMMSS`), the new text goes to a
temporary file in the same folder and is renamed over it (so a reader sees the old file or the new one, never half
of one), with the old file's mode; a new file is created with its folder, mode 0600 when the entry holds a secret.
Every other key and server is kept, in its order: only `<key>.ragd` is replaced. A file that changed between
the read and the rename (the client saving its own state) is read again and merged again.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NEW_DIR_MODE = 0o700
ATTEMPTS = 3  # reads of a file that keeps changing under us before giving up


class MergeRefused(Exception):
    """The file cannot be merged into (nothing was changed); `hint` says what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass(frozen=True)
class Written:
    file: Path  # the file written (a symbolic link's target)
    backup: Path | None  # the copy of the old file; None when there was none
    created: bool
    mode: int


def merge_entry(path: Path, key: str, name: str, entry: dict[str, Any], *, secret: bool) -> Written:
    """Put `entry` at `key`.`name` in the JSON file at `path` (see the module's doc); OSError on I/O failure."""
    target = Path(os.path.realpath(path))  # a dotfile kept as a link stays a link
    for _ in range(ATTEMPTS):
        old = _read(target)
        text = _merged(target, old, key, name, entry)
        if old is None:
            target.parent.mkdir(mode=NEW_DIR_MODE, parents=True, exist_ok=True)
            mode = 0o600 if secret else 0o666 & ~_umask()
            if _replace(target, text, mode, expected=None):
                return Written(target, None, True, mode)
            continue
        mode = stat.S_IMODE(os.stat(target).st_mode)
        backup = _backup(target, old)
        if _replace(target, text, mode, expected=old):
            return Written(target, backup, False, mode)
        backup.unlink()  # the file changed meanwhile: merge into its new content
    raise MergeRefused(f"{target} kept changing while ragctl merged into it; nothing was changed",
                       "quit the program that writes it (the AI tool), then run the command again")  # fmt: skip


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise MergeRefused(
            f"{path} is a directory, not a config file", "name the file with --config-file"
        ) from None


def _merged(path: Path, old: bytes | None, key: str, name: str, entry: dict[str, Any]) -> str:
    data = _parse(path, old)
    servers = data.get(key, {})
    if not isinstance(servers, dict):
        raise MergeRefused(f"cannot merge into {path}: its {key!r} is {_kind(servers)}, not an object of servers",
                           f"fix {key!r} in the file (or add the snippet by hand); nothing was changed")  # fmt: skip
    merged = {**data, key: {**servers, name: entry}}  # an existing `name` keeps its place
    return json.dumps(merged, indent=2, ensure_ascii=False) + "\n"


def _parse(path: Path, old: bytes | None) -> dict[str, Any]:
    if old is None or not old.strip():
        return {}
    try:
        data = json.loads(old.decode("utf-8-sig"))
    except UnicodeDecodeError as err:
        raise MergeRefused(f"cannot merge into {path}: it is not UTF-8 text ({err.reason} at byte {err.start})",
                           "fix or move the file, or add the snippet by hand; nothing was changed") from None  # fmt: skip
    except ValueError as err:
        raise MergeRefused(f"cannot merge into {path}: it is not valid JSON ({err})",
                           "fix or move the file, or add the snippet by hand (comments and trailing commas are "
                           "not JSON: ragctl would lose them); nothing was changed") from None  # fmt: skip
    if not isinstance(data, dict):
        raise MergeRefused(f"cannot merge into {path}: it holds {_kind(data)} in JSON, not an object",
                           "fix or move the file, or add the snippet by hand; nothing was changed")  # fmt: skip
    return data


KINDS = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}  # else a number


def _kind(value: object) -> str:
    return KINDS.get(type(value), "a number")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _backup(path: Path, old: bytes) -> Path:
    """A copy of the old file beside it, with its mode, under a name no other file has."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    mode = stat.S_IMODE(os.stat(path).st_mode)
    for n in range(100):
        backup = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(old)
            f.flush()
            os.fsync(f.fileno())
        return backup
    raise FileExistsError(f"no free backup name beside {path}")


def _replace(path: Path, text: str, mode: int, expected: bytes | None) -> bool:
    """Write `text` to a temporary file beside `path` and rename it over `path`, unless `path` no longer holds
    `expected` (None: does not exist); False then, and nothing changed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if _read(path) != expected:
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
