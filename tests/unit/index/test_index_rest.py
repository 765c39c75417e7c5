"""An index at rest: closed while nothing uses it (its memory given back), opened again by its next use."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexBusy
from ragd.index import IndexBackend, collection_dir, open_index
from ragd.index.zvec import health, reads
from tests.support import smaps
from tests.unit.index.test_index_zvec import HOLDER, IDENTITY, embed, load_corpus, rel_paths


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexBackend]:
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    load_corpus(
        ix, tmp_path / "kb", {"a.md": ["alpha text about disks"], "b.md": ["beta 文本 about networks"]}
    )
    ix.flush()
    yield ix
    ix.close()


def test_a_query_after_a_rest_opens_the_collection_again_and_finds_the_same(
    index: IndexBackend, tmp_path: Path
) -> None:
    before = index.query(vector=embed("beta networks"), text="beta 文本", k=2)
    assert index.rest() and index.resting
    assert not index.rest()  # resting already
    assert index.count() == 2 and index.resting  # the count needs no collection
    after = index.query(vector=embed("beta networks"), text="beta 文本", k=2)
    assert not index.resting
    assert [(h.source_path, h.chunk_index) for h in after] == [(h.source_path, h.chunk_index) for h in before]
    assert rel_paths(after, tmp_path / "kb")[0] == "b.md"


def test_a_write_after_a_rest_lands_and_lasts(index: IndexBackend, tmp_path: Path) -> None:
    assert index.rest()
    load_corpus(index, tmp_path / "kb", {"c.md": ["gamma text"]})
    assert not index.resting and index.count() == 3
    index.flush()
    assert index.rest()
    index.close()
    again = open_index(tmp_path / "data", IDENTITY, IndexConfig(), read_only=True)
    try:
        assert sorted(rel_paths(again.query(vector=None, text="gamma", k=3), tmp_path / "kb")) == ["c.md"]
    finally:
        again.close()


def test_a_resting_collection_stays_held_and_stamped(index: IndexBackend, tmp_path: Path) -> None:
    """No other writer (`ragd run --once`, a second agent) takes it meanwhile; it was closed cleanly."""
    assert index.rest()
    path = collection_dir(tmp_path / "data", IDENTITY)
    assert health.stamp_matches(path)
    with pytest.raises(IndexBusy):
        open_index(tmp_path / "data", IDENTITY, IndexConfig())
    holder = subprocess.run([sys.executable, "-c", HOLDER, str(tmp_path / "data")], input="", capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert holder.returncode != 0 and "held by another process" in holder.stderr
    index.close()  # lets go of it
    open_index(tmp_path / "data", IDENTITY, IndexConfig()).close()


def test_idle_time_counts_from_the_last_use(index: IndexBackend) -> None:
    index.query(vector=None, text="alpha", k=1)
    assert index.idle_s() < 5
    first = index.idle_s()
    assert index.idle_s() >= first


def test_many_readers_waking_it_together_open_it_once(index: IndexBackend) -> None:
    assert index.rest()
    errors: list[BaseException] = []
    found: list[int] = []

    def ask() -> None:
        try:
            found.append(len(index.query(vector=None, text="alpha", k=2)))
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and found == [1] * 8 and not index.resting


def test_a_read_only_handle_does_not_rest(tmp_path: Path, index: IndexBackend) -> None:
    index.close()
    ro = open_index(tmp_path / "data", IDENTITY, IndexConfig(), read_only=True)
    try:
        assert not ro.rest() and not ro.resting
    finally:
        ro.close()


def test_close_while_resting_lets_go(index: IndexBackend, tmp_path: Path) -> None:
    assert index.rest()
    index.close()
    assert not index.resting
    assert not index.rest()
    open_index(tmp_path / "data", IDENTITY, IndexConfig()).close()


def test_the_pages_of_the_collections_files_are_given_back_and_searches_find_the_same(
    index: IndexBackend, tmp_path: Path
) -> None:
    """An idle agent gives back the pages its searches and writes touched in the collection's mapped files
    (ragd/mapped.py): out of its resident set, the next search as before."""
    before = index.query(vector=embed("beta networks"), text="beta 文本", k=2)
    path = collection_dir(tmp_path / "data", IDENTITY)
    assert resident_kib_below(path) > 0
    assert index.give_back_pages() > 0
    assert resident_kib_below(path) == 0
    after = index.query(vector=embed("beta networks"), text="beta 文本", k=2)
    assert [(h.source_path, h.chunk_index, h.score) for h in after] == [
        (h.source_path, h.chunk_index, h.score) for h in before
    ]
    assert index.rest() and index.give_back_pages() == 0  # resting: nothing mapped


def test_a_listing_in_parts_gives_back_the_pages_it_read(
    index: IndexBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing of more than ONE_QUERY documents (the verification's of the whole index) reads every document's
    fields through the collection's mapped files: ~40 MiB of the agent's memory after a 100,000-chunk job, kept until
    the agent was next idle. They are given back as the listing ends; a smaller listing (a folder's) leaves them."""
    # the threshold, not the behaviour: the index holds two documents
    monkeypatch.setattr(reads, "ONE_QUERY", 1)
    path = collection_dir(tmp_path / "data", IDENTITY)
    index.give_back_pages()
    assert sorted(index.sources(None)) == [str(tmp_path / "kb" / "a.md"), str(tmp_path / "kb" / "b.md")]
    assert resident_kib_below(path) == 0
    monkeypatch.setattr(reads, "ONE_QUERY", 4096)
    assert sorted(index.sources(str(tmp_path / "kb"))) == [
        str(tmp_path / "kb" / "a.md"),
        str(tmp_path / "kb" / "b.md"),
    ]
    assert resident_kib_below(path) > 0


def test_giving_pages_back_never_waits_for_a_write_an_optimize_or_a_compaction(index: IndexBackend) -> None:
    """The agent's main loop gives the pages back when it becomes idle, which it may be while the writer optimizes
    (a minute at 100,000 chunks: systemd's watchdog would kill a main loop that long away): it skips instead."""
    index.query(vector=None, text="alpha", k=1)
    held, release = threading.Event(), threading.Event()

    def writer() -> None:  # what every write, optimize and compaction holds while it runs
        with index._write_lock:  # type: ignore[attr-defined]
            held.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert held.wait(10)
        assert index.give_back_pages() == 0  # at once, not after the writer
    finally:
        release.set()
        thread.join()
    assert index.give_back_pages() > 0


def resident_kib_below(folder: Path) -> int:
    return smaps.resident_kib(lambda name: name.startswith(f"{folder}/"))
