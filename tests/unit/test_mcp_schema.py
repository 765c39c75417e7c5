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
    assert {t["name"] for t in data["tools/list"]["tools"]} == {"search", "query", "read_document", "read_chunk",
                                                                "status"}  # fmt: skip
    assert all(t["annotations"]["readOnlyHint"] for t in data["tools/list"]["tools"])
    assert len(data["resources/templates/list"]["resourceTemplates"]) == 4
