"""A damaged index through the real `ragd` command: rebuilt by `run --once`, reported by `search`; never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from ragd.config import data_dir, load_config
from ragd.index import collection_dir
from ragd.index.zvec import health
from ragd.pipeline import sidecar
from tests.e2e.conftest import ragd, ragd_json


def _tree(root: Path) -> list[Path]:
    (root / "sub").mkdir(parents=True)
    files = []
    for i in range(5):
        f = root / ("sub" if i % 2 else "") / f"note {i}.md"
        f.write_text(f"# Note {i}\n\nSentence {i} about quokkas and vectors.\n")
        files.append(f)
    return files


def _zero_manifest(api_config_file: Path) -> Path:
    cfg = load_config(api_config_file)
    coll = collection_dir(data_dir(cfg), cfg.identity)
    manifest = health.newest_manifest(coll)
    assert manifest is not None and manifest.stat().st_size > 0
    manifest.write_bytes(b"")
    return coll


def test_run_once_rebuilds_an_index_with_an_empty_manifest(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "kb"
    files = _tree(root)
    first = ragd_json("run", "--once", str(root))
    chunks = sum(len(sidecar.read_entry(sidecar.entry_path(f.parent, f.name)).chunks) for f in files)  # type: ignore[union-attr]
    assert first["index"]["chunks"] == chunks
    coll = _zero_manifest(api_config_file)

    damaged = ragd("search", "quokkas", "--mode", "keyword", check=1)  # read-only: a clear error, no crash
    assert f"the index at {coll} is damaged: its manifest" in damaged.stderr
    assert "`ragd run`" in damaged.stderr

    out = ragd("run", "--once", "--json", str(root))
    assert (
        f"the index at {coll} is damaged" in out.stderr
        and "rebuilding it from the .ragjson sidecars" in out.stderr
    )
    summary = json.loads(out.stdout)
    assert summary["index"]["rebuilt"] is True and summary["index"]["chunks"] == chunks
    assert summary["embedded"] == 0  # rebuilt from the sidecars: nothing embedded again
    hits = ragd_json("search", "quokkas", "--mode", "keyword", "-k", "10")["results"]
    assert {h["path"] for h in hits} == {str(f) for f in files}
