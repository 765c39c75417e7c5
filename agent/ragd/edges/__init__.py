"""The edges: where a person, a client or the system meets the agent.

lifecycle (`ragd run`: signals, start-up, main loop, shutdown), control (the control socket server), http (the
loopback HTTP port: MCP at /mcp and the web page at /ui/, Host/Origin checks, tokens), cli (the `ragd` command),
console (its output), filestatus (`ragd status`: per-file state read from the sidecars).
"""
