"""write_sources: many sources per call, what each holds taken from its chunk 0's record, and crash recovery."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexError_
from ragd.index import IndexBackend, SourceWrite, open_index
from ragd.index.zvec.backend import ZvecIndex
from ragd.index.zvec.schema import doc_id, to_doc
from ragd.model import Chunk
from tests.unit.index.test_index_zvec import DIM, IDENTITY, make_chunks


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexBackend]:
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    yield ix
    ix.close()


def texts(name: str, n: int, version: str = "v1") -> list[str]:
    return [f"{version} chunk {i} of {name} words{i}" for i in range(n)]


def write(path: str, n: int, version: str = "v1", held: int | None = None) -> SourceWrite:
    return SourceWrite(path, version, "/kb", make_chunks(path, texts(path, n, version)), held)


def holds(index: IndexBackend) -> dict[str, list[str]]:
    """Every source's chunk texts in chunk order, as the index lists them (a filtered scan, not the record)."""
    return {p: [c.content for c in index.chunks(p)] for p in index.sources()}


def test_one_call_shrinks_grows_adds_and_removes_many_sources(index: IndexBackend) -> None:
    index.write_sources([write(f"/kb/{n}.md", 4) for n in "abcdef"])
    index.write_sources(
        [
            write("/kb/a.md", 1, "v2"),  # shrinks
            write("/kb/b.md", 7, "v2"),  # grows
            write("/kb/c.md", 0, "v2"),  # removed (no chunks)
            write("/kb/d.md", 0, "v2"),
            write("/kb/new.md", 2, "v2"),  # new to the index
            write("/kb/a.md", 2, "v3"),  # the same source again: the last write wins
        ]
    )
    got = holds(index)
    assert got == {
        "/kb/a.md": texts("/kb/a.md", 2, "v3"),
        "/kb/b.md": texts("/kb/b.md", 7, "v2"),
        "/kb/e.md": texts("/kb/e.md", 4),
        "/kb/f.md": texts("/kb/f.md", 4),
        "/kb/new.md": texts("/kb/new.md", 2, "v2"),
    }
    assert index.count() == sum(len(v) for v in got.values())
    assert index.sources()["/kb/a.md"].source_md5 == "v3"


def test_removing_sources_the_index_does_not_hold_is_harmless(index: IndexBackend) -> None:
    index.write_sources([write("/kb/a.md", 3)])
    index.write_sources([write("/kb/never.md", 0), write("/kb/a.md", 0), write("/kb/a.md", 0)])
    assert index.count() == 0 and index.sources() == {}


def test_the_callers_figure_replaces_the_lookup(index: IndexBackend) -> None:
    index.write_sources([write("/kb/a.md", 5), write("/kb/b.md", 5)])
    # a.md: the caller's listing said 5; b.md: a figure above what is held (deleting missing ids is no error)
    index.write_sources([write("/kb/a.md", 2, "v2", held=5), write("/kb/b.md", 1, "v2", held=9)])
    assert holds(index) == {"/kb/a.md": texts("/kb/a.md", 2, "v2"), "/kb/b.md": texts("/kb/b.md", 1, "v2")}


def test_invalid_input_writes_nothing(index: IndexBackend) -> None:
    index.write_sources([write("/kb/a.md", 3)])
    bad = "/kb/bad\udcff.md"
    with pytest.raises(IndexError_, match="UTF-8"):
        index.write_sources(
            [write("/kb/a.md", 1, "v2"), SourceWrite(bad, "m", "/kb", make_chunks(bad, ["x"]))]
        )
    with pytest.raises(ValueError):
        index.write_sources([SourceWrite("/kb/a.md", "m", "/kb", make_chunks("/kb/other.md", ["x"]))])
    assert holds(index) == {"/kb/a.md": texts("/kb/a.md", 3)}


def _raw(index: IndexBackend) -> object:
    assert isinstance(index, ZvecIndex)
    return index._coll


@pytest.mark.parametrize(
    ("deleted", "upserted", "new"),
    [
        ([4], 0, 2),  # cut short among the stale deletes
        ([4, 3, 2], 0, 2),  # after the deletes, before the upserts
        ([4, 3, 2], 1, 2),  # after chunk 0 was rewritten with the new count
        ([4, 3, 2, 1], 0, 0),  # removal, cut short before chunk 0 (deleted last)
    ],
)
def test_a_repeat_after_a_write_cut_short_gives_the_same_index(
    index: IndexBackend, deleted: list[int], upserted: int, new: int
) -> None:
    """The states a crash can leave of a 5 → `new` chunk write (its operations in their order, cut short)."""
    index.write_sources([write("/kb/a.md", 5), write("/kb/b.md", 3)])
    coll = _raw(index)
    coll.delete([doc_id("/kb/a.md", i) for i in deleted])  # type: ignore[attr-defined]
    target = write("/kb/a.md", new, "v2")
    docs = [to_doc("/kb/a.md", "v2", "/kb", c, DIM, new) for c in target.chunks[:upserted]]
    if docs:
        coll.upsert(docs)  # type: ignore[attr-defined]
    index.write_sources([target])
    want = {"/kb/b.md": texts("/kb/b.md", 3)} | ({"/kb/a.md": texts("/kb/a.md", new, "v2")} if new else {})
    assert holds(index) == want


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ragd.config import IndexConfig
    from ragd.index import open_index
    from tests.unit.index.test_index_write_sources import IDENTITY, version
    index = open_index(Path(sys.argv[1]), IDENTITY, IndexConfig())
    versions = [version(v) for v in (1, 2, 3)]
    index.write_sources(versions[0])
    index.flush()
    for k in range(1, 1000):  # killed part way through one of these
        index.write_sources(versions[1 + k % 2])
        print(k, flush=True)
    """
)


def version(v: int) -> list[SourceWrite]:
    """v1, v3: 60 sources of 30 chunks; v2: the even ones shrunk to 3, the odd ones removed, 20 new ones of 40."""
    if v != 2:
        return [write(f"/kb/s{i}.md", 30, f"v{v}") for i in range(60)] + [
            write(f"/kb/n{i}.md", 0) for i in range(20)
        ]
    return [write(f"/kb/s{i}.md", 0 if i % 2 else 3, "v2") for i in range(60)] + [
        write(f"/kb/n{i}.md", 40, "v2") for i in range(20)
    ]


def test_a_process_killed_mid_write_is_recovered_by_repeating_it(tmp_path: Path) -> None:
    """The child writes v2 and v3 in turn without flushing; killed, the write it was in is repeated (as the change
    notes, kept until a flush, are after a restart)."""
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "1\n"
    time.sleep(random.uniform(0.1, 0.8))  # not a wait for anything: a kill point somewhere in the next writes
    child.send_signal(signal.SIGKILL)
    done = [1] + [int(line) for line in child.stdout.read().split()]
    child.wait(30)
    cut = version(2 + (done[-1] + 1) % 2)  # the write under way when it died (or the next one)
    index = open_index(data, IDENTITY, IndexConfig())
    try:
        index.write_sources(cut)
        want = {w.source_path: [c.content for c in w.chunks] for w in cut if w.chunks}
        assert holds(index) == want
    finally:
        index.close()


def test_the_words_a_parse_worker_cut_are_the_ones_the_keyword_index_holds(index: IndexBackend) -> None:
    """The writer takes a chunk's words from those the parse workers cut (pipeline/cutwords.py) instead of cutting
    them again; a chunk whose words were not kept is cut here, as before."""
    from ragd.index.keyword.cutter import chunk_words
    from ragd.pipeline.cutwords import CUT_WORDS

    kept, cut_here = make_chunks("/kb/kept.md", ["alpha beta"]), make_chunks("/kb/here.md", ["gamma delta"])
    (c,) = kept
    text = f"{c.header}\n\n{c.content}"
    assert chunk_words([(c.header, c.content)]) == ((text, "File kept md alpha beta"),)  # what a worker keeps
    # not the text's own: the writer took them
    CUT_WORDS.keep([Chunk(c.content, 0, 10, 1, 1, header=c.header)], [("kept text", "marker words")])
    index.write_sources([SourceWrite("/kb/kept.md", "v1", "/kb", kept), SourceWrite("/kb/here.md", "v1", "/kb",
                                                                                     cut_here)])  # fmt: skip
    assert CUT_WORDS.take(c.content_hash, c.header) is None  # taken by the writer
    found = {h.source_path for h in index.query(vector=None, text="marker", k=5)}
    assert found == {"/kb/kept.md"}
    assert {
        h.source_path for h in index.query(vector=None, text="alpha", k=5)
    } == set()  # its words were kept
    assert {h.source_path for h in index.query(vector=None, text="gamma", k=5)} == {"/kb/here.md"}
    assert isinstance(index, ZvecIndex)
    ids = [doc_id("/kb/kept.md", 0), doc_id("/kb/here.md", 0)]
    stored = index._live().fetch(ids, output_fields=["fts_text"], include_vector=False)  # what zvec keeps
    assert [stored[i].fields["fts_text"] for i in ids] == ["kept text", "File: here.md\n\ngamma delta"]


def test_a_write_of_many_chunks_holds_no_vector_as_python_floats(index: IndexBackend) -> None:
    """A write holds all its documents at once; made with `zvec.Doc(vectors=...)`, each vector was a list of 512
    Python floats (16 KiB): 16 MiB for the 1,024 chunks of one staged write, among a big folder's rename's
    short-lived objects (its peak; docs/benchmarks/history.md). The vectors read back are the ones written."""
    rng = np.random.default_rng(36)
    writes = [write(f"/kb/n{i:04d}.md", 1) for i in range(1024)]
    writes = [
        replace(w, chunks=[replace(c, vector=rng.standard_normal(DIM)) for c in w.chunks]) for w in writes
    ]
    index.write_sources(writes[:8])  # the collection and the keyword index opened, outside the measure
    tracemalloc.start()
    try:
        index.write_sources(writes[8:])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB traced at the write's peak"
    index.flush()
    for i in (8, 700, 1023):
        hits = index.query(vector=writes[i].chunks[0].vector, text=None, k=1)
        assert [h.source_path for h in hits] == [f"/kb/n{i:04d}.md"]
        assert hits[0].score == pytest.approx(1.0, abs=1e-2)
