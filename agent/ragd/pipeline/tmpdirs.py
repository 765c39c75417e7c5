"""Each worker process's own temp directory, removed by the agent once the worker is gone.

A worker killed at its deadline, or one that crashes, never runs its clean-up: whatever it had in the temp
directory (LibreOffice's copy of a .doc and its output, markitdown's or pdfium's files) would stay there for good.
So a pool of workers has a directory of its own in the system temp directory, `ragd-worker-<agent pid>-XXXX/`
(mode 0700), made by the agent as the pool starts; each worker makes `<its pid>-XXXX/` in it and sets it as its
TMPDIR and `tempfile.tempdir` before any task (so the converters it runs use it too). The agent removes:

- a worker's directory once that worker is gone (`sweep`, after each task: a kill at the deadline, a crash, a
  worker replaced after its quota of tasks);
- the pool's directory once its workers have exited (idle exit, shutdown, a broken pool replaced);
- at a pool's start, the directories of agents that are gone (`remove_debris`), each worker's directory once that
  worker is gone too.

A directory named after a live process is never removed; nor is one of another user.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ragctl.protocol.discovery import pid_alive

log = logging.getLogger(__name__)

PREFIX = "ragd-worker-"


def make_root() -> Path | None:
    """A new pool's directory, `ragd-worker-<this pid>-XXXX/` in the system temp directory (mode 0700); None when
    it cannot be made (logged: the workers use the temp directory itself, as a converter would fail there too)."""
    try:
        return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    except OSError as err:
        log.warning(
            "cannot make the workers' temp directory in %s: %s", tempfile.gettempdir(), err.strerror or err
        )
        return None


def enter(root: Path) -> None:
    """In a worker as it starts: its own directory in `root`, made its TMPDIR and `tempfile.tempdir`.

    A worker still starting when its agent was killed finds `root` removed by the next agent's pool (its agent is
    gone): it has no one to work for, and exits at once, quietly (its start-up traceback went into the log the
    agents share)."""
    try:
        own = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root)
    except FileNotFoundError:
        agent = _pid(root.name[len(PREFIX) :])
        if agent is not None and not pid_alive(agent):
            os._exit(0)
        raise
    os.environ["TMPDIR"] = own
    tempfile.tempdir = own


def sweep(root: Path) -> None:
    """The directories in `root` of the workers that are gone, removed (those of live workers are left)."""
    # clean-up only, after a task: the pool may have closed and removed `root` meanwhile
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        pid = _pid(entry.name)
        if pid is not None and not pid_alive(pid):
            shutil.rmtree(entry.path, ignore_errors=True)


def remove(root: Path) -> None:
    """A pool's directory, with everything in it, once its workers have exited."""
    shutil.rmtree(root, ignore_errors=True)


def remove_debris() -> None:
    """The pool directories in the system temp directory of agents that are gone: each worker's directory whose
    worker is gone too, then the pool's directory if that left it empty."""
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        agent = _pid(root.name[len(PREFIX) :])
        if agent is None or pid_alive(agent) or not _own_dir(root):
            continue
        sweep(root)
        with contextlib.suppress(OSError):  # not empty: a worker of that agent still runs
            root.rmdir()
            log.info("removed %s, left by an agent that stopped while its workers ran", root)


def _pid(name: str) -> int | None:
    """The pid a directory is named after (`<pid>-XXXX`), or None."""
    head = name.partition("-")[0]
    return int(head) if head.isdigit() else None


def _own_dir(path: Path) -> bool:
    """Whether `path` is a directory (not a link to one) of this user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
