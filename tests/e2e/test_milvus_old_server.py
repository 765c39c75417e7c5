"""A Milvus server older than 2.5 (PyPI's `milvus` 2.3.5, a real Milvus standalone) is refused with one clear
message at `ragd config check`, `ragd index migrate`, `ragd run --once` and the agent's start, and nothing is
left on it: such a server accepts `create_collection` and silently drops the BM25 function, the analyzer and
`nullable`, so a collection made there could never be searched (docs/scale-out.md, "Which server"). Behind a
relay that hides its version, the same server lets ragd create its collection and then refuses an index: the
collection is dropped again and the refusal says so. Stopped, the server leaves none of its processes running."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.agent import write_doc
from tests.e2e.conftest import milvus_config, ragd
from tests.support.fake_openai import FakeOpenAI
from tests.support.milvus_proxy import VersionRelay
from tests.support.milvus_servers import OldMilvusServer, alive, free_port, old_milvus_missing, tree
from tests.support.poll import poll

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
if (why := old_milvus_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

PREFIX = "ragd_"
REFUSED = "ragd needs Milvus 2.5 or newer"


def test_a_stopped_server_leaves_none_of_its_processes(tmp_path: Path) -> None:
    """`milvus-server` (a Python wrapper) runs the server as its child, `milvus run standalone`, which keeps running
    when the wrapper alone is stopped: a test's server is stopped whole (here, before the module's own starts)."""
    server = OldMilvusServer(tmp_path / "data", free_port(), tmp_path / "milvus.log")
    server.start(timeout=180)
    try:
        assert server.proc is not None
        pid = server.proc.pid

        def with_child() -> dict[int, str] | None:
            found = tree(pid)
            return found if any("milvus run standalone" in cmd for cmd in found.values()) else None

        running = poll(with_child, 30, what="the wrapper's `milvus run standalone` child to be listed")
    finally:
        server.stop()
    assert {pid: cmd for pid, cmd in running.items() if alive(pid)} == {}
    shutil.rmtree(tmp_path / "data", ignore_errors=True)  # its unpacked binaries


@pytest.fixture(scope="module")
def old_milvus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OldMilvusServer]:
    base = tmp_path_factory.mktemp("old-milvus")
    server = OldMilvusServer(base / "data", free_port(), base / "milvus.log")
    server.start(timeout=180)  # it unpacks its binaries first
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base / "data", ignore_errors=True)  # its unpacked binaries: half a gigabyte


def collections(server: OldMilvusServer) -> list[str]:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=server.uri, timeout=30)
    try:
        return sorted(client.list_collections())
    finally:
        client.close()


def write_config(path: Path, api: FakeOpenAI, root: Path, uri: str, backend: str = "milvus") -> Path:
    return milvus_config(path, api, root, uri, backend=backend, prefix=PREFIX)


def refused(proc: subprocess.CompletedProcess[str], server: OldMilvusServer) -> str:
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    assert said.count(REFUSED) == 1 and "v2.3.5" in said and server.uri in said, said  # said once
    assert "BM25" in said and "nullable" in said, said  # what it lacks
    assert "Traceback" not in said, said
    return said


def test_config_check_run_once_and_migrate_refuse_an_old_server_and_leave_nothing(
    tmp_path: Path, old_milvus: OldMilvusServer, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    cfg = write_config(tmp_path / "ragd.toml", fake_openai_server, root, old_milvus.uri)

    refused(ragd("--config", str(cfg), "config", "check", check=None), old_milvus)
    refused(ragd("--config", str(cfg), "run", "--once", check=None), old_milvus)
    assert [c for c in collections(old_milvus) if c.startswith(PREFIX)] == []
    # refused before any file was parsed or embedded, not after the run's work
    assert fake_openai_server.texts == [] and not (root / ".rag").exists()

    zvec = write_config(tmp_path / "zvec.toml", fake_openai_server, root, old_milvus.uri, backend="zvec")
    ragd("--config", str(zvec), "run", "--once")  # sidecars and a zvec index to migrate from
    refused(ragd("--config", str(zvec), "index", "migrate", "--to", "milvus", "--uri", old_milvus.uri,
                 check=None), old_milvus)  # fmt: skip
    assert [c for c in collections(old_milvus) if c.startswith(PREFIX)] == []


def test_the_agent_does_not_start_on_an_old_server(
    tmp_path: Path, old_milvus: OldMilvusServer, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    cfg = write_config(tmp_path / "ragd.toml", fake_openai_server, root, old_milvus.uri)
    refused(ragd("--config", str(cfg), "run", check=None, timeout=120), old_milvus)
    assert [c for c in collections(old_milvus) if c.startswith(PREFIX)] == []
    assert fake_openai_server.texts == []  # nothing embedded for an index it cannot write


def test_a_collection_made_on_an_old_server_is_named_for_what_it_lacks(old_milvus: OldMilvusServer) -> None:
    """What an earlier ragd (or anyone) made there with ragd's schema: the server kept the field names only."""
    from pymilvus import MilvusClient

    from ragd.index.milvus.schema import build_schema, collection_problems

    client = MilvusClient(uri=old_milvus.uri, timeout=30)
    name = f"{PREFIX}made_wrong"
    try:
        client.create_collection(name, schema=build_schema(8))
        problems = " ".join(collection_problems(client, name, 8))
        for lacks in ("the BM25 function", "nullable page", "the BM25 index on sparse", "INVERTED indexes"):
            assert lacks in problems, problems
    finally:
        client.drop_collection(name)
        client.close()
    assert json.dumps(collections(old_milvus)).count(name) == 0


def unfinished(proc: subprocess.CompletedProcess[str], relay: VersionRelay) -> None:
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    assert f"the Milvus server at {relay.uri} could not make the collection {PREFIX}" in said, said
    assert "ragd dropped it again (nothing is left on the server)" in said, said
    assert "ragd needs Milvus 2.5 or newer" in said, said  # the hint: what the server lacks
    assert "Traceback" not in said, said


def test_a_collection_the_server_cannot_finish_is_dropped_again(
    tmp_path: Path, old_milvus: OldMilvusServer, fake_openai_server: FakeOpenAI
) -> None:
    """A server whose version ragd cannot read is trusted to create the collection (its check comes after): here the
    2.3.5 server itself, every call but GetVersion passed through to it. It accepts `create_collection` (dropping
    the BM25 function and `nullable`), then refuses the BM25 index on `sparse`: the collection ragd just created is
    dropped, at `ragd run --once` and at `ragd index migrate`."""
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    relay = VersionRelay(f"127.0.0.1:{old_milvus.port}", free_port(), version="")
    relay.start()
    try:
        cfg = write_config(tmp_path / "ragd.toml", fake_openai_server, root, relay.uri)
        assert "not created yet" in ragd("--config", str(cfg), "config", "check").stdout  # the version passes
        unfinished(ragd("--config", str(cfg), "run", "--once", check=None), relay)
        assert [c for c in collections(old_milvus) if c.startswith(PREFIX)] == []

        zvec = write_config(tmp_path / "zvec.toml", fake_openai_server, root, relay.uri, backend="zvec")
        ragd("--config", str(zvec), "run", "--once")
        unfinished(ragd("--config", str(zvec), "index", "migrate", "--to", "milvus", "--uri", relay.uri,
                        check=None), relay)  # fmt: skip
        assert [c for c in collections(old_milvus) if c.startswith(PREFIX)] == []
    finally:
        relay.stop()
