"""One vocabulary (ragd/vocabulary.py): the file states, change kinds and change-note statuses keep the strings the
sidecars (RAG-Storage-Spec v2.4, shared with the ragjson tool), the history and every answer carry, and no module
spells them out again."""

from __future__ import annotations

import ast
import json
import typing
from pathlib import Path

import orjson
import pytest

from ragctl import protocol as p
from ragd.mcp.outputs import ChangeName
from ragd.resident.tracker import Tracker
from ragd.vocabulary import KINDS, SETTLED, SHOWN, ChangeKind, FileState, NoteStatus

RAGD = Path(__file__).resolve().parents[3] / "agent" / "ragd"
HOME = RAGD / "vocabulary.py"
# the modules that speak of changes and change notes: there a lower-case kind or status is one of these
SPEAKING = ("resident/changes.py", "resident/history.py", "resident/historydb.py", "resident/historywrite.py",
            "pipeline/mushroom.py", "pipeline/dirplan.py", "pipeline/dirjob.py", "index/write/sync.py",
            "mcp/events.py", "mcp/outputs.py", "mcp/prompts.py", "verbs/changes.py")  # fmt: skip


def test_the_strings_are_those_on_disk_and_on_the_wire() -> None:
    assert [s.value for s in FileState][:7] == ["INITIAL", "CHUNKING", "CHUNKED", "EMBEDDING", "EMBEDDED",
                                                "SKIPPED", "FAILED"]  # fmt: skip
    assert all(s.value == s.name for s in FileState)
    assert KINDS == ("created", "changed", "moved", "deleted", "restored", "failed", "recovered", "skipped",
                     "relabeled")  # fmt: skip
    assert [s.value for s in NoteStatus] == ["upsert", "delete", "dir_delete", "dir_recover"]
    assert set(SETTLED) < set(SHOWN) and typing.get_args(ChangeName) == KINDS  # MCP's schema lists every kind


def test_a_member_is_its_string_in_json_and_in_comparisons() -> None:
    assert json.dumps({"state": FileState.EMBEDDED, "change": ChangeKind.MOVED}) == (
        '{"state": "EMBEDDED", "change": "moved"}'
    )
    assert orjson.dumps([NoteStatus.DIR_DELETE]) == b'["dir_delete"]'
    assert (
        FileState.FAILED == "FAILED"
        and "upsert" in {NoteStatus.UPSERT}
        and f"{ChangeKind.CREATED}" == "created"
    )


def test_a_roots_file_counts_are_keyed_by_plain_strings(tmp_path: Path) -> None:
    """orjson, unlike json, refuses a dict key that is not exactly a str."""
    counts = Tracker().root_summary(tmp_path)["files"]
    assert orjson.loads(orjson.dumps(counts)) == {"EMBEDDED": 0, "SKIPPED": 0, "FAILED": 0}


def _literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]  # fmt: skip


@pytest.mark.parametrize("module", sorted(str(p.relative_to(RAGD)) for p in RAGD.rglob("*.py") if p != HOME))
def test_no_module_spells_a_state_kind_or_status_out(module: str) -> None:
    states = {s.value for s in FileState}
    words = {*KINDS, *(s.value for s in NoteStatus)} if module in SPEAKING else set()
    quoted = {f"'{v}'" for v in (*states, *KINDS)}  # in SQL text
    found = [(line, text) for line, text in _literals(RAGD / module)
             if text in states or text in words or any(q in text for q in quoted)]  # fmt: skip
    assert found == [], f"name them from ragd.vocabulary: {found}"


RAGCTL = RAGD.parents[1] / "cli" / "ragctl"


def test_ragctl_knows_the_states_and_kinds_by_the_agents_names() -> None:
    """`ragctl` imports nothing of the agent: it names a file's states and the kinds of change by ragctl.protocol's
    wire names, which are the agent's enums' values, in the same order."""
    assert tuple(s.value for s in FileState) == p.FILE_STATES
    assert p.CHANGE_KINDS == tuple(k.value for k in ChangeKind) == KINDS
    assert p.SETTLED == SETTLED and (p.EMBEDDED, p.SKIPPED, p.FAILED_STATE) == (
        FileState.EMBEDDED, FileState.SKIPPED, FileState.FAILED)  # fmt: skip


@pytest.mark.parametrize("module", sorted(str(m.relative_to(RAGCTL)) for m in RAGCTL.rglob("*.py")
                                          if m != RAGCTL / "protocol" / "__init__.py"))  # fmt: skip
def test_no_ragctl_module_spells_a_state_out(module: str) -> None:
    states = {s.value for s in FileState}
    found = [(line, text) for line, text in _literals(RAGCTL / module) if text in states]
    assert found == [], f"name them from ragctl.protocol: {found}"
