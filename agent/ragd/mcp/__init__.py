"""MCP for the agent (docs/mcp.md): tools, resources and prompts over the verbs (verbs/) and the agent's index.

    paths.py       path safety: inside a root, also after symlinks; not ignored
    tools.py       the tools as plain functions (search, query, read_document, read_chunk, recent_changes, status)
    resources.py   the resources as plain functions (ragd://dir|file|chunks|orphans/{+path}; the document list)
    documents.py   read_document's text and line windows
    outputs.py     the tools' result models (their outputSchema)
    tooldefs.py    the tools registered: annotations, schemas, resource links; wait_until_indexed, reindex
    long_calls.py  progress notifications and cancellation of the long tools
    prompts.py     search_documents, summarise_changes
    events.py      change announcements (2026 subscriptions/listen, 2025 resources/subscribe, list_changed)
    app.py         the MCPServer built from them: paginated resources/list, cache hints, argument errors
    http.py        its streamable HTTP app (Host/Origin checks, bearer token)
    session.py     an MCP session on a control connection (`ragctl mcp`, verb mcp_session)
    server.py      McpService: the server's event loop thread and HTTP endpoint, owned by the Lifecycle
    calls.py       single tools/call and resources/read answered as on the wire (verbs mcp_call / mcp_read)
    schema.py      `python -m ragd.mcp.schema`: the static JSON `ragctl mcp` answers without the agent

Importing this package or `server` is cheap; the MCP SDK is imported when the service starts.
"""
