from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from ragd.errors import StorageError
from ragd.pipeline import mushroom
from ragd.pipeline.mushroom import Event
from ragd.pipeline.sidecar import DirLock
from tests.conftest import DATA


def test_names_sort_in_creation_order_and_are_unique() -> None:
    names = [mushroom.new_name() for _ in range(2000)]
    assert len(set(names)) == 2000
    assert sorted(names, key=mushroom.sort_key) == names
    assert sorted(names) == names


def _names(q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    q.put([mushroom.new_name() for _ in range(500)])


def test_unique_across_processes_in_the_same_second() -> None:
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_names, args=(q,)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [n for _ in procs for n in q.get(timeout=20)]
    for p in procs:
        p.join()
    assert len(set(got)) == 1500


def test_ragjson_tool_names_sort_with_ours() -> None:
    ours = "20261130T163032.000001Z-10-0.mushroom"
    assert sorted(
        ["20261130T163035Z.mushroom", ours, "20261130T163032Z.mushroom"], key=mushroom.sort_key
    ) == ["20261130T163032Z.mushroom", ours, "20261130T163035Z.mushroom"]


def test_write_read_round_trip_with_odd_names(tmp_path: Path) -> None:
    odd = ['a "quoted" 名字.md', "50%_x.md", "new\nline.md", "emoji 🍄.txt"]
    with DirLock(tmp_path):
        p = mushroom.write(tmp_path, [Event(n, "upsert") for n in odd] + [Event("gone", "dir_delete")])
    assert p is not None
    got = mushroom.read(p)
    assert [e.file for e in got.events] == [*odd, "gone"]
    assert got.directory == tmp_path
    assert mushroom.pending(tmp_path) == [p]


def test_write_coalesces_to_the_last_event_per_name(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        p = mushroom.write(tmp_path, [Event("a", "upsert"), Event("b", "upsert"), Event("a", "delete")])
        assert mushroom.write(tmp_path, []) is None
    assert p is not None
    assert mushroom.read(p).events == (Event("b", "upsert"), Event("a", "delete"))


def test_a_name_that_changed_kind_keeps_its_folders_event_and_its_files(tmp_path: Path) -> None:
    """A folder replaced by a file of its name: the folder's `dir_delete` must survive the file's `upsert`
    (keeping only the last event per name left the folder's files in search)."""
    evs = [Event("d", "dir_delete"), Event("x", "upsert"), Event("d", "upsert"), Event("d", "dir_recover")]
    with DirLock(tmp_path):
        p = mushroom.write(tmp_path, evs)
    assert p is not None
    assert mushroom.read(p).events == (Event("x", "upsert"), Event("d", "upsert"), Event("d", "dir_recover"))
    with DirLock(tmp_path):
        p = mushroom.write(tmp_path, evs[:3])
    assert p is not None
    assert mushroom.read(p).events == tuple(evs[:3])


def test_reads_the_ragjson_tools_pending_mushrooms() -> None:
    docs = DATA / "ragjson-0.5.1" / "tree" / "docs"
    pend = mushroom.pending(docs)
    assert [p.name for p in pend] == ["20261130T163032Z.mushroom", "20261130T163035Z.mushroom"]
    first, second = (mushroom.read(p) for p in pend)
    assert Event("old.md", "upsert") in first.events
    assert second.events == (Event("gone", "dir_delete"), Event("old.md", "delete"))


def test_malformed_mushroom_is_reported(tmp_path: Path) -> None:
    (tmp_path / ".rag").mkdir()
    bad = tmp_path / ".rag" / "20260101T000000Z.mushroom"
    bad.write_text('{"file": "a", "status": "upsert"}\n{"file": "b", "status": "explode"}\n')
    with pytest.raises(StorageError, match="unknown status 'explode' at line 2"):
        mushroom.read(bad)
    bad.write_text("not json\n")
    with pytest.raises(StorageError, match="malformed line 1"):
        mushroom.read(bad)


def test_mushrooms_are_private_and_never_name_what_is_not_utf8(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        p = mushroom.write(tmp_path, [Event("a.md", "upsert")])
        assert p is not None and stat.S_IMODE(p.stat().st_mode) == 0o600
        again = mushroom.rewrite(p, [Event("a.md", "upsert"), Event("b.md", "delete")])
        assert again == p and stat.S_IMODE(p.stat().st_mode) == 0o600
        assert [e.file for e in mushroom.read(p).events] == ["a.md", "b.md"]
        with pytest.raises(ValueError, match="not valid UTF-8"):
            mushroom.write(tmp_path, [Event(os.fsdecode(b"caf\xe9.txt"), "upsert")])
    assert mushroom.pending(tmp_path) == [p]
