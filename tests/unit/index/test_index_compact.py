"""Compaction of a flat collection (ZvecIndex.compact) on real zvec collections: every flush that writes documents
adds a block zvec keeps in memory; a compaction rewrites the collection as one, losing nothing."""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ragd.config import Config, IndexConfig
from ragd.errors import IndexError_
from ragd.index import IndexBackend, collection_dir, open_index
from ragd.index.write.sync import IndexSync
from ragd.index.write.writer import Indexer
from ragd.index.zvec import health, reads, upkeep
from ragd.index.zvec.collection import COMPACTED, COMPACTING, open_collection
from ragd.index.zvec.schema import to_doc
from ragd.model import md5_hex
from ragd.pipeline.scan import Ignore
from tests.support import smaps
from tests.support.poll import poll
from tests.unit.index.test_index_zvec import CORPUS, DIM, IDENTITY, embed, load_corpus, make_chunks, rel_paths

EDITS = 12


def edit(index: IndexBackend, root: Path, n: int) -> None:
    """One edit as the index writer applies it: a source rewritten, then a flush."""
    path = str(root / "edits" / f"note{n % 4}.md")
    texts = [f"edit number {n} mentions the word zebra{n}", "a second chunk about the garden and its roses"]
    index.replace_source(path, md5_hex(str(n)), str(root), make_chunks(path, texts))
    index.flush()


def snapshot(index: IndexBackend, root: Path) -> dict[str, object]:
    """What searches and listings see: compared before and after a compaction. Keyword scores may move (zvec's
    BM25 counts every document a segment ever took, overwritten ones too, and the copy holds only the live ones),
    so keyword and hybrid results are compared as the documents found."""
    vector = index.query(vector=embed("tomato soup recipe"), text=None, k=10)
    return {
        "count": index.count(),
        "sources": index.sources(),
        "keyword": set(
            rel_paths(index.query(vector=None, text="ERR_CONN_RESET tomatoes zebra11", k=10), root)
        ),
        "vector": [(h.source_path, h.chunk_index, round(h.score, 5)) for h in vector if h.score > 0.01],
        "hybrid": set(rel_paths(index.query(vector=embed("数据库 安装"), text="如何安装数据库", k=2), root)),
        "chunk": [
            (h.content, h.heading_path, h.page, h.start_line, h.end_line)
            for h in index.chunks(str(root / "docs/report.pdf"))
        ],
    }


@pytest.mark.parametrize("parts", [False, True], ids=["one listing", "listed in parts"])
def test_each_flush_that_writes_adds_a_block_and_a_compaction_folds_them_losing_nothing(
    tmp_path: Path, parts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`parts`: the documents to copy listed in parts (past 5, not ONE_QUERY), none missed or copied twice."""
    if parts:
        monkeypatch.setattr(reads, "ONE_QUERY", 5)
    root = tmp_path / "kb"
    index = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    try:
        load_corpus(index, root)
        first = index.blocks
        for n in range(EDITS):
            edit(index, root, n)
        assert index.blocks == first + EDITS  # one more per flush that wrote documents
        index.flush()
        assert index.blocks == first + EDITS  # a flush with nothing written adds none
        before = snapshot(index, root)
        assert before["keyword"] == {"docs/network.md", "mixed/errors.md", "notes/cooking.md", "notes/garden.txt",
                                     "edits/note3.md"}  # fmt: skip
        assert before["hybrid"] == {"中文/数据库.md", "docs/install.md"} and before["vector"]
        vector = index.query(vector=embed("tomato soup recipe"), text=None, k=1)[0]
        assert index.compact() == first + EDITS
        assert index.blocks == 1
        # what opening the copy read of its files is given back at once, not when the agent is next idle
        below = f"{collection_dir(tmp_path / 'data', IDENTITY)}/"
        assert smaps.resident_kib(lambda name: name.startswith(below)) == 0
        assert snapshot(index, root) == before
        again = index.query(vector=embed("tomato soup recipe"), text=None, k=1)[0]
        assert again.source_path == vector.source_path and again.score == pytest.approx(
            vector.score, abs=1e-6
        )
        edit(index, root, 99)  # and it takes writes as before
        assert rel_paths(index.query(vector=None, text="zebra99", k=3), root) == ["edits/note3.md"]
        here = collection_dir(tmp_path / "data", IDENTITY)
        beside = sorted(p.name for p in here.parent.iterdir() if p.name.startswith(here.name))
        assert beside == [here.name, here.name + ".keywords"]  # no debris; the keyword index stays
    finally:
        index.close()
    reopened = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    try:
        assert reopened.count() == len([c for texts in CORPUS.values() for c in texts]) + 4 * 2
    finally:
        reopened.close()


def test_a_compaction_cut_short_leaves_a_usable_collection(tmp_path: Path) -> None:
    root, data = tmp_path / "kb", tmp_path / "data"
    index = open_index(data, IDENTITY, IndexConfig())
    load_corpus(index, root)
    count = index.count()
    index.close()
    here = collection_dir(data, IDENTITY)
    # a copy half made when the agent died: removed at the next open, the collection untouched
    shutil.copytree(here, here.with_name(here.name + COMPACTING))
    index = open_index(data, IDENTITY, IndexConfig())
    assert index.count() == count and not here.with_name(here.name + COMPACTING).exists()
    index.close()
    # killed between the two renames: the old collection is taken back
    here.rename(here.with_name(here.name + COMPACTED))
    index = open_index(data, IDENTITY, IndexConfig())
    try:
        assert index.count() == count
        assert "docs/network.md" in rel_paths(index.query(vector=None, text="ERR_CONN_RESET", k=3), root)
        assert not here.with_name(here.name + COMPACTED).exists()
    finally:
        index.close()


def test_a_compaction_whose_copy_fails_leaves_the_index_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy is made by a child process (health.CopyInChild): one that fails (here killed at once, its time
    being up) is an index error naming it, and the collection, its searches and its writes stay as they were."""
    root = tmp_path / "kb"
    index = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    try:
        load_corpus(index, root)
        for n in range(EDITS):
            edit(index, root, n)
        before = snapshot(index, root)
        blocks = index.blocks
        monkeypatch.setattr(health, "OPTIMIZE_TIMEOUT_S", 0.0)
        with pytest.raises(IndexError_, match="did not finish within 0 s"):
            index.compact()
        assert snapshot(index, root) == before and index.blocks == blocks
        here = collection_dir(tmp_path / "data", IDENTITY)
        assert not here.with_name(here.name + COMPACTING).exists()
        edit(index, root, 99)
        assert rel_paths(index.query(vector=None, text="zebra99", k=3), root) == ["edits/note3.md"]
        monkeypatch.undo()
        assert index.compact() == blocks + 1 and index.blocks == 1  # the next one goes through
        assert rel_paths(index.query(vector=None, text="zebra99", k=3), root) == ["edits/note3.md"]
    finally:
        index.close()


def test_the_copys_child_inserts_what_it_is_sent_and_gives_up_on_an_input_cut_short(tmp_path: Path) -> None:
    """The child's side (probe.py `--copy`): batches of documents, then None, are inserted, flushed and counted;
    an input that ends before its None (the agent stopped or died while sending) ends the child at once, with no
    "ok" (it did not go on to flush, nor to build a graph, for an agent that is gone)."""
    docs = [
        to_doc(c.source_path, "md5", "/kb", c, DIM, 2) for c in make_chunks("/kb/a.md", ["alpha", "beta"])
    ]
    batch = [
        (d.id, d.fields, {k: np.asarray(v, dtype=np.float32) for k, v in d.vectors.items()}) for d in docs
    ]

    def child(name: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
        fresh = tmp_path / f"{name}{COMPACTING}"  # made empty by the agent (a failed copy is then removed)
        open_collection(fresh, IDENTITY, IndexConfig(), read_only=False, kind="flat").close()
        return subprocess.run(health.probe_command(fresh, "--copy"), input=data, capture_output=True, timeout=120,
                              env=health._child_env())  # fmt: skip

    cut = child("cut", pickle.dumps(batch))
    assert cut.returncode == 1 and b"EOFError" in cut.stdout and b"ok," not in cut.stdout, cut
    whole = child("whole", pickle.dumps(batch) + pickle.dumps(None))
    assert whole.returncode == 0 and f"{health.PROBE_MARK} ok, 2 documents".encode() in whole.stdout, whole


def test_a_read_only_or_hnsw_collection_is_never_compacted(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    index = open_index(tmp_path / "data", IDENTITY, IndexConfig(type="hnsw"))
    try:
        load_corpus(index, root)
        assert not index.needs_compaction  # optimize folds an HNSW collection's blocks
    finally:
        index.close()


def test_the_index_writer_compacts_once_the_blocks_pile_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upkeep, "COMPACT_BLOCKS", 5)  # the threshold, not the behaviour: 64 flushes are slow
    root = tmp_path / "kb"
    root.mkdir()
    index = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    writer = Indexer(IndexSync(index, IDENTITY, [root], Ignore(Config().ignore)))
    writer.start()
    try:
        load_corpus(index, root)
        for n in range(4):
            writer.call(lambda sync, n=n: edit(sync.index, root, n)).result(timeout=60)
        poll(lambda: index.blocks == 1, timeout=60, what="the writer compacted the collection")
        assert index.count() == len([c for texts in CORPUS.values() for c in texts]) + 4 * 2
        hits = index.query(vector=None, text="zebra3", k=3)
        assert [re.sub(r".*/", "", h.source_path) for h in hits] == ["note3.md"]
        assert np.isfinite(index.query(vector=embed("zebra3"), text=None, k=1)[0].score)
    finally:
        writer.stop()
        index.close()
