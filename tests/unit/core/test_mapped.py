"""Pages of mapped files given back (ragd/mapped.py): out of the resident set, nothing lost, only maps below the
folder and only those whose pages a re-read restores."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

import pytest

from ragd import mapped
from tests.support import smaps

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps is Linux's")

PAGES = 64


def resident_kib(path: Path) -> int:
    return smaps.resident_kib(lambda name: name == str(path))


def a_file(path: Path) -> bytes:
    data = b"".join(bytes([i]) * mmap.PAGESIZE for i in range(PAGES))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def touch(m: mmap.mmap) -> int:
    return sum(m[i * mmap.PAGESIZE] for i in range(PAGES))


def test_the_pages_of_maps_below_the_folder_leave_the_resident_set_and_read_back_the_same(
    tmp_path: Path,
) -> None:
    inside, outside = tmp_path / "index" / "seg" / "vectors.bin", tmp_path / "index2" / "other.bin"
    data = a_file(inside)
    a_file(outside)
    with open(inside, "rb") as f, open(outside, "rb") as g:
        shared = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # r--s
        private = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)  # r--p
        other = mmap.mmap(g.fileno(), 0, access=mmap.ACCESS_READ)  # a sibling folder's name begins the same
    try:
        expected = touch(shared) + touch(private)
        touch(other)
        before = resident_kib(inside)
        assert before >= PAGES * mmap.PAGESIZE // 1024  # both maps, every page
        advised = mapped.give_back(tmp_path / "index")
        assert advised == 2 * len(data)
        assert resident_kib(inside) == 0
        assert resident_kib(outside) == PAGES * mmap.PAGESIZE // 1024  # "index2" is not below "index"
        assert touch(shared) + touch(private) == expected and shared[:] == data and private[:] == data
    finally:
        for m in (shared, private, other):
            m.close()


def test_a_write_through_a_shared_map_survives_and_a_private_copy_is_never_advised(tmp_path: Path) -> None:
    path = tmp_path / "index" / "column.ipc"
    a_file(path)
    with open(path, "r+b") as f:
        shared = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE)  # rw-s: the file is its backing
        copied = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # rw-p: its written pages are its own
    try:
        shared[0:5] = b"write"
        copied[mmap.PAGESIZE : mmap.PAGESIZE + 4] = b"mine"
        advised = mapped.give_back(tmp_path / "index")
        assert advised == len(shared)  # the shared map only
        assert shared[0:5] == b"write"
        assert copied[mmap.PAGESIZE : mmap.PAGESIZE + 4] == b"mine"  # a private copy: untouched, not zeroed
        shared.flush()
        with open(path, "rb") as f:
            assert f.read(5) == b"write"
    finally:
        shared.close()
        copied.close()


def test_nothing_mapped_below_the_folder_is_nothing_advised(tmp_path: Path) -> None:
    assert mapped.give_back(tmp_path / "nothing here") == 0
    assert mapped.maps(os.fspath(tmp_path)) == []
