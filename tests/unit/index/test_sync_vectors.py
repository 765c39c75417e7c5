"""An entry's vectors are decoded once for a source's write and checked together, with the verdicts one at a time
gave: the first chunk of a wrong length, zero or not finite is named; chunks not embedded are skipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragd.index.write.sync import bad_vector, decoded_vectors, to_index_chunks
from ragd.pipeline import sidecar
from ragd.pipeline.sidecar import FileEntry, SourceInfo, StoredChunk
from ragd.vocabulary import FileState

OK = np.arange(1, 5, dtype=np.float32)


def entry(*vectors: np.ndarray | None) -> FileEntry:
    chunks = tuple(StoredChunk(f"text {i}", f"{i:032x}", 0, None if v is None else sidecar.encode_vector(v), {})
                   for i, v in enumerate(vectors))  # fmt: skip
    src = SourceInfo("a.md", "0" * 32, 10, 1_700_000_000, 42)
    return FileEntry(FileState.EMBEDDED, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", src, "m", 4, chunks)


@pytest.mark.parametrize(
    ("vectors", "why"),
    [
        ((OK, None, OK * 2), None),
        ((OK, np.zeros(4, np.float32)), "chunk 1 has a zero vector"),
        ((OK, None, np.array([1, np.nan, 0, 0], np.float32)), "chunk 2 has a not finite vector"),
        (
            (OK, np.array([np.inf, 0, 0, 0], np.float32), np.zeros(4, np.float32)),
            "chunk 1 has a not finite vector",
        ),
        (
            (OK, np.ones(3, np.float32), np.zeros(4, np.float32)),
            "chunk 1 has a 3-d vector, the entry says 4-d",
        ),
        ((None,), None),
        ((), None),
    ],
)
def test_the_vectors_verdict_names_the_first_bad_chunk(
    vectors: tuple[np.ndarray | None, ...], why: str
) -> None:
    e = entry(*vectors)
    decoded, said = decoded_vectors(e)
    assert said == why == bad_vector(e)
    assert len(decoded) == len(vectors)
    for got, want in zip(decoded, vectors, strict=True):
        assert (got is None) if want is None else np.array_equal(got, want, equal_nan=True)


def test_the_index_chunks_carry_the_vectors_decoded_once() -> None:
    e = entry(OK, OK * 3)
    decoded, _ = decoded_vectors(e)
    chunks = to_index_chunks(Path("/kb/a.md"), e, decoded)
    assert [c.vector is v for c, v in zip(chunks, decoded, strict=True)] == [True, True]
    assert np.array_equal(chunks[1].vector, OK * 3)
