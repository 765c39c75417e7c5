"""A Milvus collection with ragd's name but not made as ragd needs it (here: its indexes never created, as an
older server or an interrupted creation leaves it) is refused with one message naming what it lacks, at `ragd
config check`, `ragd run --once`, the agent's start and `ragd index migrate`, and left as it is: ragd drops only a
collection it created itself (on a `milvus-lite server`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.agent import write_doc
from tests.e2e.conftest import milvus_config, ragd
from tests.support.fake_openai import FakeOpenAI
from tests.support.milvus_servers import MilvusLiteServer, free_port

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")


def lacks_indexes(proc: subprocess.CompletedProcess[str], name: str) -> None:
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    assert said.count(f"the Milvus collection {name} was not made as ragd needs it") == 1, said
    assert "the BM25 index on sparse" in said and "INVERTED indexes on agent, source_path, ext" in said, said
    assert "Traceback" not in said, said


def test_a_collection_without_its_indexes_is_refused_and_kept(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    from pymilvus import MilvusClient

    from ragd.config import load_config
    from ragd.index.milvus.schema import build_schema, milvus_name

    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    server = MilvusLiteServer(tmp_path / "milvus-data", free_port(), tmp_path / "milvus.log")
    server.start()
    try:
        cfg = milvus_config(tmp_path / "ragd.toml", fake_openai_server, root, server.uri)
        config = load_config(cfg)
        name = milvus_name(config.index.collection_prefix, config.identity)
        client = MilvusClient(uri=server.uri, timeout=30)
        try:
            client.create_collection(name, schema=build_schema(config.identity.dimension))  # no index
            lacks_indexes(ragd("--config", str(cfg), "config", "check", check=None), name)
            lacks_indexes(ragd("--config", str(cfg), "run", "--once", check=None), name)
            lacks_indexes(ragd("--config", str(cfg), "run", check=None), name)  # the agent does not start
            zvec = tmp_path / "zvec.toml"
            zvec.write_text(cfg.read_text().replace('backend = "milvus"', 'backend = "zvec"'))
            ragd("--config", str(zvec), "run", "--once")
            lacks_indexes(ragd("--config", str(zvec), "index", "migrate", "--to", "milvus", check=None), name)
            assert client.has_collection(name)  # not ragd's to drop
        finally:
            client.close()
    finally:
        server.stop()


def test_config_check_says_the_server_and_the_collection(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    write_doc(tmp_path / "kb" / "a.md", "alpha")
    server = MilvusLiteServer(tmp_path / "milvus-data", free_port(), tmp_path / "milvus.log")
    server.start()
    try:
        cfg = milvus_config(tmp_path / "ragd.toml", fake_openai_server, tmp_path / "kb", server.uri)
        said = ragd("--config", str(cfg), "config", "check").stdout
        assert f"# index: Milvus server {server.uri} (milvus_lite-" in said and "not created yet" in said
        ragd("--config", str(cfg), "run", "--once")
        assert "as ragd needs it" in ragd("--config", str(cfg), "config", "check").stdout
    finally:
        server.stop()
    said = ragd("--config", str(cfg), "config", "check").stdout  # a server down: said, not a failure
    assert "UNREACHABLE" in said
    # nor at `run --once`: the sidecars are written, the change notes wait for the server
    write_doc(tmp_path / "kb" / "b.md", "beta")
    proc = ragd("--config", str(cfg), "run", "--once", "--json")
    ran = json.loads(proc.stdout)
    assert ran["embedded"] == 1 and ran["index"]["unavailable"] is True, ran
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (tmp_path / "kb" / ".rag" / "b.md.ragjson").exists()
