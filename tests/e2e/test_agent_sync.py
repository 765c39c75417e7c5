"""Sequences of ordinary operations after which the index must still equal the tree: adding a root, renaming and
moving folders, nesting roots, waiting while paused, other tools' sidecars; and the agent's own verification."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragctl.protocol import Client, socket_path
from ragd.config import data_dir, load_config
from ragd.index import collection_dir
from ragd.index.zvec import health
from ragd.pipeline import mushroom, sidecar
from tests.e2e.agent import (
    AgentProcess,
    files_in,
    keyword_hits,
    ragctl,
    ragctl_json,
    running_agent,
    write_doc,
)
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    kb = tmp_path / "top" / "kb"  # top/: an outer root for the nesting test (tmp_path holds the agent's log)
    for name, token in [("a.md", "alpha"), ("docs/lambda/l1.md", "lima"), ("docs/lambda/l2.md", "lemur"),
                        ("docs/lambda/deep/l3.md", "llama"), ("docs/chinese/c1.md", "chai"),
                        ("a%b/p.md", "percent"), ("docs/other/o.md", "oscar")]:  # fmt: skip
        write_doc(kb / name, token)
    return kb


@pytest.fixture
def agent(tmp_path: Path, config: Path, tree: Path) -> Iterator[AgentProcess]:
    with running_agent(tmp_path / "agent.log", str(tree), idle=True) as proc:
        yield proc


def _root_files(status: dict, root: Path) -> dict:
    return next(r["files"] for r in status["roots"] if r["path"] == str(root))


def test_adding_a_root_keeps_every_other_root_indexed(
    agent: AgentProcess, tree: Path, tmp_path: Path
) -> None:
    """`roots add` once emptied the index of every other root (the check after the new root's rescan took that
    root's files for all the files)."""
    other = tmp_path / "papers"
    write_doc(other / "p1.md", "papaya")
    before = agent.call("index")["documents"]
    ragctl("roots", "add", str(other))
    agent.wait_idle()
    assert agent.sources() == sorted(files_in(tree) + files_in(other))
    assert agent.call("index")["documents"] > before
    assert keyword_hits("lima") == [str(tree / "docs/lambda/l1.md")]
    assert keyword_hits("papaya") == [str(other / "p1.md")]


@pytest.mark.parametrize(
    ("src", "dst"),
    [("docs/lambda", "docs/aws-lambda"), ("a%b", "moved"), ("docs/lambda", "docs/other/lambda")],
    ids=["rename", "rename-percent", "move-under-another"],
)
def test_renamed_or_moved_folders_stay_indexed(agent: AgentProcess, tree: Path, src: str, dst: str) -> None:
    """A folder's `.rag/` moves with it and its entries still match: the parent's job has the subtree re-synced
    (once, nothing stayed: nothing was upserted and the files were gone from search until the hourly rescan)."""
    (tree / src).rename(tree / dst)
    agent.wait_idle()
    assert agent.sources() == files_in(tree)
    token = "percent" if src == "a%b" else "llama"
    where = tree / dst / ("p.md" if src == "a%b" else "deep/l3.md")
    assert keyword_hits(token) == [str(where)]
    assert agent.call("orphans")["orphans"] == []
    assert ragctl_json("verify")["repaired"] == 0  # the watcher path got it right: nothing to repair


@pytest.mark.parametrize(
    ("src", "dst"),
    [("docs/lambda/l1.md", "docs/other/l1.md"), ("docs/lambda/l2.md", "l2 moved.md")],
    ids=["into-another-folder", "into-the-root-renamed"],
)
def test_a_file_moved_into_another_folder_is_not_embedded_again(
    agent: AgentProcess, tree: Path, fake_openai_server: FakeOpenAI, src: str, dst: str
) -> None:
    """DESIGN §4: a move is a delete and a create whose chunks' vectors are reused by `content_hash`. A file's
    entry stays in its old folder's `.rag/`, which the new folder's job did not look in: every file moved from one
    folder to another was embedded again (an embeddings API paid for it twice)."""
    token = "lima" if src.endswith("l1.md") else "lemur"
    sent = len(fake_openai_server.texts)
    (tree / src).rename(tree / dst)
    agent.wait_idle()
    assert keyword_hits(token) == [str(tree / dst)]
    assert fake_openai_server.texts[sent:] == []
    assert ragctl_json("verify")["repaired"] == 0


def test_nested_root_added_and_removed_keeps_the_outer_roots_files(agent: AgentProcess, tree: Path) -> None:
    """Removing a root nested in another once un-indexed files the outer root still holds, and the counts drifted."""
    inner = tree / "docs" / "chinese"
    files = files_in(tree)
    added = ragctl_json("roots", "add", str(inner))
    assert any("inside the root" in n and str(tree) in n for n in added["notes"])
    agent.wait_idle()
    assert agent.sources() == files
    removed = ragctl_json("roots", "remove", str(inner))
    assert any("stay indexed" in n for n in removed["notes"])
    agent.wait_idle()
    assert agent.sources() == files
    assert keyword_hits("chai") == [str(inner / "c1.md")]
    assert _root_files(agent.call("status"), tree)["EMBEDDED"] == len(files)
    # and the other way round: an outer root added over an existing one, then removed again
    outer = tree.parent
    write_doc(outer / "top.md", "topaz")
    ragctl("roots", "add", str(outer))
    agent.wait_idle()
    assert agent.sources() == sorted([*files, str(outer / "top.md")])
    ragctl("roots", "remove", str(outer))
    agent.wait_idle()
    assert agent.sources() == files
    assert _root_files(agent.call("status"), tree)["EMBEDDED"] == len(files)
    # the documents' history: only the outer root's own file left (the inner root's were once all "deleted")
    assert ragctl_json("changes", "--since", "1h", "--kind", "deleted")["changes"] == []
    assert ragctl_json("changes", str(tree / "a.md"))["document"]["state"] == "EMBEDDED"


def test_a_root_removed_while_its_job_waits_for_a_failing_api_is_indexed_at_once_when_added_again(
    agent: AgentProcess, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Found by the model-based test: `roots remove` while the root's first job waited for the embeddings API, which
    then failed. The job went on and wrote the file FAILED with a retry time, so adding the root again left it
    unsearchable until then (a minute, doubling with each attempt). A job whose root is removed now leaves its files
    alone, and its outcome is dropped."""
    other = tmp_path / "papers"
    write_doc(other / "p1.md", "papaya")
    fake_openai_server.hold_next(1, status=503, message="upstream overloaded")
    fake_openai_server.fail_next(100, status=503, message="upstream overloaded")  # the client's retries too
    ragctl("roots", "add", str(other))
    poll(lambda: any("papaya" in t for t in fake_openai_server.texts), timeout=30, what="the job's request")
    ragctl("roots", "remove", str(other))
    fake_openai_server.release()
    agent.wait_idle()
    assert not any(r["path"] == str(other) for r in agent.call("status")["roots"])
    # nothing recorded (not FAILED): a new file has no entry yet, as before its texts went out
    assert not sidecar.entry_path(other, "p1.md").exists()
    fake_openai_server.reset()
    ragctl("roots", "add", str(other))
    agent.wait_idle()
    files = _root_files(agent.call("status"), other)
    assert files["EMBEDDED"] == 1 and not files.get("FAILED"), files
    assert keyword_hits("papaya") == [str(other / "p1.md")]


def test_a_root_added_again_is_back_in_the_index_from_its_sidecars(
    agent: AgentProcess, tmp_path: Path
) -> None:
    """Found by the model-based test: a root removed and added again (its sidecars all there, nothing to embed) came
    back into the index only through the verification after its rescan, as a repair; a folder of it still busy then
    (a file moved in) was left for the next periodic check (`watch.verify_interval`, 10 minutes), its files out of
    search until then. Its sidecars now fill the index when the root is added."""
    other = tmp_path / "papers"
    write_doc(other / "p1.md", "papaya")
    write_doc(other / "sub" / "p2.md", "pomelo")
    ragctl("roots", "add", str(other))
    agent.wait_idle()
    ragctl("roots", "remove", str(other))
    agent.wait_idle()
    assert keyword_hits("papaya") == []
    ragctl("roots", "add", str(other))
    agent.wait_idle()
    assert keyword_hits("papaya") == [str(other / "p1.md")]
    assert keyword_hits("pomelo") == [str(other / "sub" / "p2.md")]
    assert "missing from the index" not in agent.log()  # nothing the verification had to repair


def test_a_root_new_at_start_up_is_served_from_its_sidecars(tmp_path: Path, config: Path, tree: Path) -> None:
    """A root added to the configuration while the agent was stopped, its sidecars already there (a tree indexed
    before, or by the ragjson tool), is served from them as the agent starts, not repaired by the verification."""
    other = tmp_path / "papers"
    write_doc(other / "p1.md", "papaya")
    write_doc(other / "sub" / "p2.md", "pomelo")
    with running_agent(tmp_path / "first.log", str(tree), idle=True) as proc:
        ragctl("roots", "add", str(other))  # its sidecars are made...
        proc.wait_idle()
        ragctl("roots", "remove", str(other))  # ...and it leaves the index
        proc.wait_idle()
        assert proc.stop() == 0
    with running_agent(tmp_path / "agent.log", str(tree), str(other), idle=True) as proc:
        assert keyword_hits("papaya") == [str(other / "p1.md")]
        assert keyword_hits("pomelo") == [str(other / "sub" / "p2.md")]
        assert keyword_hits("alpha") == [str(tree / "a.md")]
        assert "missing from the index" not in proc.log(), proc.log()
        assert "2 sources served from the sidecars already there" in proc.log()


def test_a_root_dropped_while_stopped_leaves_the_index_at_start_up(
    tmp_path: Path, config: Path, tree: Path
) -> None:
    """A root taken out of the configuration while the agent was stopped leaves the index as the agent starts,
    but not what a root that stays, nested in it, holds."""
    other = tmp_path / "papers"
    write_doc(other / "p1.md", "papaya")
    write_doc(other / "inner" / "p2.md", "pomelo")
    with running_agent(tmp_path / "first.log", str(tree), str(other), idle=True) as proc:
        assert keyword_hits("papaya") == [str(other / "p1.md")]
        assert proc.stop() == 0
    with running_agent(tmp_path / "agent.log", str(tree), str(other / "inner"), idle=True) as proc:
        paths = proc.sources()
        assert str(other / "p1.md") not in paths
        assert str(other / "inner" / "p2.md") in paths and str(tree / "a.md") in paths
        assert keyword_hits("pomelo") == [str(other / "inner" / "p2.md")]
        assert "verify:" not in proc.log(), proc.log()  # nothing the verification had to remove or repair
        # the documents' history says so, as `roots remove` has it say, and only of the documents that left
        assert ragctl_json("changes", str(other / "inner" / "p2.md"))["document"]["state"] == "EMBEDDED"
        ragctl("roots", "add", str(other))  # (the history shows what is under a root)
        proc.wait_idle()
        story = ragctl_json("changes", str(other / "p1.md"))["changes"]
        assert [(c["change"], c["detail"]) for c in story] == [
            ("restored", ""), ("deleted", "its root was removed"), ("created", "")
        ]  # fmt: skip


def test_wait_while_paused_says_so_and_returns(agent: AgentProcess, tree: Path) -> None:
    ragctl_json("pause")
    done = ragctl("wait", check=None)  # nothing to do: idle, even though paused
    assert done.returncode == 0, done.stderr
    write_doc(tree / "new.md", "november")
    poll(lambda: agent.call("status")["roots"][0]["pending_dirs"] > 0, what="the change to be queued")
    blocked = ragctl("wait", "--timeout", "60", check=None)
    assert blocked.returncode == 1
    assert "paused" in blocked.stderr and "ragctl resume" in blocked.stderr
    ragctl_json("resume")
    agent.wait_idle()
    assert keyword_hits("november") == [str(tree / "new.md")]


def test_status_progress_never_counts_past_its_totals(tmp_path: Path, config: Path, tree: Path) -> None:
    """An edit during the initial indexing runs a directory twice; each directory counts once."""
    for i in range(40):
        write_doc(tree / f"bulk{i % 8}" / f"f{i}.md", f"bulk{i}")
    proc = AgentProcess(tmp_path / "agent.log", str(tree))
    try:
        proc.wait_ready()
        seen: list[dict[str, Any]] = []

        def sample_until_idle() -> bool:
            st = proc.call("status")
            prog = st["progress"]
            if prog["phase"]:
                seen.append(prog)
                write_doc(tree / "bulk1" / "f1.md", "bulk1", f"edit {len(seen)}")
            return bool(st["agent"]["state"] == "idle")

        poll(sample_until_idle, timeout=120, every=0.01, what="the agent to be idle")  # sampled densely
        assert all(p["dirs_done"] <= p["dirs_total"] for p in seen), seen
        assert all(p["files_done"] <= len(files_in(tree)) for p in seen), seen
    finally:
        proc.kill()


def test_verify_repairs_a_sidecar_changed_behind_the_agents_back(agent: AgentProcess, tree: Path) -> None:
    """Another tool rewrites one entry without a change note and deletes another: `ragctl verify` finds both,
    repairs them, says so, and `status` shows when the index was last verified."""
    st = agent.call("status")["index"]["verify"]
    assert st["last"] is not None and st["last"]["trigger"] == "rescan" and st["repaired_total"] == 0
    target = tree / "docs" / "lambda" / "l1.md"
    entry = sidecar.read_entry(sidecar.entry_path(target.parent, target.name))
    assert entry is not None
    extra = sidecar.StoredChunk("an extra chunk from elsewhere", "0" * 32, 0, entry.chunks[0].vector_base64)
    sidecar.write_entry(target.parent, entry.with_status(entry.status, chunks=(*entry.chunks, extra)))
    sidecar.entry_path(tree, "a.md").unlink()
    report = ragctl_json("verify")
    assert report["repaired_paths"] == [str(target)] and report["removed_paths"] == [str(tree / "a.md")]
    assert str(tree / "a.md") not in agent.sources()
    chunks = agent.call("index", {"sources": True})
    assert chunks["documents"] > 0
    again = ragctl_json("verify")
    assert again["repaired"] == again["removed"] == 0
    text = ragctl("verify").stdout
    assert "the index matches the sidecars" in text
    status = ragctl("status").stdout
    assert "verified" in status and "2 repaired since start" in status
    assert "verify: " in agent.log() and str(target) in agent.log()


def test_another_tools_invalid_vectors_never_hold_back_their_neighbours(
    agent: AgentProcess, tree: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A change note naming a sidecar with a zero vector and a good one: the good one is served, the bad one is
    kept out (once, the index refused the whole note and both stayed unsearchable, status EMBEDDED)."""
    ragctl_json("pause")
    d = tree / "foreign"
    d.mkdir()
    entries = []
    for name, vec in [
        ("bad.md", np.zeros(fake_openai_server.dim)),
        ("good.md", np.ones(fake_openai_server.dim)),
    ]:
        path = write_doc(d / name, name.split(".")[0] + "zulu")
        st = os.stat(path)
        source = sidecar.SourceInfo(name, "f" * 32, st.st_size, int(st.st_mtime), st.st_ino)
        chunk = sidecar.StoredChunk(path.read_text(), "e" * 32, 0, sidecar.encode_vector(vec))
        model = agent.call("status")["embedder"]
        entries.append(sidecar.FileEntry("EMBEDDED", sidecar.utc_stamp(), sidecar.utc_stamp(), source,
                                         model["model"], model["dimension"], (chunk,)))  # fmt: skip
    with sidecar.DirLock(d):
        for e in entries:
            sidecar.write_entry(d, e)
        sidecar.write_atomic(d, f"20261201T000000.000000Z-{os.getpid() + 1}-0.mushroom",
                             b'{"file": "bad.md", "status": "upsert"}\n{"file": "good.md", "status": "upsert"}\n')  # fmt: skip
    poll(lambda: keyword_hits("goodzulu") == [str(d / "good.md")], what="the good entry to be served")
    assert keyword_hits("badzulu") == []
    assert agent.call("status")["index"]["failed_mushrooms"] == []
    assert not mushroom.pending(d)
    assert "invalid vectors" in agent.log()
    ragctl_json("resume")


def test_control_socket_answers_200_clients_at_once(agent: AgentProcess) -> None:
    """The listen backlog once refused 86 of 200 simultaneous connections (EAGAIN)."""
    path = socket_path()
    barrier = threading.Barrier(200)
    answers: list[object] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            barrier.wait(30)
            with Client(path, timeout=60) as c:
                answers.append(c.call("hello"))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=one) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(answers) == 200


def test_a_nonblocking_burst_of_connects_is_not_refused(agent: AgentProcess) -> None:
    socks = []
    try:
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect(os.fspath(socket_path()))  # BlockingIOError (EAGAIN) once the backlog is full
            socks.append(s)
    finally:
        for s in socks:
            s.close()
    assert len(socks) == 200


def test_an_agent_started_on_a_damaged_index_refills_it_before_verifying(
    tmp_path: Path,
    config: Path,
    tree: Path,
) -> None:
    """A zero-length manifest once crashed every start (rc 139). The agent recreates the index and refills it
    from the sidecars at once, so its first verification finds nothing to repair."""
    first = AgentProcess(tmp_path / "a1.log", str(tree))
    try:
        first.wait_ready()
        first.wait_idle()
    finally:
        assert first.stop() == 0
    cfg = load_config(config)
    manifest = health.newest_manifest(collection_dir(data_dir(cfg), cfg.identity))
    assert manifest is not None
    manifest.write_bytes(b"")
    again = AgentProcess(tmp_path / "a2.log", str(tree))
    try:
        again.wait_ready()
        again.wait_idle()
        assert again.sources() == files_in(tree)
        verify = again.call("status")["index"]["verify"]
        assert verify["last"] is not None and verify["repaired_total"] == 0
        assert "refilled from the sidecars" in again.log()
        assert keyword_hits("llama") == [str(tree / "docs/lambda/deep/l3.md")]
    finally:
        again.kill()
