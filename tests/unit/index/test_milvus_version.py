"""How a Milvus server's version is read (`get_server_version()`): what is older than 2.5 is refused."""

from __future__ import annotations

import pytest

from ragd.index.milvus.schema import MIN_VERSION, parse_version


@pytest.mark.parametrize(
    ("said", "version", "refused"),
    [
        ("v2.3.5-lite", (2, 3, 5), True),  # PyPI's `milvus` embedded standalone server
        ("v2.4.17", (2, 4, 17), True),
        ("v2.5.0", (2, 5, 0), False),
        ("2.5.4", (2, 5, 4), False),
        ("v2.6.0-rc1", (2, 6, 0), False),
        ("", None, False),  # names no version: the collection's own check decides
    ],
)
def test_server_versions(said: str, version: tuple[int, int, int] | None, refused: bool) -> None:
    assert parse_version(said) == version
    assert (version is not None and version < MIN_VERSION) is refused
