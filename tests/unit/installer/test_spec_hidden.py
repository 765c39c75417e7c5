"""The frozen program holds every module ragd loads only by name: PyInstaller's scan cannot see those imports."""

from __future__ import annotations

from pathlib import Path

from ragd.index.keyword import WORKER_CUT

SPEC = Path(__file__).resolve().parents[3] / "packaging" / "ragd.spec"


def test_the_parse_workers_cut_is_in_the_frozen_program() -> None:
    """Named to the workers (`Parsers(cut=…)`), never imported by the agent: without it in the spec, a frozen
    agent's workers would not cut, and its index writer would do all the cutting again."""
    module = WORKER_CUT.partition(":")[0]
    assert f'"{module}"' in SPEC.read_text(encoding="utf-8")
