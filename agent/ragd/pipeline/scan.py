"""Directory listing, ignore rules and change detection (DESIGN §4) — read-only, shared by jobs and status."""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..config import IgnoreConfig
from ..errors import FileSkipped
from ..model import EmbeddingIdentity
from ..modes import display_name, valid_name
from ..vocabulary import FileState
from .digest import Digest, lacks_lead, outdated
from .filestat import FileStat, Stat
from .sidecar import RAG_DIR, FileEntry, SourceInfo, parse_stamp

HASH_BLOCK = 1 << 20
OUTSIDE_ROOTS = "outside the roots"  # how a link leading outside every root is SKIPPED
Entry = FileEntry | Digest  # a whole entry, or what the stat cache keeps of it


@dataclass(frozen=True)
class Listing:
    """What a directory holds that ragd tracks, and what it shows as SKIPPED without tracking it."""

    files: dict[str, FileStat]
    dirs: tuple[str, ...]
    # shown as SKIPPED, never opened nor recorded: display name -> reason
    undecodable: dict[str, str] = field(default_factory=dict)  # names that are not valid UTF-8
    special: dict[str, str] = field(default_factory=dict)  # FIFOs, sockets, devices, broken symbolic links
    # symbolic links among `files`: name -> the real path of the file they lead to (tracked under the link's name)
    links: dict[str, str] = field(default_factory=dict)
    # symbolic links to directories, never descended: name -> the real path of the directory they lead to
    linked_dirs: dict[str, str] = field(default_factory=dict)


class Ignore:
    def __init__(self, cfg: IgnoreConfig) -> None:
        self.patterns = cfg.file_patterns
        self.skip_dirs = frozenset(cfg.skip_dirs)
        # one expression for all the patterns (fnmatchcase's semantics, one match per name)
        self._files = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in self.patterns) or "(?!)")

    def file(self, name: str) -> bool:
        return name.startswith(".") or self._files.match(name) is not None

    def dir(self, name: str) -> bool:
        """Not tracked: ignored by the rules, or a name that cannot be recorded (not valid UTF-8)."""
        return self.dir_rule(name) or not valid_name(name)

    def dir_rule(self, name: str) -> bool:
        return name.startswith(".") or name in self.skip_dirs or name == RAG_DIR


def list_dir(directory: Path, ignore: Ignore) -> Listing:
    """Regular files (symlinks to files followed: the stat is the target's) and real subdirectories (symlinked ones
    are not descended, only listed in `linked_dirs`, and symlinked files also in `links`, with their targets).

    What cannot be tracked but is not ignored either is listed with the reason: names that are not valid UTF-8 in
    `undecodable` (by display name); FIFOs, sockets, devices, dangling symbolic links and link loops in `special`.
    Nothing is opened."""
    files: dict[str, FileStat] = {}
    shared: dict[int, int] = {}
    dirs: list[str] = []
    undecodable: dict[str, str] = {}
    special: dict[str, str] = {}
    links: dict[str, str] = {}
    linked_dirs: dict[str, str] = {}
    for de, is_dir in _entries(directory, ignore):
        if not valid_name(de.name):
            undecodable[display_name(de.name)] = bad_name_reason(de.name, is_dir=is_dir)
        elif is_dir:
            dirs.append(de.name)
        elif isinstance(found := _follow(de), os.stat_result):
            files[de.name] = FileStat.of(found, shared)
            if _is_link(de):
                links[de.name] = os.path.realpath(de.path)
        elif found:
            special[de.name] = found
        elif _is_link(de) and os.path.isdir(de.path):
            linked_dirs[de.name] = os.path.realpath(de.path)
    return Listing(files, tuple(sorted(dirs)), undecodable, special, links, linked_dirs)


def files_of(directory: Path, ignore: Ignore) -> Iterator[tuple[str, os.stat_result]]:
    """The files `list_dir` lists, with their stats, one at a time as they are read: nothing of the folder is held
    (a verification pass compares a folder of 100,000 files without its listing, ~34 MiB)."""
    for de, is_dir in _entries(directory, ignore):
        if not is_dir and valid_name(de.name) and isinstance(found := _follow(de), os.stat_result):
            yield de.name, found


def _entries(directory: Path, ignore: Ignore) -> Iterator[tuple[os.DirEntry[str], bool]]:
    """The entries of `directory` that are not ignored, and whether each is a real directory (not a link to one)."""
    with os.scandir(directory) as it:
        for de in it:
            try:
                is_dir = de.is_dir(follow_symlinks=False)
            except OSError:
                continue  # vanished
            if not (ignore.dir_rule(de.name) if is_dir else ignore.file(de.name)):
                yield de, is_dir


def _is_link(de: os.DirEntry[str]) -> bool:
    try:
        return de.is_symlink()
    except OSError:
        return False


@dataclass(frozen=True)
class Shared:
    """A file of a listing whose content another path can change: a symbolic link (`target`: the real path of the
    file it leads to), or a file with more than one hard link (`inode`: its device and inode numbers); `seen`: its
    stat when listed (symbolic links followed), to tell whether it changed since."""

    name: str
    target: str | None = None
    inode: tuple[int, int] | None = None
    seen: tuple[int, ...] | None = field(default=None, compare=False)


def shared_files(listing: Listing) -> tuple[Shared, ...]:
    """The listing's symbolic links and hard-linked files (only those: most files have one name, and none is kept)."""
    files = listing.files
    out = [Shared(name, target=target, seen=seen_key(files[name])) for name, target in listing.links.items()]
    out += [
        Shared(name, inode=(st.st_dev, st.st_ino), seen=seen_key(st))
        for name, st in files.items()
        if st.st_nlink > 1 and name not in listing.links
    ]
    return tuple(out)


def seen_key(st: Stat) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def changed_since_listed(directory: Path, shared: tuple[Shared, ...]) -> bool:
    """One of these links (of `directory`'s listing) leads elsewhere now, or its file changed or went, since it was
    listed. The watcher reports such a change on the other path only, and the agent learns which paths share a file
    from a job's listing at the job's end: a change made while the job ran reached no folder of the link."""
    for s in shared:
        path = os.path.join(directory, s.name)
        try:
            st = os.stat(path)
        except OSError:
            return True
        if seen_key(st) != s.seen or (s.target is not None and os.path.realpath(path) != s.target):
            return True
    return False


def outside_links(listing: Listing, roots: tuple[Path, ...]) -> dict[str, str]:
    """The symbolic links to folders that lead outside every root (real paths): name -> why it is SKIPPED. A link
    to a folder under a root is not followed either, silently: that folder's files are indexed where they are."""
    if not roots:
        return {}
    return {
        name: f"symbolic link to the folder {display_name(target)}, {OUTSIDE_ROOTS}: not followed"
        for name, target in listing.linked_dirs.items()
        if not under_real_roots(Path(target), roots)
    }


def rejudge_link(entry: Entry | None, target: str, roots: tuple[Path, ...]) -> bool:
    """A symbolic link's entry no longer says what the roots make of it: indexed though its target (real path)
    lies outside every root now (its root removed), or SKIPPED as outside though the target is under one now."""
    if entry is None or not roots:
        return False
    skipped_outside = entry.status == FileState.SKIPPED and str(
        (entry.error or {}).get("message", "")
    ).endswith(OUTSIDE_ROOTS)
    return skipped_outside == under_real_roots(Path(target), roots)


def under_real_roots(target: Path, roots: tuple[Path, ...]) -> bool:
    """`target` (a real path) is one of `roots` (real paths too) or below one."""
    return any(target == r or r in target.parents for r in roots)


def bad_name_reason(name: str, *, is_dir: bool = False) -> str:
    what, action = ("directory", "to index its files") if is_dir else ("file", "to index it")
    return f"{what} name is not valid UTF-8 ({os.fsencode(name)!r}); rename it {action}"


def _follow(de: os.DirEntry[str]) -> os.stat_result | str | None:
    """A regular file's stat (symlinks followed), or why it is skipped; None: vanished, or a symlinked directory."""
    try:
        st = de.stat(follow_symlinks=True)
    except OSError as err:
        return _broken_link(de, err)
    if stat.S_ISREG(st.st_mode):
        return st
    return None if stat.S_ISDIR(st.st_mode) else not_regular(st.st_mode)


def not_regular(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
             (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "directory"))  # fmt: skip
    return f"not a regular file ({next((k for test, k in kinds if test(mode)), 'unknown type')})"


def _broken_link(de: os.DirEntry[str], err: OSError) -> str | None:
    try:
        if not de.is_symlink():
            return None  # vanished
        target = display_name(os.readlink(de.path))
    except OSError:
        return None
    if err.errno == errno.ELOOP:
        return "symbolic link loop"
    if err.errno in (errno.ENOENT, errno.ENOTDIR):
        return f"dangling symbolic link to {target}"
    return f"symbolic link to {target} cannot be followed: {err.strerror}"


PERMISSION_DENIED = "permission denied"


def unreadable(directory: Path) -> bool:
    """The agent may not list `directory` or reach what is in it: no read or no search (x) permission on it, or on
    a folder above it. A directory that is gone, or no directory, is not unreadable: it vanished."""
    try:
        st = os.stat(directory)
    except PermissionError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and not os.access(directory, os.R_OK | os.X_OK)


def walk_dirs(root: Path, ignore: Ignore) -> Iterator[Path]:
    """Every tracked directory under root (root first), without following symlinks."""
    stack = [root]
    while stack:
        d = stack.pop()
        yield d
        try:
            with os.scandir(d) as it:
                subs = [
                    Path(de.path) for de in it if de.is_dir(follow_symlinks=False) and not ignore.dir(de.name)
                ]
        except OSError:
            continue
        stack.extend(sorted(subs, reverse=True))


def md5_file(path: Path | str) -> str:
    """The md5 of a regular file. Opened without blocking, so a FIFO put in its place is refused (FileSkipped)."""
    h = hashlib.md5(usedforsecurity=False)
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise FileSkipped(not_regular(mode))
        while block := fh.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def _same_content(entry: Entry, path: Path | str) -> bool:
    if not entry.source.md5_hash:
        return False
    try:
        return md5_file(path) == entry.source.md5_hash
    except (OSError, FileSkipped):
        return False  # unreadable, gone, or no longer a regular file: the file's job says which


class Change(Enum):
    NEW = "new"
    UNCHANGED = "unchanged"
    TOUCHED = "touched"  # stat differs but the content (md5) is the same: refresh the recorded stat only
    CHANGED = "changed"
    RETRY = "retry"  # a failed file whose retry time has come, or a skipped one whose policy changed
    RELABEL = (
        "relabel"  # unchanged, but the folder defaults or metadata keys in force changed (metadata.basis)
    )
    LEAD = "lead"  # unchanged, EMBEDDED by an earlier ragd without a lead: one made from its chunks (lead.py)


def stat_matches(entry: Entry, st: Stat) -> bool:
    return source_matches(entry.source, st)


def source_matches(src: SourceInfo, st: Stat) -> bool:
    """The file's stat is the one its entry recorded (for a symbolic link: its target's, as listed)."""
    if src.size_bytes != st.st_size or src.inode != st.st_ino:
        return False
    if src.mtime_ns is not None:
        return src.mtime_ns == st.st_mtime_ns and src.ctime_ns in (None, st.st_ctime_ns)
    return src.mtime == int(st.st_mtime)


def is_racy(entry: Entry, st: Stat) -> bool:
    """The file may have changed again within the second it was recorded in (DESIGN §4)."""
    recorded = parse_stamp(entry.modify_dt)
    return recorded is None or int(st.st_mtime) >= int(recorded)


def identity_matches(entry: Entry, identity: EmbeddingIdentity) -> bool:
    if entry.model_name != identity.model_name or entry.dimension != identity.dimension:
        return False
    return entry.splitter is None or entry.splitter == identity.splitter.fingerprint


@dataclass(frozen=True, slots=True)  # a verification pass may hold one for every file of a folder
class Expected:
    """What the index should hold for one source, according to its sidecar."""

    source_md5: str
    chunk_count: int


def indexable(entry: Entry | None, identity: EmbeddingIdentity) -> bool:
    """Whether the entry's chunks belong in the index of `identity` (EMBEDDED, same identity, all vectors)."""
    return (
        entry is not None
        and entry.status == FileState.EMBEDDED
        and identity_matches(entry, identity)
        and entry.all_vectors
    )


def classify(
    entry: Entry | None,
    path: Path | str,
    st: Stat,
    identity: EmbeddingIdentity,
    policy: Callable[[], str],
    now: float,
    basis: str | None = None,
) -> Change:
    """Decide what a file needs. Hashes the file only when the stat fast path cannot decide. `policy`: what a
    SKIPPED verdict depends on now, asked only of a skipped file's entry (`JobContext.policy`); `basis`: what the
    metadata of the directory's entries is made with now (metadata.Labels.basis)."""
    if entry is None:
        return Change.NEW
    if entry.status == FileState.SKIPPED:
        same = stat_matches(entry, st) and (entry.error or {}).get("policy") == policy()
        return Change.UNCHANGED if same else Change.RETRY
    settled = stat_matches(entry, st) and not is_racy(entry, st)
    if not settled and not _same_content(entry, path):
        return Change.CHANGED
    if entry.status == FileState.FAILED:
        error = entry.error or {}
        if "retry_at" not in error:  # e.g. written by another tool: try again
            return Change.RETRY
        retry_at = error["retry_at"]  # None: only a change to the file can help
        due = retry_at is not None and (parse_stamp(retry_at) or 0) <= now
        return Change.RETRY if due else Change.UNCHANGED
    if (
        entry.status != FileState.EMBEDDED
        or not identity_matches(entry, identity)
        or outdated(entry, os.path.basename(path))
    ):
        return Change.RETRY
    if lacks_lead(entry):  # (a touch too: the lead's job records the new stat)
        return Change.LEAD
    if not settled:
        return Change.TOUCHED
    return Change.RELABEL if entry_basis(entry) != basis else Change.UNCHANGED


def entry_basis(entry: Entry) -> str | None:
    """What the entry's metadata was made with (metadata.basis; None: no folder defaults nor keys)."""
    if isinstance(entry, Digest):
        return entry.meta_basis
    return entry.metadata.basis if entry.metadata else None
