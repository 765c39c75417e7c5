"""Talk MCP to the installed program with the real MCP client (the `mcp` package of the development venv).

    python packaging/smoke/mcp_probe.py stdio RAGCTL QUERY [N]   # spawn `RAGCTL mcp` N times (initialize),
                                                                 # then list tools and call `search` once
    python packaging/smoke/mcp_probe.py http URL QUERY           # the agent's streamable HTTP endpoint
Prints JSON: the initialize times (spawn -> initialize answered, ms), the tool names, the top hit's path.
The child inherits this process's environment (RAGD_SOCKET / RAGD_RUNTIME_DIR lead it to the agent).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def _session_run(session: ClientSession, query: str, t0: float) -> dict[str, Any]:
    await session.initialize()
    init_ms = (time.perf_counter() - t0) * 1000
    tools = await session.list_tools()
    result = await session.call_tool("search", {"query": query})
    return {"init_ms": round(init_ms, 1), "tools": [t.name for t in tools.tools], "top": _top(result)}


def _top(result: Any) -> str | None:
    if getattr(result, "isError", False):
        raise SystemExit(f"mcp_probe: search failed: {result}")
    data = getattr(result, "structuredContent", None)
    if not data:
        text = "".join(getattr(c, "text", "") for c in result.content)
        data = json.loads(text) if text.startswith(("{", "[")) else {"text": text}
    hits = data.get("results") if isinstance(data, dict) else data
    return hits[0].get("path") if hits else None


async def stdio(ragctl: str, query: str, n: int) -> dict[str, Any]:
    params = StdioServerParameters(command=ragctl, args=["mcp"], env=dict(os.environ))
    init_times = []
    for _ in range(n - 1):  # initialize only
        t0 = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            init_times.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        out = await _session_run(session, query, t0)
    init_times.append(out["init_ms"])
    out["init_median_ms"] = round(statistics.median(init_times), 1)
    out["init_n"] = n
    return out


async def http(url: str, query: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        return await _session_run(session, query, t0)


def main() -> None:
    kind, target, query = sys.argv[1:4]
    if kind == "stdio":
        out = asyncio.run(stdio(target, query, int(sys.argv[4]) if len(sys.argv) > 4 else 1))
    else:
        out = asyncio.run(http(target, query))
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
