"""The stat cache on real files: a digest stands in for an entry only under the entry file's stat it was read
under; fresh entries are not cached; the cache file round-trips and a damaged one is ignored."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from ragd.pipeline import sidecar, statcache
from ragd.pipeline.digest import Digest
from ragd.pipeline.sidecar import DirLock
from ragd.pipeline.statcache import StatCache, load_dir, stat_key
from ragd.vocabulary import FileState
from tests.support.held import held_by
from tests.unit.pipeline.test_sidecar import _entry


def _written(tmp_path: Path) -> Path:
    with DirLock(tmp_path):
        return sidecar.write_entry(tmp_path, _entry("a.md"))


def _cache_saying(path: Path, digest: Digest) -> StatCache:
    """A cache whose record for `path` has the entry file's current stat and `digest`."""
    record = orjson.dumps([stat_key(os.stat(path)), digest.to_json()])
    return StatCache(None, {str(path.parent.parent): {"a.md": record}})


def test_a_digest_stands_in_for_the_entry_only_under_its_stat(tmp_path: Path) -> None:
    path = _written(tmp_path)
    real = Digest.of(_entry("a.md"), "a.md")
    lie = replace(
        real, status=FileState.FAILED
    )  # what the cache says differs from the file: shows which one was used
    cache = _cache_saying(path, lie)
    found = load_dir(tmp_path, cache)
    assert found.live["a.md"] == lie and "a.md" not in found.full and (cache.hits, cache.misses) == (1, 0)
    st = path.stat()
    path.write_bytes(path.read_bytes())  # rewritten in place: same size, inode and mtime, a new ctime
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    found = load_dir(tmp_path, cache)
    assert found.live["a.md"] == real and cache.misses == 1


def test_a_folder_read_keeps_its_digests_not_its_entries(tmp_path: Path) -> None:
    """A job over a big folder held every entry it read, chunks and vectors (~10 KiB a file): 30,000 notes put
    some 300 MiB on the agent for as long as the job ran (issue 36). Only the digests stay."""
    with DirLock(tmp_path):
        for i in range(20):
            sidecar.write_entry(tmp_path, _entry(f"n{i}.md"))
    found = load_dir(tmp_path, StatCache())
    assert len(found.live) == 20 and found.full == {}


def test_a_folder_read_holds_under_a_kilobyte_an_entry(tmp_path: Path) -> None:
    """A job holds what it read of every entry of its folder until it ends, and the job that follows a big folder's
    first one reads them all (none is in the stat cache yet): 1.7 KiB an entry (a whole `os.stat_result` and a
    digest with its own copies of the strings every entry repeats) put 50 MiB on the agent at 30,000 notes, on top
    of what it held already (issue 36)."""
    with DirLock(tmp_path):
        for i in range(300):
            entry = _entry(f"note{i:06d}.md")
            md5 = hashlib.md5(str(i).encode()).hexdigest()
            sidecar.write_entry(tmp_path, replace(entry, source=replace(entry.source, md5_hash=md5)))
    # what the read allocated and `found` still holds (no records for a cache: whether an entry is old enough is
    # timing)
    found, held_bytes = held_by(statcache.__file__, lambda: load_dir(tmp_path, None), frames=64)
    held = held_bytes / len(found.live)
    assert len(found.live) == 300
    assert held < 1024, f"{held:.0f} bytes an entry"
    assert (
        found.modes["note000000.md"].st_mode == os.stat(sidecar.entry_path(tmp_path, "note000000.md")).st_mode
    )


def test_a_record_takes_its_own_size() -> None:
    """The cache keeps a record for every file of the tree: each must cost its length, not orjson's 4 KiB buffer.
    Only what statcache.py allocated and still holds is counted (the process's other threads allocate meanwhile:
    a pool's threads left by an earlier test of the same process made the whole process's figure 1.6 KiB)."""
    digest = Digest.of(_entry("a.md"), "a.md")
    tracemalloc.start()
    try:
        records = [statcache._record((1, 2, 3, 4, 5), digest) for _ in range(100)]
        ours = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, statcache.__file__)])
        held = sum(stat.size for stat in ours.statistics("filename")) / len(records)
    finally:
        tracemalloc.stop()
    assert held > len(records[0])  # the records are what was counted
    assert held < 2 * len(records[0]) + 200


def test_an_entry_changed_within_the_racy_window_is_not_cached(tmp_path: Path) -> None:
    _written(tmp_path)
    found = load_dir(tmp_path, StatCache())
    assert found.live["a.md"] == Digest.of(_entry("a.md"), "a.md") and found.records == {}


def test_the_cache_file_round_trips_and_a_damaged_one_is_ignored(tmp_path: Path) -> None:
    path = _written(tmp_path)
    digest = Digest.of(_entry("a.md"), "a.md")
    assert Digest.from_json(digest.to_json()) == digest
    record = _cache_saying(path, digest).get(str(tmp_path), "a.md")
    assert record is not None
    file = tmp_path / statcache.FILE_NAME
    cache = StatCache(file)
    cache.replace(str(tmp_path), {"a.md": record})
    cache.save()
    loaded = StatCache.load(tmp_path)
    assert loaded.get(str(tmp_path), "a.md") == cache.get(str(tmp_path), "a.md")
    raw = file.read_bytes()
    head, _, body = raw.partition(b"\n")
    file.write_bytes(head + b"\n" + body.replace(b'"a.md"', b'"b.md"'))  # its md5 no longer matches
    assert StatCache.load(tmp_path).get(str(tmp_path), "b.md") is None
    assert StatCache.load(tmp_path).get(str(tmp_path), "a.md") is None
    file.write_bytes(b"not a cache")
    assert StatCache.load(tmp_path).get(str(tmp_path), "a.md") is None


def test_a_folder_renamed_or_moved_keeps_its_records(tmp_path: Path) -> None:
    """Its records are found under its old path by its store's identity: the job of a 30,000-note folder
    renamed read every entry again. A folder made anew under the old name has a `.rag/` of its own: no record of
    the other is ever its."""
    old = tmp_path / "notes"
    old.mkdir()
    path = _written(old)
    digest = Digest.of(_entry("a.md"), "a.md")
    cache = StatCache()
    statcache.keep(cache, old, load_dir(old, _cache_saying(path, digest)), changed=())
    new = tmp_path / "notes renamed"
    old.rename(new)
    found = load_dir(new, cache)
    assert found.live["a.md"] == digest and (cache.hits, cache.misses) == (1, 0)
    assert cache.get(str(new), "a.md") is not None and cache.get(str(old), "a.md") is None
    statcache.keep(cache, new, found, changed=())
    (tmp_path / "elsewhere").mkdir()
    moved = tmp_path / "elsewhere" / "notes"
    new.rename(moved)
    old.mkdir()  # a new folder under the first name, its own entries
    _written(old)
    assert load_dir(old, cache).records == {} and cache.misses == 1  # read: too fresh to be cached
    assert load_dir(moved, cache).live["a.md"] == digest and cache.hits == 2


def test_a_record_of_another_shape_is_a_miss(tmp_path: Path) -> None:
    path = _written(tmp_path)
    cache = StatCache(None, {str(tmp_path): {"a.md": orjson.dumps([stat_key(os.stat(path)), ["EMBEDDED"]])}})
    found = load_dir(tmp_path, cache)
    assert found.live["a.md"] == Digest.of(_entry("a.md"), "a.md") and cache.misses == 1


def test_a_writer_that_died_mid_write_leaves_no_debris(tmp_path: Path) -> None:
    """A tmp file of a dead writer (a kill during save) is removed by the next load; a live writer's is left."""
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        left = tmp_path / f"{statcache.FILE_NAME}.{dead.pid}.tmp"
        writing = tmp_path / f"{statcache.FILE_NAME}.{live.pid}.tmp"
        for tmp in (left, writing):
            tmp.write_bytes(b"half a cache")
        StatCache.load(tmp_path)
        assert not left.exists() and writing.exists()
    finally:
        live.kill()
        live.wait()


def test_an_entry_gone_between_the_listing_and_its_read_is_as_if_never_listed(tmp_path: Path) -> None:
    """A store being deleted (`rm -r` of its folder) under the job reading it: each entry gone since the listing
    was a warning "cannot read sidecar … No such file or directory" (53 in a row, found by the soak). Such an entry
    is simply not there; one that cannot be read for another reason still says why."""
    _written(tmp_path)
    store = tmp_path / sidecar.RAG_DIR
    # listed, and no file to open: as if deleted since
    (store / "gone.md.ragjson").symlink_to(store / "nowhere")
    (store / "odd.md.ragjson").mkdir()
    found = load_dir(tmp_path, StatCache())
    assert set(found.live) == {"a.md"} and "gone.md" not in found.unreadable
    assert set(found.unreadable) == {"odd.md"}


def _big_cache(where: Path, dirs: int, files: int) -> StatCache:
    """A cache of `dirs` folders of `files` records each (names with a tab, a quote, a newline and CJK among them),
    as a tree's jobs leave it."""
    digest = Digest.of(_entry("a.md"), "a.md")
    cache = StatCache(where / statcache.FILE_NAME)
    for d in range(dirs):
        folder = where / f'd{d} 源\t"x"'
        folder.mkdir()
        names = [f"n{i:05d}.md" for i in range(files - 1)] + ["odd\t'\n名.md"]
        cache.replace(
            str(folder), {n: statcache._record((d, i, 3, 4, 5), digest) for i, n in enumerate(names)}
        )
    return cache


def test_a_cache_of_many_folders_round_trips_across_the_writes_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written a few lines at a time (here 7, not 1,024), read a line at a time: every record comes back; a file
    cut short, or one whose last record was changed, is ignored whole."""
    monkeypatch.setattr(statcache, "WRITE_LINES", 7)
    cache = _big_cache(tmp_path, 3, 20)
    cache.save()
    loaded = StatCache.load(tmp_path)
    assert loaded._dirs == cache._dirs and sum(map(len, loaded._dirs.values())) == 60
    file = tmp_path / statcache.FILE_NAME
    raw = file.read_bytes()
    head, _, body = raw.partition(b"\n")
    assert orjson.loads(head)["md5"] == hashlib.md5(body).hexdigest()
    file.write_bytes(raw[:-10])
    assert StatCache.load(tmp_path)._dirs == {}
    file.write_bytes(raw[:-1] + (b"0" if raw[-1:] != b"0" else b"1"))
    assert StatCache.load(tmp_path)._dirs == {}


def test_saving_a_big_cache_holds_no_copy_of_the_file(tmp_path: Path) -> None:
    """20,000 records: the save's peak of memory is a small part of the file it writes (made whole in memory it was
    three times the file: its lines, their join, the header added), and loading holds little more than the records."""
    cache = _big_cache(tmp_path, 2, 10_000)
    cache.save()  # (the first save warms up what is allocated once)
    cache._dirty = True
    tracemalloc.start()
    try:
        cache.save()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = (tmp_path / statcache.FILE_NAME).stat().st_size
    assert size > 4_000_000 and peak < size / 4, (size, peak)
    tracemalloc.start()
    try:
        loaded = StatCache.load(tmp_path)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(map(len, loaded._dirs.values())) == 20_000 and peak < 1.5 * held, (held, peak)
