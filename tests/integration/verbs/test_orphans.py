"""`orphans`: indexed sources whose file is gone, the same over the control socket, MCP and `clean`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragctl import protocol as p
from tests.integration.verbs.conftest import Running


@pytest.fixture
def orphaned(running: Running) -> Iterator[str]:
    """beta.txt deleted while the agent is paused: the index still holds it, its file is gone."""
    running.ctl("pause")
    gone = running.root / "beta.txt"
    gone.unlink()
    yield str(gone)
    running.ctl("resume")


def test_an_orphan_is_listed_and_cleaned(running: Running, orphaned: str) -> None:
    assert running.ctl("orphans") == {"path": None, "orphans": [orphaned], "removed": 0}
    under = running.ctl("orphans", {"path": str(running.root / "sub")})
    assert under["orphans"] == [] and under["path"] == str(running.root / "sub")
    assert running.ctl("orphans", {"clean": True})["removed"] == 1
    assert running.ctl("orphans")["orphans"] == []
    assert orphaned not in running.ctl("index", {"sources": True})["sources"]


def test_the_mcp_orphans_resource_is_the_same_list(running: Running, orphaned: str) -> None:
    assert running.resource("ragd://orphans/")["orphans"] == [orphaned]
    assert running.resource("ragd://orphans" + str(running.root))["orphans"] == [orphaned]


def test_orphans_outside_the_roots_is_refused(running: Running) -> None:
    assert running.refused("orphans", {"path": "/var"}).code == p.NOT_FOUND
