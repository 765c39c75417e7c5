"""Folder defaults: a `.ragd-meta.toml` file gives metadata to the documents of its folder and every folder below
it, within the root (docs/metadata.md). Nearer files win over farther ones; tags add up.

```toml
product = "X200"
version = "2.1"
tags = ["manual", "hardware"]
customer = "ACME"          # a key listed in [metadata] keys
```

A file that is not valid TOML (or too large, or not readable) gives a note in the entries it would label and
nothing else: its folder's documents are labelled as if it were absent until it is fixed. `title` is a document's
own and is left out of folder defaults (with a note). Files are read again only when their stat changes.
"""

from __future__ import annotations

import os
import threading
import tomllib
from collections.abc import Sequence
from pathlib import Path

from ..model import Extracted
from .metadata import Defaults, merge_defaults, normalise

FOLDER_FILE = ".ragd-meta.toml"
MAX_BYTES = 64 * 1024
_Key = tuple[int, int, int, int, int]
_cache: dict[str, tuple[_Key, Extracted]] = {}
_lock = threading.Lock()


def read(path: Path) -> Extracted | None:
    """The defaults one file gives; None when there is no such file."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        return Extracted(notes=(f"{path}: cannot be read ({err.strerror}); ignored",))
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _lock:
        cached = _cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    found = _load(path, st.st_size)
    with _lock:
        _cache[str(path)] = (key, found)
    return found


def _load(path: Path, size: int) -> Extracted:
    if size > MAX_BYTES:
        return Extracted(notes=(f"{path}: larger than {MAX_BYTES // 1024} KiB; ignored",))
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as err:
        return Extracted(notes=(f"{path}: cannot be read ({err.strerror}); ignored",))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return Extracted(notes=(f"{path}: not valid TOML ({' '.join(str(err).split())[:200]}); ignored",))
    found = normalise(data, str(path))
    if "title" not in found.fields:
        return found
    fields = {k: v for k, v in found.fields.items() if k != "title"}
    return Extracted(
        fields, (*found.notes, f"{path}: 'title' is a document's own; left out of folder defaults")
    )


def chain(directory: Path, roots: Sequence[Path]) -> list[Path]:
    """The folders whose defaults apply in `directory`, farthest first: from the outermost root that holds it
    down to it (with no root that holds it, `directory` alone). Real paths, as the roots are."""
    real = Path(os.path.realpath(directory))
    tops = [r for r in roots if r == real or r in real.parents]
    if not tops:
        return [real]
    top = min(tops, key=lambda r: len(r.parts))
    below = [real, *[p for p in real.parents if p == top or top in p.parents]]
    return below[::-1]


def defaults_for(directory: Path, roots: Sequence[Path]) -> Defaults:
    """The folder defaults in force in `directory` (see the module docstring)."""
    layers, files = [], []
    for folder in chain(directory, roots):
        found = read(folder / FOLDER_FILE)
        if found is not None:
            layers.append(found)
            files.append(str(folder / FOLDER_FILE))
    return merge_defaults(layers, files)
