"""What a directory's listing keeps of each file's stat."""

from __future__ import annotations

import os
from typing import NamedTuple


class FileStat(NamedTuple):
    """What a listing keeps of a file's stat (symbolic links followed): the fields of os.stat_result that ragd reads,
    by the same names. A directory job holds one for every file of its folder until it ends, and a verification
    pass while it compares the folder: an os.stat_result is ~630 bytes (its 19 fields each an object of its own),
    this ~260 with the values every file of a folder shares (device, mode, owner) kept once (100,000 files: ~35 MiB
    less for the whole job)."""

    st_mode: int
    st_ino: int
    st_dev: int
    st_nlink: int
    st_uid: int
    st_gid: int
    st_size: int
    st_mtime: float
    st_mtime_ns: int
    st_ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result, shared: dict[int, int]) -> FileStat:
        """`st` kept; `shared` holds the values met so far that files have in common, one object each."""
        one = shared.setdefault
        return cls(one(st.st_mode, st.st_mode), st.st_ino, one(st.st_dev, st.st_dev), st.st_nlink,
                   one(st.st_uid, st.st_uid), one(st.st_gid, st.st_gid), st.st_size, st.st_mtime, st.st_mtime_ns,
                   st.st_ctime_ns)  # fmt: skip


# a file's stat as the stages read it: taken now (os.stat), or kept by a listing
Stat = os.stat_result | FileStat
