"""A big folder's job and the index writer (issue 36): a job that reports in steps is bulk work, not an edit on its
way, even when a change seen in its folder started it. The whole agent in-process, the fake embeddings API."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ragd.config import Config, data_dir, load_config
from ragd.index import open_index
from ragd.index.write import sync as sync_module
from ragd.index.write import writer
from ragd.index.write.sync import IndexSync
from ragd.index.write.writer import Indexer
from ragd.index.zvec import upkeep
from ragd.pipeline import sidecar
from ragd.pipeline.rounds import FILES_PER_ROUND
from ragd.pipeline.scan import Ignore
from tests.e2e.conftest import api_config_text
from tests.integration.helpers import run
from tests.integration.test_index_sync import assert_index_equals_sidecars
from tests.integration.test_index_sync_batch import body, small_chunks_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process, control
from tests.support.opens import OpenWatch
from tests.support.poll import poll


def test_a_big_folders_job_stops_counting_as_an_edit_once_it_reports_in_steps(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Files written into a watched folder start an express job there (an edit on its way: the index writer then
    works in an editor's small steps, 16 notes a batch and a flush every 10 s, each flush a block of the index's
    memory). Once that job reports its first step it is a big folder's, and the writer no longer waits for it as
    for an edit; before, it did for the whole job (a folder of 30,000 notes, minutes)."""
    root = tmp_path / "kb"
    notes = root / "notes"
    notes.mkdir(parents=True)
    (notes / "first.md").write_text("# First\n\nan early note\n", encoding="utf-8")
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(
        f'roots = ["{root}"]\n' + api_config_text(fake_openai_server, watch={"quiet": 0.2, "ceiling": 1.0})
    )
    files = FILES_PER_ROUND * 4
    with agent_in_process(load_config(config_file), [], config_path=config_file) as life:
        control(life, "wait", {"timeout": 60})
        agent = life.agent

        def embedded() -> int:
            return int(control(life, "status")["roots"][0]["files"].get("EMBEDDED", 0))

        # No embedding is answered until the end, so the job runs until then whatever the machine's speed; and the
        # job is held back until it is seen queued as an edit's: its first step (the plan's) comes within
        # milliseconds of its start, which a poll for the running job missed (CI, twice).
        fake_openai_server.hold_next(files * 2)
        agent.scheduler.pause()
        for i in range(files):
            (notes / f"n{i:04d}.md").write_text(f"# Note {i}\n\nsteptoken {i} 标记 {i}\n", encoding="utf-8")
        poll(
            lambda: agent.scheduler.has(notes) and not agent.debouncer.pending(),
            timeout=30,
            every=0.01,
            what="the folder's job queued",
        )
        assert agent._edit_coming(), "the job for files written in the folder is an edit's (express)"
        agent.scheduler.resume()
        poll(
            lambda: not agent._edit_coming(),
            timeout=30,
            every=0.01,
            what="the job to stop counting as an edit",
        )
        assert agent.scheduler.has(notes) and embedded() == 1, "the job still runs (no embedding answered)"
        fake_openai_server.release()
        control(life, "wait", {"timeout": 120})
        assert embedded() == files + 1


def change_notes(tmp_path: Path, server: FakeOpenAI, folders: int) -> tuple[Config, Path, list[Path]]:
    """A change note for each of `folders` folders of three notes, written and not applied."""
    root = tmp_path / "kb"
    for d in range(folders):
        (root / f"d{d:02d}").mkdir(parents=True)
        for i in range(3):
            (root / f"d{d:02d}" / f"n{i}.md").write_text(body(f"d{d}n{i}", 3))
    cfg = small_chunks_config(server, root)
    assert run(cfg, index=False).ok
    notes = sorted(root.rglob("*.mushroom"))
    assert len(notes) >= folders
    return cfg, root, notes


def test_the_flushes_grow_rarer_while_a_long_stream_of_writes_goes_on(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While more keeps coming without a pause (a big folder's job), the writer flushes every FLUSH_EVERY_S, then
    twice as long after each flush, up to FLUSH_LONG_S: fewer blocks of memory for the index, and no compaction
    needed during a job of 30,000 notes. Searches see every note before its flush; a crash applies again the notes
    not flushed (they stay on disk until then)."""
    monkeypatch.setattr(writer, "FLUSH_EVERY_S", 0.3)
    monkeypatch.setattr(writer, "FLUSH_LONG_S", 2.4)
    cfg, root, notes = change_notes(tmp_path, fake_openai_server, 5)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    coming = threading.Event()
    coming.set()
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=coming.is_set)
    indexer.start()
    took: list[float] = []
    try:
        for n in notes[:4]:
            started = time.monotonic()
            indexer.put_mushroom(n)
            poll(lambda n=n: not n.exists(), timeout=30, every=0.02, what="the note to be flushed")
            took.append(time.monotonic() - started)
        assert took[3] >= 2.3 and took[2] >= 1.1 and took[1] >= 0.55, took  # 0.3, 0.6, 1.2, then 2.4 s
        coming.clear()  # a pause: flushed at once, and the next stream starts again at FLUSH_EVERY_S
        indexer.put_mushroom(notes[4])
        poll(lambda: not notes[4].exists(), timeout=30, every=0.02, what="the note to be flushed in a pause")
        # the flush deletes the note, then counts itself: the count is read once the writer has done so
        poll(lambda: indexer._doubled != 4, timeout=5, every=0.01, what="the flush to be counted")
        assert indexer._doubled == 0
    finally:
        indexer.stop()
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_a_long_stream_of_writes_is_flushed_after_flush_chunks_chunks_whatever_the_time(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zvec and the keyword index hold what was written until its flush (~3 KiB a chunk): at 240 s between two
    flushes a 100,000-note job held ~100 MiB more before each. Now the writer flushes, while more keeps coming,
    as soon as FLUSH_CHUNKS chunks were written since the last flush, and not before when fewer were."""
    monkeypatch.setattr(writer, "FLUSH_EVERY_S", 120.0)  # the time never comes in this test
    cfg, root, notes = change_notes(tmp_path, fake_openai_server, 2)
    first, second = notes  # a folder's note each
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=lambda: True)
    indexer.start()
    try:
        indexer.put_mushroom(first)
        poll(lambda: indexer.pending() == 0 and idx.count() > 0, what="the first note to be applied")
        written = indexer.sync.written
        assert written == idx.count() > 1
        monkeypatch.setattr(sync_module, "FLUSH_CHUNKS", written + 1)  # one note's chunks are not enough
        time.sleep(0.5)
        assert first.exists(), "flushed with fewer than FLUSH_CHUNKS chunks written and FLUSH_EVERY_S to come"
        indexer.put_mushroom(second)  # as many chunks again: past FLUSH_CHUNKS
        poll(lambda: not first.exists() and not second.exists(), timeout=10, every=0.02,
             what="the notes to be flushed once FLUSH_CHUNKS chunks were written")  # fmt: skip
        assert indexer.sync.written >= written + 1
    finally:
        indexer.stop()
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_a_big_subtree_re_synced_in_one_go_is_flushed_every_flush_chunks_chunks(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder renamed is re-synced from its sidecars in one go (`dir_recover`): a 100,000-note folder's chunks were
    all held by zvec and the keyword index until the one flush at its end (~3 KiB a chunk). The re-sync flushes
    whenever FLUSH_CHUNKS chunks were written since its last flush, and the index ends equal to the sidecars."""
    cfg, root, _ = change_notes(tmp_path, fake_openai_server, 4)
    (root / "d00").rename(root / "d00 renamed")
    monkeypatch.setattr(sync_module, "STAGE_CHUNKS", 2)  # written a few at a time ...
    monkeypatch.setattr(sync_module, "FLUSH_CHUNKS", 4)  # ... and flushed after every fourth chunk or so
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    flushes = []
    real_flush = idx.flush
    monkeypatch.setattr(idx, "flush", lambda: (flushes.append(idx.count()), real_flush())[-1])
    gave_back: list[int] = []  # after each flush along the way, what the writes freed is given back
    try:
        resync = IndexSync(
            idx, cfg.identity, [root], Ignore(cfg.ignore), give_back=lambda: gave_back.append(idx.count())
        )
        resync.sync_subtree(root)
        chunks = idx.count()
    finally:
        idx.close()
    # along the way, not only at the end
    assert chunks > 8 and len(flushes) >= 3 and flushes[0] < chunks, f"{chunks} chunks, flushed at {flushes}"
    assert flushes == sorted(flushes)
    assert gave_back == flushes[:-1], (
        "given back after each flush but the last (the writer's pause gives that back)"
    )
    assert_index_equals_sidecars(cfg, root)


def test_a_subtree_re_synced_reads_each_sidecar_once(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    """A folder renamed is re-synced from its sidecars: each is read once, compared with what the index holds and
    written from what was read (each was read twice, for its md5 and then for its chunks: a 30,000-note folder's
    rename spent 1.2 ms of the agent's CPU a file). What the index holds then is what the sidecars say."""
    cfg, root, _ = change_notes(tmp_path, fake_openai_server, 2)
    assert run(cfg).ok
    (root / "d00").rename(root / "d00 renamed")
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    try:
        resync = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore))
        store = root / "d00 renamed" / sidecar.RAG_DIR
        with OpenWatch(store) as seen:
            assert resync.sync_subtree(root / "d00 renamed") == 3
            read = [name for name in seen.names() if name.endswith(sidecar.ENTRY_SUFFIX)]
        assert sorted(read) == sorted(p.name for p in store.glob(f"*{sidecar.ENTRY_SUFFIX}")), read
        resync.sync_subtree(root / "d00")  # the old name's: dropped (its note's `dir_delete`)
    finally:
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_the_index_blocks_stay_bounded_during_a_long_stream_of_writes(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every flush that writes adds a block zvec keeps in memory; the compaction that folds them waited for a pause,
    which a big folder's job never gives (~110 blocks in a job of 30,000 notes). With more always coming, the writer
    now compacts once they pass BUSY_COMPACT_BLOCKS, losing nothing, and the index stays searchable throughout."""
    monkeypatch.setattr(
        upkeep, "BUSY_COMPACT_BLOCKS", 4
    )  # the threshold, not the behaviour: 24 flushes are slow
    monkeypatch.setattr(writer, "FLUSH_EVERY_S", 0.2)
    monkeypatch.setattr(writer, "FLUSH_LONG_S", 0.2)  # every flush as soon as it may be: a block each
    cfg, root, notes = change_notes(tmp_path, fake_openai_server, 12)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    released: list[int] = []  # the agent gives the compaction's freed memory back to the system at once
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=lambda: True,
                      compacted=lambda: released.append(idx.blocks))  # fmt: skip
    indexer.start()
    most = 0
    try:
        for (
            n
        ) in notes:  # one note after the other, each flushed on its own while more is coming: a block each
            indexer.put_mushroom(n)
            poll(lambda n=n: not n.exists(), timeout=30, what="the note to be flushed while more was coming")
            assert idx.query(vector=None, text="lighthouses", k=1)  # searchable throughout
            most = max(most, idx.blocks)
        poll(lambda: not indexer.busy(), timeout=30, what="the writer to finish")
        assert most <= 5, f"{most} blocks piled up while more was coming"
        assert released and all(b == 1 for b in released), released
    finally:
        indexer.stop()
        idx.close()
    assert_index_equals_sidecars(cfg, root)
