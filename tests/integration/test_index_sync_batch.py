"""Index sync writes a batch of change notes together: exact results, failures charged to their own note, and
reconcile repairing what the per-source record cannot see."""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from pathlib import Path

import pytest

from ragd.config import Config, data_dir
from ragd.index import open_index
from ragd.index.keyword import keywords
from ragd.index.write import writer
from ragd.index.write.sync import STAGE_CHUNKS, IndexSync
from ragd.index.write.writer import Indexer
from ragd.index.zvec.backend import ZvecIndex
from ragd.index.zvec.schema import doc_id, to_doc
from ragd.pipeline import mushroom, sidecar
from ragd.pipeline.scan import Ignore
from ragd.vocabulary import NoteStatus
from tests.integration.helpers import run
from tests.integration.test_index_sync import assert_index_equals_sidecars
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


def small_chunks_config(server: FakeOpenAI, root: Path) -> Config:
    emb = {"provider": "openai", "model": "fake-embed-8", "dimension": server.dim, "base_url": server.base_url,
           "api_key": "sk-test-key-123456", "retries": 2, "max_backoff": 0.2, "timeout": 5}  # fmt: skip
    return Config.model_validate(
        {"roots": [str(root)], "embedding": emb, "splitter": {"chunk_size": 60, "chunk_overlap": 0}}
    )


def body(name: str, lines: int, version: str = "v1") -> str:
    return "\n\n".join(f"{version} line {i} of {name} about lighthouses" for i in range(lines))


def notes_in_a(tmp_path: Path, server: FakeOpenAI, files: int, lines: int) -> tuple[Path, Config]:
    """A root whose folder `a` holds `files` notes of `lines` lines, their sidecars written and their change notes
    not applied: (the root, the config)."""
    root = tmp_path / "kb"
    (root / "a").mkdir(parents=True)
    for i in range(files):
        (root / "a" / f"n{i}.md").write_text(body(f"a{i}", lines))
    cfg = small_chunks_config(server, root)
    assert run(cfg, index=False).ok
    return root, cfg


def one_note(tmp_path: Path, server: FakeOpenAI, lines: int) -> tuple[Path, Config, Path]:
    """A root with one note of `lines` lines, its sidecar written and its change note not applied: (the root, the
    config, the change note)."""
    root, cfg = notes_in_a(tmp_path, server, 1, lines)
    (note,) = sorted(root.rglob("*.mushroom"))
    return root, cfg, note


def chunk_total(cfg: Config) -> int:
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    try:
        return idx.count()
    finally:
        idx.close()


def test_a_batch_larger_than_one_write_is_applied_exactly(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    for d in ("a", "b", "c"):
        (root / d).mkdir(parents=True)
        for i in range(10):
            (root / d / f"n{i}.md").write_text(body(f"{d}{i}", 40))
    cfg = small_chunks_config(fake_openai_server, root)
    assert run(cfg).ok
    assert_index_equals_sidecars(cfg, root)
    assert chunk_total(cfg) > STAGE_CHUNKS  # the batch was written in several parts
    for d in ("a", "b", "c"):
        for i in range(0, 10, 3):
            (root / d / f"n{i}.md").write_text(body(f"{d}{i}", 5, "v2"))  # shrunk
        (root / d / "n1.md").unlink()  # deleted
        (root / d / "n2.md").write_text(body(f"{d}2", 70, "v2"))  # grown
        (root / d / "fresh.md").write_text(body(f"{d}-fresh", 30))  # new
    s = run(cfg)
    assert s.ok and s.index.get("mushrooms_failed") == []
    assert_index_equals_sidecars(cfg, root)


def _setup_two_dirs(tmp_path: Path, server: FakeOpenAI) -> tuple[Config, Path]:
    root = tmp_path / "kb"
    for d in ("a", "b"):
        (root / d).mkdir(parents=True)
        for n in ("x.md", "y.md"):
            (root / d / n).write_text(body(d + n, 3))
    cfg = small_chunks_config(server, root)
    assert run(cfg).ok
    return cfg, root


def test_notes_whose_writes_fail_stay_for_a_retry(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    cfg, root = _setup_two_dirs(tmp_path, fake_openai_server)
    (root / "a" / "x.md").write_text(body("ax", 6, "v2"))
    (root / "b" / "y.md").unlink()
    notes = [mushroom.write(root / "a", [mushroom.Event("x.md", NoteStatus.UPSERT)]),
             mushroom.write(root / "b", [mushroom.Event("y.md", NoteStatus.DELETE)])]  # fmt: skip
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    idx.close()  # every write now fails
    report = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)).apply_batch([n for n in notes if n])
    assert [p for p, _ in report.failed] == notes and report.mushrooms == 0
    assert all("closed" in why for _, why in report.failed)
    assert all(n is not None and n.exists() for n in notes)
    s = run(cfg)  # applied on the next run
    assert s.ok and s.index.get("mushrooms_failed") == []
    assert_index_equals_sidecars(cfg, root)


def test_reconcile_repairs_what_the_chunk_record_cannot_see(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """States an older ragd could leave at a crash: chunks past the count its chunk 0 records, and chunks left
    without their chunk 0. Change notes trust the record; the start-up reconcile lists the index and repairs."""
    cfg, root = _setup_two_dirs(tmp_path, fake_openai_server)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    try:
        assert isinstance(idx, ZvecIndex)
        past, headless = str(root / "a/x.md"), str(root / "b/y.md")
        held = idx.chunks(past)
        md5 = idx.sources(past)[past].source_md5
        extra = [to_doc(past, md5, str(root), c, cfg.identity.dimension, len(held))
                 for c in _shifted(idx, past, len(held))]  # fmt: skip
        assert idx._coll is not None
        idx._coll.upsert(extra)
        idx._coll.delete(doc_id(headless, 0))
        idx.flush()
        report = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)).reconcile()
        assert report.repaired == 2
    finally:
        idx.close()
    assert_index_equals_sidecars(cfg, root)


class _CountedWrites:
    """The real index, with its `write_sources` calls counted (each one commits the keyword index)."""

    def __init__(self, idx: ZvecIndex) -> None:
        self._idx, self.calls, self.written = idx, 0, 0

    def write_sources(self, writes: list) -> None:
        self.calls += 1
        self.written += len(writes)
        self._idx.write_sources(writes)

    def __getattr__(self, name: str) -> object:
        return getattr(self._idx, name)


def test_a_folder_named_once_per_round_has_each_of_its_notes_applied_once(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """`ragd run --once` applies the notes of the folders whose jobs reported while the others run; a big folder
    reports a round at a time, so a pass could name it several times, and each of its notes, on disk until the
    pass's flush, was applied (its sources written) once per naming: 2,945 of the referee's 3,878 chunks written
    twice or three times in one run."""
    root, cfg = notes_in_a(tmp_path, fake_openai_server, 5, 3)
    (note,) = mushroom.pending(root / "a")
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    try:
        assert isinstance(idx, ZvecIndex)
        counted = _CountedWrites(idx)
        sync = IndexSync(counted, cfg.identity, [root], Ignore(cfg.ignore))  # type: ignore[arg-type]
        report = sync.apply_pending([root / "a", root / "a", root / "a"])
        assert (report.mushrooms, report.events, counted.written) == (1, 5, 5)
        assert not note.exists()
        report = sync.apply_batch([note, note])  # gone meanwhile: nothing, whatever the naming
        assert (report.mushrooms, counted.written) == (0, 5)
    finally:
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_reconcile_fills_an_empty_index_in_batches_not_a_write_per_source(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    for d in ("a", "b"):
        (root / d).mkdir(parents=True)
        for i in range(30):
            (root / d / f"n{i}.md").write_text(body(f"{d}{i}", 3))
    cfg = small_chunks_config(fake_openai_server, root)
    assert run(cfg).ok
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    try:
        assert isinstance(idx, ZvecIndex)
        for d in ("a", "b"):
            idx.delete_subtree(str(root / d))
        idx.flush()
        assert idx.count() == 0
        counted = _CountedWrites(idx)
        report = IndexSync(counted, cfg.identity, [root], Ignore(cfg.ignore)).reconcile()  # type: ignore[arg-type]
        assert report.repaired == 60 and counted.written == 60
        assert counted.calls == 1  # 60 sources of 3 chunks: one write, one keyword commit
    finally:
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def _shifted(idx: ZvecIndex, path: str, n: int) -> list:
    """Copies of the source's first chunks numbered n, n+1, … (as if a longer version had been there)."""
    from dataclasses import replace

    from ragd.index.write.sync import to_index_chunks

    p = Path(path)
    entry = sidecar.read_entry(sidecar.entry_path(p.parent, p.name))
    assert entry is not None
    return [replace(c, chunk_index=n + c.chunk_index) for c in to_index_chunks(p, entry)]


def test_applied_notes_are_flushed_in_a_pause_or_after_flush_every_s(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index writer flushes (and then deletes) applied notes once nothing else is on its way, or at the
    latest FLUSH_EVERY_S after the first: fewer flushes, fewer of the blocks zvec keeps in memory per flush."""
    root, cfg = notes_in_a(tmp_path, fake_openai_server, 3, 10)
    notes = sorted(root.rglob("*.mushroom"))
    assert notes
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    coming = threading.Event()
    coming.set()  # as while an initial index runs
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=coming.is_set)
    indexer.start()
    try:
        blocks = idx.blocks
        for n in notes:
            indexer.put_mushroom(n)
        poll(lambda: indexer.pending() == 0 and idx.count() > 0, what="the notes to be applied")
        assert idx.query(vector=None, text="lighthouses", k=3)  # searchable before the flush
        assert all(n.exists() for n in notes) and indexer.busy()
        assert not indexer.offer(notes[0])  # applied already: not queued again
        coming.clear()  # a pause
        # the notes go from disk a moment before the writer takes them off its list
        poll(lambda: not any(n.exists() for n in notes) and not indexer.busy(), timeout=10,
             what="the notes to be flushed")  # fmt: skip
        assert idx.blocks <= blocks + 2  # one flush for all of them: one block, or two
        monkeypatch.setattr(writer, "FLUSH_EVERY_S", 0.5)
        coming.set()  # a steady stream of changes: flushed all the same, FLUSH_EVERY_S later
        (root / "a" / "n0.md").write_text(body("a0", 4, "v2"))
        assert run(cfg, index=False).ok
        (late,) = sorted(root.rglob("*.mushroom"))
        indexer.put_mushroom(late)
        poll(lambda: not late.exists(), timeout=10, what="the note to be flushed while more was coming")
    finally:
        indexer.stop()
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_the_periodic_flush_waits_for_an_edit_on_its_way(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During an initial index the writer flushes every FLUSH_EVERY_S, every FLUSH_EDITING_S while someone edits
    (smaller flushes: an edit's note waits less for one under way); while an edit's note is on its way it waits for
    it (a flush took up to 3.4 s that the edit then waited out), up to FLUSH_DEFER_S longer."""
    root, cfg, note = one_note(tmp_path, fake_openai_server, 10)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    edit = threading.Event()
    monkeypatch.setattr(writer, "FLUSH_EVERY_S", 30.0)
    monkeypatch.setattr(writer, "FLUSH_EDITING_S", 0.2)  # the flush's period while someone edits
    monkeypatch.setattr(writer, "FLUSH_DEFER_S", 1.5)
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=lambda: True,
                      edit_coming=edit.is_set)  # fmt: skip
    indexer.start()
    try:
        edit.set()
        indexer.put_mushroom(note)
        poll(lambda: indexer.pending() == 0 and idx.count() > 0, what="the note to be applied")
        time.sleep(0.6)  # past FLUSH_EVERY_S: held back by the edit on its way
        assert note.exists()
        edit.clear()  # the edit's note arrived
        poll(lambda: not note.exists(), timeout=5, what="the flush once no edit is on its way")
        (root / "a" / "n0.md").write_text(body("a0", 4, "v2"))
        assert run(cfg, index=False).ok
        (late,) = sorted(root.rglob("*.mushroom"))
        edit.set()  # an edit that never comes: flushed all the same, FLUSH_DEFER_S later
        started = time.monotonic()
        indexer.put_mushroom(late)
        poll(lambda: not late.exists(), timeout=10, what="the flush after FLUSH_DEFER_S")
        assert time.monotonic() - started >= 1.5
    finally:
        indexer.stop()
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_a_note_that_failed_keeps_the_writer_busy_until_its_first_retry_only(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the model-based test: a note failed while the index was deleted under it and made anew (`ragctl index
    --rebuild`), and `ragctl wait` said idle with the note failed, 2 s before its retry would have applied it. A
    failed note now counts as work until its first retry; one that fails again does not keep the agent busy."""
    monkeypatch.setattr(writer, "RETRY_MIN_S", 0.5)
    root, cfg, note = one_note(tmp_path, fake_openai_server, 3)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=lambda: False)
    indexer.start()
    try:
        shutil.rmtree(keywords.place(Path(idx.path)))  # its keyword index deleted under the open index
        indexer.put_mushroom(note)
        poll(lambda: indexer.failed(), what="the note to fail")
        assert [f["attempts"] for f in indexer.failed()] == [1] and indexer.busy()
        poll(
            lambda: [f["attempts"] for f in indexer.failed()] == [2],
            timeout=10,
            what="its first retry to fail",
        )
        assert not indexer.busy() and note.exists()
    finally:
        indexer.stop()
        with contextlib.suppress(Exception):
            idx.close()


def test_a_flush_that_fails_is_tried_again_later_not_ten_times_a_second(
    tmp_path: Path, fake_openai_server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """A flush that fails (here the collection's files deleted under the open index, as when the data directory
    goes) keeps its notes for the next one; it was tried again, with a traceback in the log, every 0.1 s until the
    agent rebuilt the index (a full disk: for ever). Now a second later, then doubling, the traceback once."""
    root, cfg, note = one_note(tmp_path, fake_openai_server, 3)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    coming = threading.Event()
    coming.set()  # more on its way: applied, the flush waits for a pause
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=coming.is_set)
    indexer.start()
    try:
        indexer.put_mushroom(note)
        poll(lambda: indexer.pending() == 0 and idx.count() > 0, what="the note to be applied")
        shutil.rmtree(idx.path)
        with caplog.at_level(logging.ERROR, logger=writer.__name__):
            coming.clear()  # a pause: the flush is due
            time.sleep(2.5)
        tries = [r for r in caplog.records if "flushing" in r.getMessage()]
        assert 2 <= len(tries) <= 3, [r.getMessage() for r in tries]  # at once, +1 s, +3 s (then +7 s ...)
        assert [r.exc_info is not None for r in tries][:2] == [True, False]
        assert note.exists() and indexer.busy()
    finally:
        indexer.stop(timeout=5)
        with contextlib.suppress(Exception):
            idx.close()


def test_a_flush_that_fails_because_the_index_vanished_waits_for_the_rebuild_without_a_traceback(
    tmp_path: Path, fake_openai_server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The index deleted with the data directory while notes wait to be flushed: the agent rebuilds it (`failing`
    says so), and the failed flush is said at INFO, not as an internal error with a traceback (the soak, row 61)."""
    root, cfg, note = one_note(tmp_path, fake_openai_server, 3)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    coming, vanished = threading.Event(), threading.Event()
    coming.set()  # more on its way: applied, the flush waits for a pause
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=coming.is_set,
                      failing=vanished.is_set)  # fmt: skip
    indexer.start()
    try:
        indexer.put_mushroom(note)
        poll(lambda: indexer.pending() == 0 and idx.count() > 0, what="the note to be applied")
        shutil.rmtree(idx.path)
        vanished.set()  # the agent saw its index go: a rebuild is due
        with caplog.at_level(logging.INFO, logger=writer.__name__):
            coming.clear()  # a pause: the flush is due
            poll(lambda: any("flushing" in r.getMessage() for r in caplog.records), what="a flush")
        tries = [r for r in caplog.records if "flushing" in r.getMessage()]
        assert [(r.levelno, r.exc_info is None) for r in tries] == [(logging.INFO, True)], tries
        assert "waits for the index to be rebuilt" in tries[0].getMessage()
        assert note.exists()
    finally:
        indexer.stop(timeout=5)
        with contextlib.suppress(Exception):
            idx.close()


def test_a_folder_moved_into_another_is_deleted_under_its_old_name_after_its_recover_or_a_pause(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder moved into another folder is two notes of two jobs: its old parent's `dir_delete` and its new
    parent's `dir_recover`, in no set order. The writer applies a folder's deletion once nothing else is on its way
    (or DELETE_WAIT_S later): the files are found under the old path or the new one, never under neither, while the
    recover re-syncs them. Applied as it came, the deletion took them out of search until the recover's end."""
    root, cfg = notes_in_a(tmp_path, fake_openai_server, 3, 4)
    (root / "b").mkdir()
    assert run(cfg).ok  # indexed; `b` is a folder with a store of its own
    (root / "a").rename(root / "b" / "a")
    assert run(cfg, index=False).ok
    (gone,) = sorted((root / ".rag").glob("*.mushroom"))  # the root's: `a` deleted
    (back,) = sorted((root / "b" / ".rag").glob("*.mushroom"))  # b's: `a` recovered
    assert [ev.status for ev in mushroom.read(gone).events] == [NoteStatus.DIR_DELETE]
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    old, new = str(root / "a"), str(root / "b" / "a")
    coming = threading.Event()
    coming.set()  # the jobs go on
    indexer = Indexer(IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)), more_coming=coming.is_set)
    indexer.start()
    try:
        indexer.put_mushroom(gone)  # the deletion first
        poll(lambda: indexer.pending() == 0, what="the old parent's note to be applied")
        time.sleep(0.3)
        assert len(idx.sources(old)) == 3, "deleted before the folder was recovered under its new name"
        assert gone.exists() and indexer.busy() and indexer.pending_in(lambda d: d == root) == 1
        indexer.put_mushroom(back)
        poll(lambda: len(idx.sources(new)) == 3, what="the folder recovered under its new name")
        coming.clear()  # a pause: the deletion applied, both notes flushed and deleted
        poll(lambda: not gone.exists() and not back.exists() and not indexer.busy(), timeout=10,
             what="the deletion applied and flushed")  # fmt: skip
        assert idx.sources(old) == {} and len(idx.sources(new)) == 3
        assert indexer.chunks == idx.count(), "the count status shows, made after the deletion"
        # with more on its way all the time, a deletion waits DELETE_WAIT_S at most
        monkeypatch.setattr(writer, "DELETE_WAIT_S", 0.5)
        coming.set()
        shutil.rmtree(root / "b" / "a")
        assert run(cfg, index=False).ok
        (deleted,) = sorted((root / "b" / ".rag").glob("*.mushroom"))
        started = time.monotonic()
        indexer.put_mushroom(deleted)
        poll(lambda: idx.sources(new) == {}, timeout=10, what="the deletion after DELETE_WAIT_S")
        assert time.monotonic() - started >= 0.5
    finally:
        indexer.stop()
        idx.close()
    assert_index_equals_sidecars(cfg, root)
