"""Per-verb integration tests: the whole agent in-process (tests/support/inproc.py) on a small tree, driven through
its control socket as ragctl drives it, and through its MCP server as `ragctl mcp` drives it (the `mcp_call` and
`mcp_read` control verbs, answered by the agent's one MCP server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragctl.protocol import Client, RemoteError
from ragd.config import Config
from ragd.edges.lifecycle import Lifecycle
from tests.e2e.conftest import api_config_text
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process

WATCH = {"quiet": 0.2, "ceiling": 2.0}
DOCS = {
    "alpha.md": "# Alpha\n\nThe wombat digs burrows at night. Token: zyxalpha.\n",
    "beta.txt": "Beta notes about numbats and termites. Token: zyxbeta.\n",
    "sub/gamma.md": "# Gamma\n\nQuokkas smile in photographs. Token: zyxgamma.\n",
    "sub/deep/delta.md": "Delta: 发票 invoice for the quokka island trip. Token: zyxdelta.\n",
}


@dataclass
class Running:
    life: Lifecycle
    root: Path
    config_file: Path

    def ctl(self, verb: str, args: dict[str, Any] | None = None, streamed: list[Any] | None = None) -> Any:
        with Client(self.life.socket_path, timeout=60) as c:
            return c.call(verb, args, on_stream=streamed.append if streamed is not None else None)

    def refused(self, verb: str, args: dict[str, Any] | None = None) -> RemoteError:
        with pytest.raises(RemoteError) as info:
            self.ctl(verb, args)
        return info.value

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """An MCP tools/call result as it goes on the wire (content, structuredContent, isError)."""
        result: dict[str, Any] = self.ctl("mcp_call", {"name": name, "arguments": arguments})
        return result

    def resource(self, uri: str) -> Any:
        result = self.ctl("mcp_read", {"uri": uri})
        return json.loads(result["contents"][0]["text"])

    def wait(self) -> None:
        self.ctl("wait", {"timeout": 60})


def write_tree(root: Path) -> None:
    for rel, text in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def config_text(api: FakeOpenAI, roots: list[Path]) -> str:
    return f"roots = {json.dumps([str(r) for r in roots])}\n" + api_config_text(api, watch=WATCH)


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    write_tree(root)
    return root


@pytest.fixture
def running(kb: Path, tmp_path: Path, fake_openai_server: FakeOpenAI) -> Iterator[Running]:
    """The agent over `kb`, its initial indexing done; its config file at `config_file` (for reload, config)."""
    config_file = tmp_path / "ragd.toml"
    config_file.write_text(config_text(fake_openai_server, [kb]))
    from ragd.config import load_config

    config: Config = load_config(config_file)
    with agent_in_process(config, [], config_path=config_file) as life:
        agent = Running(life, kb, config_file)
        agent.wait()
        yield agent
