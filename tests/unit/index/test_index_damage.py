"""Damaged zvec collections: detected before zvec can crash this process, rebuilt, or reported when read-only.

Each case damages a real collection the way it was seen to crash zvec 0.8 (SIGSEGV/SIGABRT at open) or to fail
it, then opens it in *this* process: the test process surviving is part of the assertion.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexBusy, IndexError_
from ragd.index import collection_dir, open_index, open_or_rebuild
from ragd.index.zvec import health
from tests.unit.index.test_index_zvec import HOLDER, IDENTITY, load_corpus, rel_paths

SMALL = {"a.md": ["alpha text about quokkas"], "b.md": ["beta text", "more beta"]}


def _build(base: Path) -> Path:
    ix = open_index(base, IDENTITY, IndexConfig())
    load_corpus(ix, base / "kb", SMALL)
    ix.close()
    return collection_dir(base, IDENTITY)


def _manifest(coll: Path) -> Path:
    found = health.newest_manifest(coll)
    assert found is not None
    return found


def _rename_in_manifest(old: bytes, new: bytes) -> Callable[[Path], None]:
    def damage(coll: Path) -> None:
        data = _manifest(coll).read_bytes()
        assert old in data
        _manifest(coll).write_bytes(data.replace(old, new, 1))

    return damage


def _zero(name: str) -> Callable[[Path], None]:
    return lambda coll: next(coll.rglob(name)).write_bytes(b"")


def _random(name: str) -> Callable[[Path], None]:
    def damage(coll: Path) -> None:
        target = next(coll.rglob(name))
        target.write_bytes(random.Random(1).randbytes(max(target.stat().st_size, 64)))

    return damage


DAMAGE: dict[str, Callable[[Path], None]] = {
    # crash zvec 0.8 in the opening process:
    "empty manifest (SIGSEGV)": lambda coll: _manifest(coll).write_bytes(b""),
    "empty newer manifest beside a good one (SIGSEGV)": lambda coll: (
        coll / f"manifest.{int(_manifest(coll).name.split('.')[1]) + 1}"
    ).write_bytes(b""),
    "manifest names a field the segments lack (SIGABRT)": _rename_in_manifest(
        b"content_hash", b"content_hasi"
    ),
    "manifest names a vector the segments lack (SIGSEGV)": _rename_in_manifest(b"embedding", b"dmbedding"),
    # make zvec raise:
    "manifest of random bytes": _random("manifest.*"),
    "segment data file emptied": _zero("scalar.0.ipc"),
    "segment vector file of random bytes": _random("*.proxima"),
    "delete store missing": lambda coll: (coll / "del.0").unlink(),
}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_damaged_collection_is_rebuilt_empty_and_usable(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    coll = _build(tmp_path)
    DAMAGE[how](coll)
    with caplog.at_level(logging.WARNING, logger="ragd.index"):
        ix, rebuilt = open_or_rebuild(tmp_path, IDENTITY, IndexConfig())
    try:
        assert rebuilt and ix.count() == 0
        assert f"the index at {coll} is damaged" in caplog.text
        assert "rebuilding it from the .ragjson sidecars" in caplog.text
        load_corpus(ix, tmp_path / "kb", SMALL)
        assert rel_paths(ix.query(vector=None, text="quokkas", k=3), tmp_path / "kb") == ["a.md"]
    finally:
        ix.close()
    again, rebuilt = open_or_rebuild(tmp_path, IDENTITY, IndexConfig())
    assert not rebuilt and again.count() == 3
    again.close()


@pytest.mark.parametrize(
    "how", ["empty manifest (SIGSEGV)", "manifest names a vector the segments lack (SIGSEGV)"]
)
def test_read_only_open_of_a_damaged_collection_says_what_to_do(tmp_path: Path, how: str) -> None:
    coll = _build(tmp_path)
    DAMAGE[how](coll)
    for read_only in (True, False):  # `ragd search`, and `ragd orphans --clean` (a writer without rebuild)
        with pytest.raises(IndexError_) as err:
            open_index(tmp_path, IDENTITY, IndexConfig(), read_only=read_only)
        assert not isinstance(err.value, IndexBusy)
        assert err.value.message.startswith(f"the index at {coll} is damaged")
        assert "`ragd run`" in err.value.hint and "rebuild" in err.value.hint
    assert coll.exists()  # reporting is not deleting


def test_clean_close_stamps_the_collection_and_a_crash_does_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    coll = _build(tmp_path)
    assert health.stamp_matches(coll)
    caplog.set_level(logging.INFO, logger="ragd.index")
    open_index(tmp_path, IDENTITY, IndexConfig(), read_only=True).close()
    assert "in a child process" not in caplog.text  # a clean close needs no probe at the next open
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    assert not health.stamp_path(coll).exists()  # a writer holds it: no stamp until it closes cleanly
    with pytest.raises(IndexBusy):
        open_index(tmp_path, IDENTITY, IndexConfig())
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=20)
    ix = open_index(tmp_path, IDENTITY, IndexConfig())
    try:
        assert f"checked the index at {coll} in a child process: ok, 3 documents" in caplog.text
        assert ix.count() == 3
    finally:
        ix.close()
    assert health.stamp_matches(coll)


def test_a_changed_manifest_is_probed_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    coll = _build(tmp_path)
    _rename_in_manifest(b"content_hash", b"content_hasi")(coll)  # same size, other bytes
    assert not health.stamp_matches(coll)
    with pytest.raises(IndexError_, match="crashed the process"):
        open_index(tmp_path, IDENTITY, IndexConfig(), read_only=True)


def test_probe_reports_how_the_child_ended(tmp_path: Path) -> None:
    coll = _build(tmp_path)
    assert health.probe(coll) == health.Verdict(False, "ok, 3 documents")
    assert not health.probe(tmp_path / "absent").damaged
    _manifest(coll).write_bytes(b"")
    verdict = health.probe(coll)
    assert verdict.damaged and "SIGSEGV" in verdict.detail


def test_a_requested_rebuild_is_information_not_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`ragctl index --rebuild` / `--rebuild-index` delete the collection on purpose: nothing alarming to log."""
    from ragd.index import destroy_index

    coll = _build(tmp_path)
    with caplog.at_level(logging.INFO, logger="ragd.index"):
        assert destroy_index(tmp_path, IDENTITY)
    assert not coll.exists() and f"deleted the index at {coll}" in caplog.text
    assert [r.levelname for r in caplog.records if r.name.startswith("ragd.index")] == ["INFO"]


def test_the_collections_of_earlier_index_schemas_are_removed_and_others_kept(tmp_path: Path) -> None:
    """After an upgrade that changes the collection's fields, the old collection is derived data no version can
    open any more: it is removed when the new one is opened for writing (the new one is filled from the sidecars);
    another identity's collection (another model) stays."""
    from ragd.index.backend import SCHEMA_VERSION, collection_name
    from ragd.model import EmbeddingIdentity

    older = tmp_path / "index" / collection_name(IDENTITY, SCHEMA_VERSION - 1)
    older.mkdir(parents=True)
    (older / "data.bin").write_bytes(b"old segments")
    older.with_name(older.name + ".verified").write_text("{}")
    older.with_name(older.name + ".checked").write_text("{}")
    other = tmp_path / "index" / collection_name(EmbeddingIdentity("another-model", 8), SCHEMA_VERSION - 1)
    other.mkdir()
    ix, rebuilt = open_or_rebuild(tmp_path, IDENTITY, IndexConfig())
    ix.close()
    assert not older.exists() and not older.with_name(older.name + ".verified").exists()
    assert not older.with_name(older.name + ".checked").exists()
    assert other.exists() and collection_dir(tmp_path, IDENTITY).exists() and not rebuilt
