"""MCP for the agent (docs/mcp.md): tools, resources and prompts over the verbs (verbs/) and the agent's index.

    tools.py       the tools as plain functions (search, query, read_document, read_chunk, recent_changes, status)
    resources.py   the resources as plain functions (ragd://dir|file|chunks|orphans/{+path}; the document list)
    outputs.py     the tools' result models (their outputSchema)
    tooldefs.py    the tools registered: annotations, schemas, resource links; wait_until_indexed, reindex
    long_calls.py  progress notifications and cancellation of the long tools
    prompts.py     search_documents, summarise_changes
    events.py      change announcements (2026 subscriptions/listen, 2025 resources/subscribe, list_changed)
    app.py         the MCPServer built from them: paginated resources/list, cache hints, argument errors
    session.py     an MCP session on a control connection (`ragctl mcp`, verb mcp_session)
    server.py      McpService: the server's event loop thread and sessions, owned by the Lifecycle
    calls.py       single tools/call and resources/read answered as on the wire (verbs mcp_call / mcp_read)
    schema.py      `python -m ragd.mcp.schema`: the static JSON `ragctl mcp` answers without the agent

Reading documents and chunks, browsing folders and path safety are verbs (verbs/documents.py, browse.py, paths.py),
which the web page (web/) calls too; mcp/ and web/ never import each other. The HTTP port that serves MCP at
/mcp (Host/Origin checks, bearer tokens) is the HTTP edge's (edges/http.py).

Importing this package or `server` is cheap; the MCP SDK is imported when the service starts.
"""
