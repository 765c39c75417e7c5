"""Two agents on two trees, one knowledge base: real `ragd run` processes sharing one Milvus Lite server process
(`milvus-lite server`), the fake embeddings API on 127.0.0.1 (docs/scale-out.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragctl.protocol import RemoteError
from tests.e2e.agent import RAGCTL, AgentProcess, write_doc
from tests.e2e.conftest import FAST_WATCH, api_config_text
from tests.support.fake_openai import FakeOpenAI
from tests.support.isolation import environ, isolation
from tests.support.milvus_servers import MilvusLiteServer, free_port
from tests.support.poll import poll

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")


@pytest.fixture
def milvus(tmp_path: Path) -> Iterator[MilvusLiteServer]:
    server = MilvusLiteServer(tmp_path / "milvus-data", free_port(), tmp_path / "milvus.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start_agent(tmp_path: Path, name: str, api: FakeOpenAI, uri: str, root: Path) -> AgentProcess:
    """An agent of its own (HOME, data directory, socket), `name` its agent_id, on the shared server."""
    home = tmp_path / f"home-{name}"
    home.mkdir()
    config = home / "ragd.toml"
    index = f'\n[index]\nbackend = "milvus"\nuri = "{uri}"\nagent_id = "{name}"\ntimeout = 3\n'
    config.write_text(api_config_text(api, watch=FAST_WATCH) + index)
    env = environ({**isolation(home), "RAGD_CONFIG": str(config)})
    agent = AgentProcess(tmp_path / f"agent-{name}.log", str(root), env=env)
    agent.wait_ready()
    return agent


def search(agent: AgentProcess, text: str, **extra: Any) -> list[tuple[str, str]]:
    found = agent.call("search", {"query": text, "mode": "keyword", "top_k": 20, **extra})
    return sorted((r["path"], r.get("agent", "")) for r in found["results"])


def test_two_agents_share_one_milvus_and_own_their_sources(
    tmp_path: Path, milvus: MilvusLiteServer, fake_openai_server: FakeOpenAI
) -> None:
    tree_a, tree_b = tmp_path / "alice-kb", tmp_path / "bob-kb"
    a1 = write_doc(tree_a / "notes" / "router.md", "zebrafinch", "the router reset procedure")
    a2 = write_doc(tree_a / "notes" / "gone.md", "quokka")
    b1 = write_doc(tree_b / "manuals" / "printer.md", "zebrafinch", "the printer jam procedure")
    alice = start_agent(tmp_path, "alice", fake_openai_server, milvus.uri, tree_a)
    bob = start_agent(tmp_path, "bob", fake_openai_server, milvus.uri, tree_b)
    try:
        alice.wait_idle()
        bob.wait_idle()
        # each agent lists and searches its own files; with reach all, both; every result names its agent
        assert alice.sources() == sorted([str(a1), str(a2)])
        assert bob.sources() == [str(b1)]
        assert search(alice, "zebrafinch") == [(str(a1), "alice")]
        assert search(bob, "zebrafinch") == [(str(b1), "bob")]
        assert search(alice, "zebrafinch", scope="all") == sorted([(str(a1), "alice"), (str(b1), "bob")])
        status = alice.call("status")["index"]["backend"]
        assert status["backend"] == "milvus" and status["reachable"] and status["agent"] == "alice"
        shown = ragctl_as(alice, "status") + ragctl_as(alice, "index")
        assert f"milvus {milvus.uri}" in shown and "on Milvus: reachable" in shown and "agent alice" in shown
        assert "on bob" in ragctl_as(alice, "search", "zebrafinch", "--reach", "all", "--mode", "keyword")

        # a deletion in alice's tree removes alice's chunks only
        a2.unlink()
        alice.wait_idle()
        assert alice.sources() == [str(a1)]
        assert bob.sources() == [str(b1)]
        assert search(bob, "quokka", scope="all") == []

        # the server goes away: alice keeps indexing into her sidecars, the change note waits, searches fail
        # with a clear error; when the server is back the note is applied, and nothing is embedded again
        milvus.stop()
        embedded = len(fake_openai_server.texts)
        write_doc(tree_a / "notes" / "late.md", "ocelot")
        poll(lambda: _failed_notes(alice) > 0, 60, what="alice's change note to wait for the server")
        backend = alice.call("status")["index"]["backend"]
        assert not backend["reachable"] and backend["last_error"]
        assert "UNREACHABLE" in ragctl_as(alice, "status")
        with pytest.raises(RemoteError) as err:
            alice.call("search", {"query": "ocelot", "mode": "keyword"})
        assert "unreachable" in str(err.value) and milvus.uri in str(err.value)
        after_edit = len(fake_openai_server.texts)
        assert after_edit > embedded  # the new file was embedded once, into its sidecar
        milvus.start()
        late = [(str(tree_a / "notes" / "late.md"), "alice")]
        poll(
            lambda: _answers(alice, "ocelot") == late, 120, what="the waiting change note to reach the index"
        )
        assert _failed_notes(alice) == 0
        assert len(fake_openai_server.texts) == after_edit  # nothing embedded again
        assert bob.sources() == [str(b1)]
    finally:
        alice.kill()
        bob.kill()


def ragctl_as(agent: AgentProcess, *args: str) -> str:
    """`ragctl ARGS` in the agent's environment (its socket): what a person sees."""
    proc = subprocess.run([*RAGCTL, *args], capture_output=True, text=True, timeout=60, env=agent.env)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc.stdout


def _answers(agent: AgentProcess, text: str) -> list[tuple[str, str]] | None:
    """The search's hits, or None while the agent still finds the server unreachable (its back-off)."""
    try:
        return search(agent, text)
    except RemoteError:
        return None


def _failed_notes(agent: AgentProcess) -> int:
    return len(agent.call("status")["index"].get("failed_mushrooms") or [])
