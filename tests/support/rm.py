"""`rm -r` as a user runs it on a folder the agent may be writing at that moment."""

from __future__ import annotations

import errno
import shutil
import time
from pathlib import Path


def rm_r(path: Path, attempts: int = 5) -> None:
    """`rm -rf PATH`: remove the tree at `path` (or the file, or the link; nothing when there is none), run again if
    it fails with "Directory not empty" or "No such file": the agent may write or remove a file in it meanwhile (a
    temporary file renamed away under rmtree's feet), as it may for a user; the next run removes what is left."""
    for attempt in range(attempts):
        try:
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path)
            return
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.ENOENT) or attempt == attempts - 1:
                raise
            time.sleep(0.05)
