"""`[index] backend = "milvus"` without the milvus extra installed: a clear error naming the extra, not a crash."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexError_
from ragd.index import open_index
from ragd.model import EmbeddingIdentity


def test_without_the_client_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pymilvus", None)  # as if not installed: importing it raises ImportError
    with pytest.raises(IndexError_) as err:
        open_index(tmp_path, EmbeddingIdentity("m", 8), IndexConfig(backend="milvus"))
    assert "not installed" in err.value.message
    assert "ragd[milvus]" in (err.value.hint or "")
    assert not (tmp_path / "milvus.db").exists()  # nothing made
