"""What the agent keeps for every file is small and compacted (resident/memory.py `compact`, issue 36): the tracker's
states shared, the tracker's, the stat cache's and the verifier's records copied once jobs have recorded enough
files, each name one string for the three. Real holders on real sidecars in a temp dir."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ragd.index.write.entrycache import SidecarCache
from ragd.model import EmbeddingIdentity, SplitterSettings
from ragd.pipeline import sidecar, statcache
from ragd.pipeline.dirjob import DirResult
from ragd.pipeline.outcome import FileOutcome
from ragd.pipeline.sidecar import FileEntry, SourceInfo, StoredChunk
from ragd.resident import memory
from ragd.resident.tracker import Tracker
from ragd.vocabulary import FileState

IDENTITY = EmbeddingIdentity("m", 4, SplitterSettings("recursive", 1000, 200))
NAMES = [f"note{i:03d}.md" for i in range(40)] + ["源 %_'.md"]


def _entry(name: str) -> FileEntry:
    chunk = StoredChunk("hello 你好", "h1", 0, sidecar.encode_vector(np.arange(1, 5, dtype=np.float32)), {})
    src = SourceInfo(
        name, "0" * 32, 10, 1_700_000_000, 42, 1_700_000_000_123_456_789, 1_700_000_000_123_456_789
    )
    return FileEntry(FileState.EMBEDDED, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", src, "m", 4, (chunk,),
                     parser="text", splitter=IDENTITY.splitter.fingerprint)  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    with sidecar.DirLock(tmp_path):
        for name in NAMES:
            sidecar.write_entry(tmp_path, _entry(name))
            (tmp_path / name).write_text("hello 你好")
    return tmp_path


def _stat_cache(folder: Path) -> statcache.StatCache:
    """A stat cache holding the folder's records, as a job leaves it (entries older than RACY_NS are cached)."""
    cache = statcache.StatCache()
    found = statcache.load_dir(folder, cache)
    if len(found.records) < len(NAMES):  # written just now: too recent to be cached by load_dir
        found.records.update({n: statcache._record((0, 0, 0, 0, 0), d) for n, d in found.live.items()})
    statcache.keep(cache, folder, found, changed=())
    return cache


def test_files_in_the_same_state_share_one_state() -> None:
    t = Tracker()
    t.record(DirResult(Path("/r"), tuple(FileOutcome(f"n{i}.md", FileState.EMBEDDED) for i in range(100))))
    t.record(DirResult(Path("/r/s"), (FileOutcome("a.md", FileState.UNCHANGED),
                                      FileOutcome("b.pdf", FileState.FAILED, reason="encrypted"))))  # fmt: skip
    states = {t.file_state(Path(f"/r/n{i}.md")) for i in range(100)} | {t.file_state(Path("/r/s/a.md"))}
    assert len({id(s) for s in states}) == 1 and next(iter(states)).state == FileState.EMBEDDED
    failed = t.file_state(Path("/r/s/b.pdf"))
    assert failed is not None and (failed.state, failed.reason) == (FileState.FAILED, "encrypted")


def test_the_records_kept_for_every_file_are_copied_once_enough_files_were_recorded(folder: Path) -> None:
    tracker = Tracker()
    tracker.record(DirResult(folder, tuple(FileOutcome(n, FileState.EMBEDDED) for n in NAMES)))
    cache = _stat_cache(folder)
    verifier = SidecarCache(IDENTITY)
    expected = verifier.expected(folder, NAMES)
    verifier.end_pass()
    where = str(folder)
    before = {n: cache.get(where, n) for n in NAMES}
    assert all(before.values())
    for holder in (tracker, cache, verifier):
        memory.register(holder)

    assert memory.compact(after=sys.maxsize, every=0) == 0  # not due: nothing copied
    assert all(cache.get(where, n) is before[n] for n in NAMES)

    memory.recorded(len(NAMES))
    copied = memory.compact(after=len(NAMES), every=0)
    assert copied >= 3 * len(NAMES)  # (other live holders may be registered too)
    after = {n: cache.get(where, n) for n in NAMES}
    assert after == before and not any(after[n] is before[n] for n in NAMES)  # equal records, new objects
    assert verifier.expected(folder, NAMES) == expected  # still served from its records, read again from none
    assert {tracker.file_state(folder / n) for n in NAMES} == {tracker.file_state(folder / NAMES[0])}
    for n in NAMES:  # each name one string for the three holders
        keys = [_key(tracker._dirs[folder], n), _key(cache._dirs[where], n), _key(verifier._seen[folder], n)]
        assert keys[0] is keys[1] is keys[2]
    assert memory.compact(after=len(NAMES), every=0) == 0  # the count starts again
    memory.recorded(len(NAMES))
    assert memory.compact(after=len(NAMES), every=3600) == 0  # due by count, but one was made just now


def test_a_verification_pass_under_way_is_left_alone(folder: Path) -> None:
    verifier = SidecarCache(IDENTITY)
    verifier.expected(folder, NAMES)
    verifier.end_pass()
    verifier.expected(folder, NAMES[:1])  # a pass under way (the verifier's thread)
    assert verifier.compact() == 0
    verifier.end_pass()
    assert verifier.compact() == 1


def _key(d: dict[str, object], name: str) -> str:
    return next(k for k in d if k == name)
