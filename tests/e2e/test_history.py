"""Documents' identity and history through the real agent and `ragctl`, while a second "terminal" (this test)
renames, moves, copies, edits and deletes files: the id survives a rename and a folder move, `ragctl changes`
tells the story, copies fold into one search hit, and a lost history is rebuilt from the sidecars."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.pipeline import sidecar
from tests.e2e.agent import AgentProcess, ragctl, ragctl_json, running_agent, write_doc
from tests.e2e.conftest import ragd, ragd_json
from tests.support.poll import poll


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write_doc(root / "contracts" / "lease.md", "quokkalease")
    write_doc(root / "notes" / "todo.md", "wombattodo")
    return root


@pytest.fixture
def agent(tmp_path: Path, config: Path, root: Path) -> Iterator[AgentProcess]:
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as proc:
        yield proc


def doc_id(path: Path) -> str | None:
    entry = sidecar.try_read(sidecar.entry_path(path.parent, path.name))
    return entry.document_id if entry is not None else None


def settle() -> None:
    ragctl("wait", "--timeout", "60")


def test_identity_survives_a_rename_and_a_folder_move(agent: AgentProcess, root: Path) -> None:
    lease = root / "contracts" / "lease.md"
    first = doc_id(lease)
    assert first
    hit = ragctl_json("search", "quokkalease", "--mode", "keyword", "-k", "1")["results"][0]
    assert hit["document_id"] == first and hit["indexed_at"] and hit["modified_at"]

    renamed = root / "contracts" / "lease-2026.md"
    lease.rename(renamed)
    poll(lambda: doc_id(renamed), what="the renamed file's entry")
    settle()
    assert doc_id(renamed) == first
    (root / "contracts").rename(root / "archive")  # the folder moves with its .rag/
    settle()
    moved = root / "archive" / "lease-2026.md"
    hit = poll(lambda: ragctl_json("search", "quokkalease", "--mode", "keyword", "-k", "1")["results"],
               what="the moved file found")  # fmt: skip
    assert hit[0]["path"] == str(moved) and hit[0]["document_id"] == first

    story = ragctl_json("changes", str(moved))
    assert story["document"]["document_id"] == first and story["document"]["path"] == str(moved)
    kinds = [(c["change"], c["path"], c["old_path"]) for c in story["changes"]]
    assert kinds[0] == ("moved", str(moved), str(root / "contracts" / "lease-2026.md"))
    assert ("moved", str(root / "contracts" / "lease-2026.md"), str(lease)) in kinds
    assert kinds[-1] == ("created", str(lease), None)
    assert len(story["document"]["versions"]) == 1  # the content never changed
    text = ragctl("changes", str(moved)).stdout
    assert f"document {first}: {moved}  (EMBEDDED)" in text and f"(from {lease})" in text


def test_changes_edits_deletes_and_restores(agent: AgentProcess, root: Path) -> None:
    todo = root / "notes" / "todo.md"
    first = doc_id(todo)
    write_doc(todo, "wombattodo", extra=" Edited.")
    settle()
    todo.unlink()
    settle()
    write_doc(todo, "wombattodo")  # back again, as it was before the edit
    settle()
    assert doc_id(todo) == first
    recent = ragctl_json("changes", str(root / "notes"), "--since", "1h")["changes"]
    assert [c["change"] for c in recent] == ["changed", "restored", "deleted", "changed", "created"]
    assert all(c["document_id"] == first and c["rel_path"] == "notes/todo.md" for c in recent)
    story = ragctl_json("changes", str(todo))
    versions = [v["md5"] for v in story["document"]["versions"]]
    assert len(versions) == 3 and versions[0] == versions[2] != versions[1]  # back to the first content
    assert ragctl_json("changes", "--since", "1h", "--kind", "deleted")["changes"][0]["path"] == str(todo)
    bad = ragctl("changes", "--since", "yesterday-ish", check=2)  # a bad request: a usage error
    assert "neither a duration nor a date" in bad.stderr


def test_copies_fold_into_one_hit_and_are_counted(agent: AgentProcess, root: Path) -> None:
    shutil.copy2(root / "notes" / "todo.md", root / "todo-copy.md")
    settle()
    assert doc_id(root / "todo-copy.md") not in (
        None,
        doc_id(root / "notes" / "todo.md"),
    )  # a copy: its own id
    hits = ragctl_json("search", "wombattodo", "--mode", "keyword", "-k", "5")["results"]
    assert len(hits) == 1, hits
    assert hits[0]["duplicates"] == sorted({str(root / "notes" / "todo.md"), str(root / "todo-copy.md")}
                                           - {hits[0]["path"]})  # fmt: skip
    status = ragctl_json("status")
    assert status["history"]["duplicates"] == {"groups": 1, "files": 2}
    assert "2 files are copies in 1 groups of the same content" in ragctl("status").stdout


def test_a_lost_history_is_rebuilt_from_the_sidecars(tmp_path: Path, config: Path, root: Path) -> None:
    with running_agent(tmp_path / "agent1.log", str(root), idle=True):
        first = doc_id(root / "notes" / "todo.md")
        data = Path(ragctl_json("status")["agent"]["data_dir"])
    assert (data / "history.sqlite3").is_file()
    for leftover in data.glob("history.sqlite3*"):
        leftover.unlink()
    with running_agent(tmp_path / "agent2.log", str(root), idle=True):
        story = ragctl_json("changes", str(root / "notes" / "todo.md"))
        assert story["document"]["document_id"] == first
        assert [(c["change"], c["detail"]) for c in story["changes"]] == [("created", "from the sidecar")]
        hit = ragctl_json("search", "wombattodo", "--mode", "keyword", "-k", "1")["results"][0]
        assert hit["document_id"] == first


def test_run_once_keeps_the_history_and_offline_search_reports_it(config: Path, root: Path) -> None:
    ragd("run", "--once", str(root))
    todo = root / "notes" / "todo.md"
    first = doc_id(todo)
    todo.rename(root / "todo.md")  # a move to another folder, seen by the next run
    ragd("run", "--once", str(root))
    assert doc_id(root / "todo.md") == first
    hit = ragd_json("search", "wombattodo", "--mode", "keyword", "-k", "1")["results"][0]
    assert hit["path"] == str(root / "todo.md") and hit["document_id"] == first
    assert hit["indexed_at"] and hit["modified_at"]
