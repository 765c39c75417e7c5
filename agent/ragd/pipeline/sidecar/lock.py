"""The directory's lock (`DirLock`: flock(2) on `D/.rag/tmp`), which makes the store when it is missing, keeps it
private and out of git and removes a crashed writer's debris; and the removal of an emptied folder's store
(`drop_emptied`) under that lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from pathlib import Path

from ... import modes
from ...errors import StorageError
from ...modes import private_mode
from .files import DELETED_SUFFIX, GITIGNORE, GITIGNORE_TEXT, RAG_DIR, TMP_DIR, rag_dir, write_atomic

log = logging.getLogger(__name__)


LOCK_ATTEMPTS = 5  # a store removed (drop_emptied) while its lock was awaited: taken again at most this often


class DirLock:
    """flock(2) on `D/.rag/tmp`: serialises work on one directory across threads and processes.

    Taking the lock creates the store when `create` (`.rag/` never more open than D, `.rag/tmp/` 0700; older, wider
    ones are narrowed) and removes `*.tmp` debris left by a crashed writer.
    """

    def __init__(self, directory: Path, *, create: bool = True) -> None:
        self.directory = directory
        self.create = create
        self._fd: int | None = None
        self._making = False  # the store did not exist: this lock made it (or tried)

    def __enter__(self) -> DirLock:
        tmp = rag_dir(self.directory) / TMP_DIR
        self._making = False
        try:
            self._take(tmp)
        except OSError as err:
            self._release()
            rd = rag_dir(self.directory)
            if self._making and not isinstance(err, FileNotFoundError):  # no store, and none can be made here
                raise StorageError(f"cannot write in {self.directory}: {err.strerror or err} (ragd keeps this "
                                   f"folder's sidecars in {rd})", "give the agent's user write permission on "
                                   "the folder, or ignore the folder ([ignore] skip_dirs)") from None  # fmt: skip
            if rd.exists() and not rd.is_dir():
                raise StorageError(f"cannot lock {tmp}: Not a directory ({rd} is a file, where ragd keeps this "
                                   "folder's sidecars)", f"move or rename {rd}: ragd needs a .rag folder there",
                                   ) from None  # fmt: skip
            raise StorageError(
                f"cannot lock {tmp}: {err.strerror or err}", "check write permission on the directory"
            ) from None
        assert self._fd is not None
        if self.create:
            _keep_private(self.directory, self._fd)
            keep_out_of_git(self.directory)
        clean_debris(tmp)
        return self

    def _take(self, tmp: Path) -> None:
        """Open and flock `tmp` (the store made first when `create`). A store removed while its lock was awaited
        (an emptied folder's: `drop_emptied`) is not the one at `tmp` any more: the one there now is taken."""
        lost: OSError | None = None
        for _ in range(LOCK_ATTEMPTS):
            try:
                self._fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                if not self.create:
                    raise
                self._making = True
                try:
                    self._fd = _make_store(self.directory)
                except FileNotFoundError as err:  # `.rag/` removed between its mkdir and tmp's
                    lost = err
                    continue
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            if _is_at(self._fd, tmp):
                return
            self._release()
            lost = FileNotFoundError(errno.ENOENT, "the store was removed meanwhile", str(tmp))
            if not self.create:
                raise lost
        assert lost is not None
        raise lost

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the fd drops the flock
            self._fd = None


StoreId = tuple[int, int]  # a store's `tmp/` by device and inode


def store_id(directory: Path) -> StoreId | None:
    """The store of `directory` there now (None: there is none, or it cannot be looked at)."""
    try:
        st = os.stat(rag_dir(directory) / TMP_DIR)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _make_store(directory: Path) -> int:
    """Create `.rag/` (never more open than `directory`) and `.rag/tmp/` (0700); return the fd of tmp. Its
    `.gitignore` is written once the lock is held (keep_out_of_git)."""
    rd = rag_dir(directory)
    like = os.stat(directory)
    with contextlib.suppress(FileExistsError):
        os.mkdir(rd, private_mode(like, like.st_gid, directory=True))  # its group is checked by _keep_private
    with contextlib.suppress(FileExistsError):
        os.mkdir(rd / TMP_DIR, 0o700)
    return os.open(rd / TMP_DIR, os.O_RDONLY | os.O_DIRECTORY)


def _is_at(fd: int, path: Path) -> bool:
    """The directory open as `fd` is the one at `path` now."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def keep_out_of_git(directory: Path) -> None:
    """`.rag/.gitignore` holding `*` (as a Python venv does), written when missing: a store in a git work tree
    never shows in `git status` nor is committed by `git add -A`. One the user edited is left as it is; never
    fatal (the store works without it; a store the agent may lock but not write, another user's, stays as it is)."""
    if os.path.lexists(rag_dir(directory) / GITIGNORE):
        return
    try:
        write_atomic(directory, GITIGNORE, GITIGNORE_TEXT, mode=0o644)
    except StorageError as err:
        log.debug("%s", err.message)


def _keep_private(directory: Path, tmp_fd: int) -> None:
    """Narrow a store made wider than the rules (by an older version or another tool); never fatal."""
    try:
        if os.fstat(tmp_fd).st_mode & 0o077:
            os.fchmod(tmp_fd, 0o700)
        modes.restrict(rag_dir(directory), os.stat(directory))
    except FileNotFoundError:  # the folder was deleted meanwhile: nothing left to narrow
        return
    except OSError as err:
        log.warning("cannot narrow the permissions of %s: %s", rag_dir(directory), err.strerror or err)


def clean_debris(tmp: Path) -> int:
    """Remove the `*.tmp` files in `tmp` (scandir: taken with every lock, so no pathlib glob on this path)."""
    removed = 0
    try:
        with os.scandir(tmp) as it:
            debris = [de.path for de in it if de.name.endswith(".tmp")]
    except (FileNotFoundError, NotADirectoryError):  # removed meanwhile: nothing to clean
        return 0
    for p in debris:
        try:
            os.unlink(p)
            removed += 1
        except (FileNotFoundError, IsADirectoryError):  # gone meanwhile; not ours to remove
            pass
    return removed


def drop_emptied(directory: Path) -> bool:
    """Remove the store of a folder that holds nothing else any more (its documents deleted, `git rm` or a checkout
    of a branch without them): entries of deleted sources, `.gitignore` and `tmp/` only, no change note. The folder
    itself is the user's and stays. Checked again under the lock, which is dropped last; a job waiting for that
    lock takes a new store (DirLock). True if it was removed."""
    if not _only_store(directory) or not _emptied(rag_dir(directory)):
        return False
    try:
        with DirLock(directory, create=False):
            rd = rag_dir(directory)
            if not _only_store(directory) or not _emptied(rd):
                return False
            with os.scandir(rd) as it:
                names = [de.name for de in it if de.name != TMP_DIR]
            for name in names:
                os.unlink(rd / name)
            os.rmdir(rd / TMP_DIR)  # empty: debris was removed as the lock was taken
            os.rmdir(rd)
    except (StorageError, OSError) as err:  # someone else's file, a new entry meanwhile: the store stays
        log.debug("store of %s kept: %s", directory, err)
        return False
    log.info("removed the sidecars of %s: the folder holds nothing any more", directory)
    return True


def _only_store(directory: Path) -> bool:
    """`directory` holds nothing but its `.rag/` (stops at the first other name: cheap in a big folder)."""
    try:
        with os.scandir(directory) as it:
            return all(de.name == RAG_DIR for de in it)
    except OSError:
        return False


def _emptied(rd: Path) -> bool:
    """`.rag/` holds only entries of deleted sources, its `.gitignore` and `tmp/` (with nothing but debris)."""
    try:
        with os.scandir(rd) as it:
            names = [de.name for de in it]
        with os.scandir(rd / TMP_DIR) as it:
            staged = [de.name for de in it if not de.name.endswith(".tmp")]
    except OSError:
        return False
    return not staged and all(n.endswith(DELETED_SUFFIX) or n in (GITIGNORE, TMP_DIR) for n in names)
