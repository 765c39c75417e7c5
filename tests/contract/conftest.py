"""Fixtures of the index contract suite: every test runs once per backend (zvec, and Milvus Lite on a local
file).

`backend` is the backend's name; `ix` opens a fresh index in the test's tmp_path (closed at teardown),
`reopen` opens more handles on the same index (every one closed at teardown). Vectors are 8-dimensional and
chosen by hand (`basis`, `unit`), so the cosine similarities a test expects are known exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from ragd.config import IndexConfig
from ragd.index import IndexBackend, IndexChunk, SourceWrite, open_index
from ragd.model import EmbeddingIdentity, md5_hex

DIM = 8
IDENTITY = EmbeddingIdentity("test-contract", DIM)
BACKENDS = ["zvec", "milvus"]


def config(backend: str, base: Path) -> IndexConfig:
    """The IndexConfig of `backend` for an index kept under `base` (Milvus Lite: the file `base/kb.db`)."""
    if backend == "milvus":
        return IndexConfig(backend="milvus", uri=str(base / "kb.db"))
    return IndexConfig()


def basis(i: int) -> np.ndarray:
    """The i-th unit vector of the standard basis."""
    vec = np.zeros(DIM, dtype=np.float32)
    vec[i] = 1.0
    return vec


def unit(*weights: float) -> np.ndarray:
    """The vector with these first coordinates (the rest 0), L2-normalised."""
    vec = np.zeros(DIM, dtype=np.float32)
    vec[: len(weights)] = weights
    return vec / np.linalg.norm(vec)


def chunk(
    path: str,
    i: int,
    content: str,
    *,
    vector: np.ndarray | None = None,
    heading_path: tuple[str, ...] = (),
    page: int | None = None,
    header: str = "",
) -> IndexChunk:
    return IndexChunk(
        source_path=path,
        chunk_index=i,
        content=content,
        content_hash=md5_hex(content),
        header=header,
        vector=unit(1.0, 0.1 * (i + 1)) if vector is None else vector,
        heading_path=heading_path,
        page=page,
        start_line=10 * i + 1,
        end_line=10 * i + 7,
    )


def chunks_of(path: str, texts: Sequence[str], **kw: object) -> list[IndexChunk]:
    return [chunk(path, i, t, **kw) for i, t in enumerate(texts)]  # type: ignore[arg-type]


def write(index: IndexBackend, path: str, texts: Sequence[str], *, root: str = "/r", md5: str = "") -> None:
    """Make `index` hold one chunk per text for `path` (md5: the texts' own unless given)."""
    index.write_sources([SourceWrite(path, md5 or md5_hex("|".join(texts)), root, chunks_of(path, texts))])


@dataclass
class Opener:
    """Opens handles on one index (a data directory and its config), and closes every one at teardown."""

    data_dir: Path
    cfg: IndexConfig
    opened: list[IndexBackend] = field(default_factory=list)

    def __call__(self, *, read_only: bool = False) -> IndexBackend:
        index = open_index(self.data_dir, IDENTITY, self.cfg, read_only=read_only)
        self.opened.append(index)
        return index

    def close_all(self) -> None:
        for index in reversed(self.opened):
            index.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "milvus":
        pytest.importorskip("pymilvus")
        pytest.importorskip("milvus_lite")
    return str(request.param)


@pytest.fixture
def reopen(backend: str, tmp_path: Path) -> Iterator[Opener]:
    opener = Opener(tmp_path / "data", config(backend, tmp_path))
    yield opener
    opener.close_all()


@pytest.fixture
def ix(reopen: Opener) -> IndexBackend:
    """A fresh, empty, writable index of the test's backend."""
    return reopen()
