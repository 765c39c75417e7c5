"""The verifier's memory of what each sidecar entry says (index/write/entrycache.py `SidecarCache`), on real files."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragd.index.write.entrycache import SidecarCache, pack, unpack
from ragd.model import EmbeddingIdentity, SplitterSettings
from ragd.pipeline import sidecar
from ragd.pipeline.scan import Expected
from ragd.pipeline.sidecar import FileEntry, SourceInfo, StoredChunk
from ragd.vocabulary import FileState

IDENTITY = EmbeddingIdentity("m", 4, SplitterSettings("recursive", 1000, 200))


def _entry(md5: str) -> FileEntry:
    chunk = StoredChunk("hello 你好", "h1", 0, sidecar.encode_vector(np.arange(1, 5, dtype=np.float32)), {})
    src = SourceInfo("a.md", md5, 10, 1_700_000_000, 42, 1_700_000_000_123_456_789, 1_700_000_000_123_456_789)
    return FileEntry(FileState.EMBEDDED, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", src, "m", 4, (chunk,),
                     parser="text", splitter=IDENTITY.splitter.fingerprint)  # fmt: skip


def test_an_entry_rewritten_in_place_with_its_mtime_put_back_is_read_again(tmp_path: Path) -> None:
    """Another tool rewrites the entry in place, same size, and restores its mtime: only the ctime tells."""
    with sidecar.DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, _entry("0" * 32))
    cache = SidecarCache(IDENTITY)
    assert cache.one(path) == Expected("0" * 32, 1)
    cache.end_pass()  # the next verify pass trusts what it read under the same stat
    st = path.stat()
    data = path.read_bytes().replace(b"0" * 32, b"1" * 32)
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = path.stat()
    assert (now.st_mtime_ns, now.st_size, now.st_ino) == (st.st_mtime_ns, st.st_size, st.st_ino)
    assert cache.one(path) == Expected("1" * 32, 1)
    cache.end_pass()
    os.unlink(path)
    assert cache.one(path) is None  # a deleted entry says nothing


def test_the_recorded_source_stat_is_kept_for_the_entries_a_job_keeps_up_to_date(tmp_path: Path) -> None:
    """What the verification compares each source's own stat with: EMBEDDED and SKIPPED entries' records; a FAILED
    entry keeps its old record while its content is unchanged, so it is never compared."""
    entry = _entry("0" * 32)
    with sidecar.DirLock(tmp_path):
        sidecar.write_entry(tmp_path, entry)
        sidecar.write_entry(
            tmp_path, entry.with_status(FileState.FAILED, source=SourceInfo("b.md", "", 1, 2, 3))
        )
    cache = SidecarCache(IDENTITY)
    cache.expected(tmp_path, ["a.md", "b.md"])
    assert cache.recorded(tmp_path, "a.md") == entry.source
    assert cache.recorded(tmp_path, "b.md") is None
    assert cache.recorded(tmp_path, "c.md") is None  # not seen in this pass


def test_each_entry_is_remembered_as_one_packed_record(tmp_path: Path) -> None:
    """The cache holds a record for every file of every root for the agent's life: one `bytes` per entry, keyed by
    directory and name (not a Path, a tuple and two objects per entry: 38 MiB for 30,000 notes)."""
    entry = _entry("0" * 32)
    with sidecar.DirLock(tmp_path):
        for name in ("a.md", "b.md", "c.md"):
            sidecar.write_entry(
                tmp_path, entry.with_status(entry.status, source=replace(entry.source, file_name=name))
            )
    cache = SidecarCache(IDENTITY)
    assert len(cache.expected(tmp_path, ["a.md", "b.md", "c.md"])) == 3
    cache.end_pass()
    assert cache.expected(tmp_path, ["a.md", "b.md", "c.md"]) == {
        str(tmp_path / n): Expected("0" * 32, 1) for n in ("a.md", "b.md", "c.md")
    }
    records = cache._seen[tmp_path]
    assert sorted(records) == ["a.md", "b.md", "c.md"]
    assert all(isinstance(r, bytes) and len(r) < 160 for r in records.values())
    assert cache.recorded(tmp_path, "b.md") == replace(entry.source, file_name="b.md")


@pytest.mark.parametrize(
    ("want", "src"),
    [
        (
            Expected("0" * 32, 3),
            SourceInfo("a.md", "0" * 32, 10, 1_700_000_000, 42, 1_700_000_000_123_456_789, None),
        ),
        (
            None,
            SourceInfo("名字 \udcff.md", "", 0, 0, 0),
        ),  # SKIPPED, no ns stamps (the ragjson tool's), odd name
        (Expected("f" * 32, 0), None),
        (None, None),
        (
            Expected("0" * 32, 1),
            SourceInfo("a.md", "0" * 32, 2**70, -5, 42),
        ),  # out of the packed range: kept as is
    ],
)
def test_a_record_gives_back_what_it_was_packed_from(want: Expected | None, src: SourceInfo | None) -> None:
    key = (2049, 2**63 + 5, 4096, -1_000, 1_700_000_000_123_456_789)
    assert unpack(pack(key, want, src)) == (key, want, src)
