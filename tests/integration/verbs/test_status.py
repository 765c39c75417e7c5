"""`status`: the agent at a glance, the same over the control socket and the MCP `status` tool."""

from __future__ import annotations

from ragctl import protocol as p
from tests.integration.verbs.conftest import DOCS, Running


def test_status_counts_the_tree_and_says_idle(running: Running) -> None:
    st = running.ctl("status")
    assert st["agent"]["state"] == "idle" and st["agent"]["ready"] and not st["agent"]["paused"]
    (root,) = st["roots"]
    assert root["path"] == str(running.root) and root["files"].get("EMBEDDED") == len(DOCS)
    assert st["index"]["chunks"] >= len(DOCS) and st["index"]["failed_mushrooms"] == []
    assert st["agent"]["config"] == str(running.config_file)


def test_status_watch_streams_until_the_client_goes(running: Running) -> None:
    seen: list[dict] = []
    with p.Client(running.life.socket_path, timeout=30) as c:
        for msg in c.stream("status", {"watch": True, "interval": 0.1}):
            seen.append(msg)
            if len(seen) == 3:
                break  # the client goes away; the agent's stream notices and stops
    assert all("stream" in m and m["stream"]["agent"]["state"] == "idle" for m in seen)
    assert running.ctl("status")["agent"]["state"] == "idle"  # the server is fine after the dropped stream


def test_status_arguments_are_checked(running: Running) -> None:
    err = running.refused("status", {"watch": "yes"})
    assert err.code == p.BAD_REQUEST and "'watch' must be a valid boolean" in err.message
    err = running.refused("status", {"interval": 0})
    assert err.code == p.BAD_REQUEST and "'interval' must be greater than 0" in err.message


def test_the_mcp_status_tool_is_the_same_status(running: Running) -> None:
    result = running.tool("status", {})
    assert not result.get("isError")
    mcp = result["structuredContent"]
    ctl = running.ctl("status")
    assert mcp.keys() == ctl.keys()
    assert mcp["roots"][0]["files"] == ctl["roots"][0]["files"] and mcp["agent"]["pid"] == ctl["agent"]["pid"]
