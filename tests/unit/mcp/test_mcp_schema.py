"""cli/ragctl/mcp_schema.json (what `ragctl mcp` answers without the agent) is what the agent's MCP server reports."""

from __future__ import annotations

import json
from pathlib import Path

import ragctl
from ragd.mcp import schema

SHIPPED = Path(ragctl.__file__).parent / "mcp_schema.json"


def test_the_shipped_schema_is_the_generators_output() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == schema.render(), (
        "regenerate it: python -m ragd.mcp.schema > cli/ragctl/mcp_schema.json"
    )


def test_the_schema_has_what_the_bridge_needs() -> None:
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    assert data["initialize"]["protocolVersion"] == data["protocolVersion"]
    assert data["initialize"]["serverInfo"]["name"] == "ragd"
    tools = {t["name"]: t for t in data["tools/list"]["tools"]}
    assert set(tools) == {"search", "query", "read_document", "read_chunk", "recent_changes", "status",
                          "wait_until_indexed", "reindex"}  # fmt: skip
    assert [n for n, t in tools.items() if not t["annotations"]["readOnlyHint"]] == ["reindex"]
    assert all("outputSchema" in t for t in tools.values())
    assert len(data["resources/templates/list"]["resourceTemplates"]) == 4
    assert {p["name"] for p in data["prompts/list"]["prompts"]} == {"search_documents", "summarise_changes"}
    caps = data["initialize"]["capabilities"]["resources"]
    assert caps == {"subscribe": True, "listChanged": True}


def test_the_schema_answers_the_2026_era_too() -> None:
    """What `ragctl mcp` answers a 2026-07-28 client without the agent: the SDK's own result types accept it."""
    from mcp_types.methods import serialize_server_result

    data = json.loads(SHIPPED.read_text(encoding="utf-8"))["2026-07-28"]
    assert set(data) == {"server/discover", "tools/list", "resources/templates/list", "prompts/list",
                         "resources/list"}  # fmt: skip
    for method, result in data.items():
        assert serialize_server_result(method, "2026-07-28", result) == result, method
    assert data["server/discover"]["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
