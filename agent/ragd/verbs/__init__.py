"""The verbs: what the agent can be asked, each a function over a small runtime interface (see runtime.py).

The control server, the MCP tools and resources, the web page and the offline `ragd` commands are thin tables over
these.
"""
