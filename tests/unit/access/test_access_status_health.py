"""The status' health as a caller with an access scope sees it: each capability's state and reason, never the folder
or file system it is about (`detail`)."""

from __future__ import annotations

from ragd.access import PUBLIC, agent
from ragd.access.scope import Scope
from ragd.access.status import limit_status


def test_a_scoped_caller_sees_states_and_reasons_without_the_folders() -> None:
    health = {"folders": {"state": "degraded", "reason": "1 folder cannot be indexed (listed under their roots)",
                          "detail": "/srv/secret: cannot write in /srv/secret: Permission denied"},
              "http": {"state": "ok", "reason": ""}}  # fmt: skip
    status = {"roots": [], "health": health}
    assert limit_status(status, Scope(agent()))["health"] == health
    seen = limit_status(status, Scope(PUBLIC))["health"]
    assert seen == {"folders": {"state": "degraded", "reason": "1 folder cannot be indexed (listed under their "
                                "roots)"}, "http": {"state": "ok", "reason": ""}}  # fmt: skip
