"""MCP for the agent (docs/mcp.md): tools and resources over the verbs (verbs/) and the agent's index.

    paths.py      path safety: inside a root, also after symlinks; not ignored
    tools.py      the tools as plain functions (search, query, read_document, read_chunk, status)
    resources.py  the resources as plain functions (ragd://dir|file|chunks|orphans/{+path})
    documents.py  read_document's text and line windows
    app.py        the MCPServer built from them, and its HTTP app (Host/Origin checks, bearer token)
    server.py     McpService: the server's event loop thread and HTTP endpoint, owned by the Lifecycle
    calls.py      tools/call and resources/read answered as on the wire, for the stdio bridge (whose control
                  verbs mcp_call / mcp_read, behind `ragctl mcp`, are edges/mcp_verbs.py)
    schema.py     `python -m ragd.mcp.schema`: the static tools/templates JSON that `ragctl mcp` ships

Importing this package or `server` is cheap; the MCP SDK is imported when the service starts.
"""
