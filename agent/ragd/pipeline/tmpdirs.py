"""Each worker process's own temp directory, removed by the agent once the worker is gone.

A worker killed at its deadline, or one that crashes, never runs its clean-up: whatever it had in the temp
directory (LibreOffice's copy of a .doc and its output, markitdown's or pdfium's files) would stay there for good.
So a pool of workers has a directory of its own in the system temp directory, `ragd-worker-<agent pid>-XXXX/`
(mode 0700), made by the agent as the pool starts; each worker makes `<its pid>-XXXX/` in it and sets it as its
TMPDIR and `tempfile.tempdir` before any task (so the converters it runs use it too). The agent removes:

- a worker's directory once that worker is gone (`sweep`, after a task that failed: a kill at the deadline, a
  crash; and every `pool.SWEEP_EVERY` tasks, for a worker that died between tasks). A worker replaced after its
  quota of tasks, or exiting with its idle pool, removes its own as it exits (a `multiprocessing` finalizer);
- the pool's directory once its workers have exited (idle exit, shutdown, a broken pool replaced);
- at a pool's start, the directories of agents that are gone (`remove_debris`), each worker's directory once that
  worker is gone too.

The agent's own multiprocessing temp directory, where the fork server that starts the workers has its socket,
is one of these too: `ragd-mp-<agent pid>-XXXX/` (multiprocessing's default, `pymp-XXXX/`, is removed only by the
process that made it, at its exit: an agent killed left one behind for good). It goes with the agent at its exit,
or at the next agent's first pool once the agent is gone (`remove_debris`).

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
MP_PREFIX = "ragd-mp-"


def mp_dir_name(pid: int) -> str:
    """The start of the name of agent `pid`'s multiprocessing temp directory."""
    return f"{MP_PREFIX}{pid}-"


def claim_mp_dir() -> None:
    """Make this process's multiprocessing temp directory (the fork server's socket) `ragd-mp-<pid>-XXXX/`, so that
    `remove_debris` knows it once the process is gone; removed at this process's exit as multiprocessing's own is.
    Nothing is done once multiprocessing has made its own (it is in use) or where its private record is missing."""
    import multiprocessing
    from multiprocessing import util

    config = getattr(multiprocessing.current_process(), "_config", None)
    remove = getattr(util, "_remove_temp_dir", None)  # its own clean-up, which also forgets the directory
    if not isinstance(config, dict) or config.get("tempdir") is not None or remove is None:
        return
    try:
        path = tempfile.mkdtemp(prefix=mp_dir_name(os.getpid()))
    except OSError:  # multiprocessing meets the same error, and the pool says it
        return
    util.Finalize(None, remove, args=(shutil.rmtree, path), exitpriority=-100)
    config["tempdir"] = path


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
    worker is gone too, then the pool's directory if that left it empty; and the multiprocessing temp directories
    of agents that are gone (a socket no one listens on)."""
    base = Path(tempfile.gettempdir())
    for mp in base.glob(f"{MP_PREFIX}*"):
        agent = _pid(mp.name[len(MP_PREFIX) :])
        if agent is not None and not pid_alive(agent) and _own_dir(mp):
            shutil.rmtree(mp, ignore_errors=True)
            log.info("removed %s, left by an agent that was killed", mp)
    for root in base.glob(f"{PREFIX}*"):
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
