"""Watches on hard-linked files themselves (resident/filewatch.py), on real files and a real inotify instance: a
change made through a path outside the watched one reaches the sink under the watched path; an unwatched file, or
one whose last link went, is not reported; a refused watch is said once for a limit, each time otherwise."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from pathlib import Path

import pytest

from ragd.resident import filewatch
from ragd.resident.filewatch import FileWatch
from tests.support.poll import poll


@pytest.fixture
def seen() -> list[Path]:
    return []


def test_a_change_through_another_link_reaches_the_watched_path(tmp_path: Path, seen: list[Path]) -> None:
    kept, outside = tmp_path / "root" / "a.md", tmp_path / "elsewhere" / "a.md"
    kept.parent.mkdir()
    outside.parent.mkdir()
    kept.write_text("one\n")
    os.link(kept, outside)
    watch = FileWatch(seen.append)
    try:
        watch.watch([kept])
        assert watch.watched() == {kept}
        outside.write_text("two\n")  # the write made through the path no one watches
        poll(lambda: kept in seen, timeout=10, what="the change to reach the watched path")
        seen.clear()
        outside.chmod(0o600)
        poll(lambda: kept in seen, timeout=10, what="the chmod to reach the watched path")
        watch.unwatch([kept])
        seen.clear()
        outside.write_text("three\n")
        assert watch.watched() == set()
    finally:
        watch.close()
    assert seen == []


def test_a_refused_watch_is_said_once_for_a_limit_and_each_time_otherwise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = FileWatch(lambda _path: None)
    try:
        with caplog.at_level(logging.INFO, logger=filewatch.log.name):
            watch.watch([tmp_path / "gone-1.md", tmp_path / "gone-2.md"])  # no such files: said each time
            assert sum("was refused" in r.getMessage() for r in caplog.records) == 2
            monkeypatch.setattr(
                filewatch, "MASK", 0
            )  # the kernel refuses an empty mask (EINVAL), not a limit
            (tmp_path / "here.md").write_text("x")
            watch.watch([tmp_path / "here.md"])
            assert sum("was refused" in r.getMessage() for r in caplog.records) == 3
    finally:
        watch.close()
    assert watch.watched() == set()


class _AtItsLimit:
    """libc as the kernel answers once the user's watches are all used: every new watch refused with ENOSPC."""

    def __init__(self) -> None:
        self.inotify_init1 = filewatch.libc.inotify_init1
        self.inotify_rm_watch = filewatch.libc.inotify_rm_watch

    def inotify_add_watch(self, _fd: int, _path: bytes, _mask: int) -> int:
        ctypes.set_errno(errno.ENOSPC)
        return -1


def test_a_watch_refused_for_the_kernels_limit_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filewatch, "libc", _AtItsLimit())
    watch = FileWatch(lambda _path: None)
    try:
        with caplog.at_level(logging.INFO, logger=filewatch.log.name):
            for name in ("a.md", "b.md", "c.md"):
                (tmp_path / name).write_text("x")
                watch.watch([tmp_path / name])
        said = [r.getMessage() for r in caplog.records if "was refused" in r.getMessage()]
        assert len(said) == 1 and "No space left on device" in said[0], said
        assert watch.watched() == set()
    finally:
        watch.close()
