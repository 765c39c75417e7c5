"""The names of the agent's MCP tools, in the order tools/list gives them (one list for every MCP test)."""

TOOLS = ("search", "query", "read_document", "read_chunk", "recent_changes", "status", "wait_until_indexed",
         "reindex")  # fmt: skip
