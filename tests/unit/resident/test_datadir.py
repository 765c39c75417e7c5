"""The data directory check (resident/datadir.py) and the instance lock taken again, on real files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ragd.resident import datadir
from ragd.resident.instance import InstanceLock, holds_deleted


def _guard(home: Path, unsteady: bool = False) -> datadir.DataDirGuard:
    (home / "index" / "coll").mkdir(parents=True)
    (home / "history.sqlite3").write_text("")
    guard = datadir.DataDirGuard(home, unsteady=lambda: unsteady)
    parts = [datadir.present(datadir.INDEX, home / "index"),
             datadir.present(datadir.INDEX, home / "index" / "coll", inode=False),
             datadir.present(datadir.HISTORY, home / "history.sqlite3")]  # fmt: skip
    guard.remember(p for p in parts if p is not None)
    return guard


def test_a_loss_is_acted_on_when_the_next_check_sees_the_same(tmp_path: Path) -> None:
    guard = _guard(tmp_path / "data")
    assert guard.check() == frozenset() and not guard.suspect
    (tmp_path / "data" / "history.sqlite3").unlink()
    assert guard.suspect  # there, though no check saw it yet (the main loop's tick is late): not idle
    assert guard.check() == frozenset() and guard.suspect  # seen once: not idle, not acted on yet
    shutil.rmtree(tmp_path / "data" / "index")
    assert guard.check() == frozenset()  # still changing (a rm -rf under way)
    assert guard.check() == {datadir.INDEX, datadir.HISTORY}
    assert guard.suspect  # acted on, not made again yet
    (tmp_path / "data" / "index").mkdir()
    (tmp_path / "data" / "history.sqlite3").write_text("")
    guard.remember(_parts(tmp_path / "data"), made_again=True)
    assert not guard.suspect


def test_the_data_directory_replaced_loses_every_part(tmp_path: Path) -> None:
    home = tmp_path / "data"
    guard = _guard(home)
    home.rename(tmp_path / "old")
    shutil.copytree(tmp_path / "old", home)  # the same names, other inodes: a restore from a backup
    assert guard.check(at_once=True) == {datadir.WHOLE, datadir.INDEX, datadir.HISTORY}
    assert "the data directory" in datadir.describe(guard.lost(), home)


def _parts(home: Path) -> list[datadir.Part]:
    found = [
        datadir.present(datadir.INDEX, home / "index"),
        datadir.present(datadir.HISTORY, home / "history.sqlite3"),
    ]
    return [p for p in found if p is not None]


def test_a_loss_is_not_forgotten_when_the_parts_are_remembered_meanwhile(tmp_path: Path) -> None:
    """`ragctl roots add` while the data directory is being deleted remembers what is there then: the index that
    vanished must stay a loss (it was dropped from the watch, and the change notes failed on for good)."""
    home = tmp_path / "data"
    guard = _guard(home)
    shutil.rmtree(home / "index")
    guard.remember(_parts(home))  # the roots changed: what is there now
    assert guard.check(at_once=True) == {datadir.INDEX}


def test_parts_made_again_replace_the_lost_ones(tmp_path: Path) -> None:
    home = tmp_path / "data"
    guard = _guard(home)
    shutil.rmtree(home / "index")
    (home / "index").mkdir()  # the recovery made it again: a new inode
    guard.remember(_parts(home), made_again=True)
    assert guard.check(at_once=True) == frozenset()


def test_an_index_deleted_again_while_it_was_rebuilt_stays_a_loss(tmp_path: Path) -> None:
    """The data directory deleted a second time while the index was being rebuilt (something wrote to the data
    directory again meanwhile): the parts remembered after the rebuild lack the collection. It must be a loss, not
    dropped from the watch (every change note then failed on a missing file of the index, for good)."""
    home = tmp_path / "data"
    guard = _guard(home)
    shutil.rmtree(home)
    home.mkdir()  # made again by a write into it, with no index/
    found = datadir.parts(home, collection=home / "index" / "coll", history=None, roots=False)
    guard.remember(found, made_again=True)
    assert guard.check(at_once=True) == {datadir.INDEX}


def test_a_collection_replaced_on_purpose_is_not_a_loss(tmp_path: Path) -> None:
    """A compaction swaps the collection for its copy: only its presence counts, and not while it runs."""
    guard = _guard(tmp_path / "data", unsteady=True)
    (tmp_path / "data" / "index" / "coll").rename(tmp_path / "data" / "index" / "coll.compacted")
    assert guard.lost() == frozenset()


def test_the_instance_lock_is_taken_again_after_its_file_vanished(tmp_path: Path) -> None:
    home = tmp_path / "data"
    lock = InstanceLock(home)
    lock.acquire()
    try:
        shutil.rmtree(home)
        assert holds_deleted(os.getpid(), lock.path)
        assert lock.renew()
        assert lock.path.is_file() and not holds_deleted(os.getpid(), lock.path)
        assert InstanceLock(home).pid_of_holder() == os.getpid()
    finally:
        lock.release()
