"""ragd.atomic: the one way the agent replaces a file whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ragd.atomic import atomic_make, atomic_write, sync_dir


def test_a_file_is_replaced_whole_with_its_mode_and_no_temporary_left(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    atomic_write(target, b"new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_failed_write_leaves_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    (tmp_path / "sub").mkdir()
    with pytest.raises(OSError):  # the rename cannot put a file over a folder
        atomic_write(tmp_path / "sub", b"new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "sub"]


def test_the_temporary_goes_where_the_caller_says_and_is_opened_its_way(tmp_path: Path) -> None:
    target, tmps = tmp_path / "entry", tmp_path / "tmp"
    tmps.mkdir()
    opened: list[Path] = []

    def create(p: Path) -> int:
        opened.append(p)
        return os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)

    atomic_write(target, b"x", tmp=tmps / "entry.1.tmp", create=create, sync_folder=False)
    assert opened == [tmps / "entry.1.tmp"] and target.read_bytes() == b"x" and not list(tmps.iterdir())
    assert stat.S_IMODE(target.stat().st_mode) & 0o077 <= 0o040


def test_a_file_a_library_writes_at_a_path_replaces_the_old_one_whole(tmp_path: Path) -> None:
    """`atomic_make`: SQLite (the parsed dictionary's table) writes its file at the temporary path; the target is
    the old file until the rename, and a failure in the writer leaves the old file and no temporary."""
    import contextlib
    import sqlite3

    target, tmp = tmp_path / "table.sqlite", tmp_path / "table.sqlite.1.tmp"
    target.write_bytes(b"old")

    def build(at: Path) -> None:
        assert target.read_bytes() == b"old" and at == tmp
        with contextlib.closing(sqlite3.connect(at)) as db:
            db.execute("CREATE TABLE t (v TEXT)")
            db.execute("INSERT INTO t VALUES ('new')")
            db.commit()

    atomic_make(target, build, tmp=tmp)
    with contextlib.closing(sqlite3.connect(target)) as db:
        assert db.execute("SELECT v FROM t").fetchall() == [("new",)]
    assert [p.name for p in tmp_path.iterdir()] == ["table.sqlite"]

    def broken(at: Path) -> None:
        at.write_bytes(b"half")
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError):
        atomic_make(target, broken, tmp=tmp)
    assert target.read_bytes()[:6] == b"SQLite" and [p.name for p in tmp_path.iterdir()] == ["table.sqlite"]


def test_syncing_a_folder_that_is_not_there_is_no_error(tmp_path: Path) -> None:
    sync_dir(tmp_path / "gone")
    sync_dir(tmp_path)
