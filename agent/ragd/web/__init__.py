"""The agent's web page (docs/web.md): the knowledge base, its health and its search, served at /ui/ by the HTTP
edge (edges/http.py) beside MCP, behind the same protections (loopback, Host and Origin checks, the tokens of docs/access.md).

- `guard`: who a browser is (a token given once, kept in a cookie), and the checks and headers every answer gets;
- `pages`: what each view shows, as plain data from the verbs (no HTTP here; nothing of mcp/);
- `highlight`: the query's words marked in a snippet;
- `throughput`: samples of the agent's progress, for the live chart and the time-left estimate;
- `app`: the routes (Starlette, on the MCP server's event loop), rendering `templates/` with `static/`.
"""
