"""The one test of a vector every stage shares (model.vector_problem), row by row or a batch at once."""

from __future__ import annotations

import numpy as np
import pytest

from ragd.errors import IndexError_
from ragd.index.records import check_vector, check_vectors
from ragd.model import NOT_FINITE, ZERO, vector_problem, vector_problems

ROWS = {
    "fine": (np.arange(8, dtype=np.float32) + 1) / 10,
    "zero": np.zeros(8, dtype=np.float32),
    "underflow": np.full(8, 1e-30, dtype=np.float32),  # its square is 0 in float32: as good as zero
    "nan": np.array([0.1] * 7 + [np.nan], dtype=np.float32),
    "inf": np.array([0.1] * 7 + [np.inf], dtype=np.float32),
    "overflow": np.full(8, 1e20, dtype=np.float32),  # finite values whose float32 norm is not
    "large": np.full(8, 1e18, dtype=np.float32),  # finite values whose float32 norm is too
}
WANTED = {"fine": None, "zero": ZERO, "underflow": ZERO, "nan": NOT_FINITE, "inf": NOT_FINITE,
          "overflow": NOT_FINITE, "large": None}  # fmt: skip


def test_a_batch_says_what_each_row_says_alone() -> None:
    names = list(ROWS)
    batch = vector_problems(np.stack([ROWS[n] for n in names]))
    assert batch == [WANTED[n] for n in names]
    assert [vector_problem(ROWS[n]) for n in names] == batch
    assert vector_problem([0.5, 0.5]) is None  # a list, as a sidecar's reuse may give


def test_the_index_refuses_the_same_vectors_naming_the_first() -> None:
    assert [v.tolist() for v in check_vectors([ROWS["fine"], ROWS["large"]], 8, ["a#0", "a#1"])] == [
        ROWS["fine"].tolist(),
        ROWS["large"].tolist(),
    ]
    with pytest.raises(IndexError_, match=r"vector of a#1 is zero or not finite"):
        check_vectors([ROWS["fine"], ROWS["overflow"], ROWS["zero"]], 8, ["a#0", "a#1", "a#2"])
    with pytest.raises(IndexError_, match=r"vector of a#1 has dimension 4, the index expects 8"):
        check_vectors([ROWS["fine"], ROWS["fine"][:4]], 8, ["a#0", "a#1"])
    with pytest.raises(IndexError_, match=r"vector of the query is zero or not finite"):
        check_vector(ROWS["nan"], 8, "the query")
