from __future__ import annotations

import errno
import json
import multiprocessing
import os
import stat
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragd import modes
from ragd.errors import StorageError
from ragd.model import OcrReport
from ragd.pipeline import sidecar
from ragd.pipeline.sidecar import DirLock, FileEntry, SourceInfo, StoredChunk
from ragd.vocabulary import FileState
from tests.conftest import DATA
from tests.support.poll import poll

FIXTURE = DATA / "ragjson-0.5.1" / "tree"
REQUIRED = {"ragjson_version", "processing", "source", "embedding", "chunks"}


def _entry(name: str = "a.md", vec: np.ndarray | None = None) -> FileEntry:
    v = sidecar.encode_vector(vec if vec is not None else np.arange(4, dtype=np.float32))
    chunk = StoredChunk(
        "hello 你好", "h1", 0, v, {"start_line": 1, "end_line": 1, "heading_path": ["A", "B"]}
    )
    src = SourceInfo(
        name, "0" * 32, 10, 1_700_000_000, 42, 1_700_000_000_123_456_789, 1_700_000_000_123_456_789
    )
    return FileEntry(
        FileState.EMBEDDED,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:01Z",
        src,
        "m",
        4,
        (chunk,),
        parser="text",
        splitter="recursive:1000:200",
    )


def test_vector_round_trip_is_little_endian_float32() -> None:
    vec = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    encoded = sidecar.encode_vector(vec)
    assert np.frombuffer(__import__("base64").b64decode(encoded), dtype="<f4").tolist() == [1.5, -2.0, 0.25]
    assert sidecar.decode_vector(encoded).tolist() == [1.5, -2.0, 0.25]


def test_reads_every_fixture_entry_of_the_ragjson_tool() -> None:
    entry = sidecar.read_entry(FIXTURE / "docs" / ".rag" / "phone.md.ragjson")
    assert entry is not None
    assert entry.status == FileState.EMBEDDED and entry.model_name == "fake-embed-8" and entry.dimension == 8
    assert entry.source.file_name == "phone.md" and entry.source.mtime_ns is None
    assert entry.chunks[0].vector is not None and entry.chunks[0].vector.shape == (8,)
    assert sidecar.read_entry(FIXTURE / ".rag" / "docs.ragjson") is None  # directory entry


def test_written_entry_keeps_every_key_the_ragjson_tool_requires(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, _entry())
    data = json.loads(path.read_text(encoding="utf-8"))
    tool = json.loads((FIXTURE / "docs" / ".rag" / "ml.txt.ragjson").read_text())
    assert set(data) >= REQUIRED
    for section in ("processing", "source", "embedding"):
        assert set(tool[section]) <= set(data[section])
        for key in tool[section]:
            assert type(data[section][key]) is type(tool[section][key]), (section, key)
    assert set(tool["chunks"][0]) <= set(data["chunks"][0])
    assert data["ragjson_version"] == "2.4"
    assert "你好" in path.read_text(encoding="utf-8")  # UTF-8, not \\u escapes
    again = sidecar.parse_entry(
        path, path.read_bytes()
    )  # from the disk (read_entry takes the entry just written)
    assert again == _entry()


def test_ocr_key_round_trips_and_is_absent_without_ocr(tmp_path: Path) -> None:
    report = OcrReport(pages=(2, 3), confidence=0.93, low_pages=(3,), not_read=((4, "OCR failed: boom"),))
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, replace(_entry("scan.pdf"), ocr=report.to_json()))
        plain = sidecar.write_entry(tmp_path, _entry())
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["ocr"] == {"pages": [2, 3], "confidence": 0.93, "low_confidence_pages": [3],
                           "not_read": [{"page": 4, "reason": "OCR failed: boom"}]}  # fmt: skip
    entry = sidecar.parse_entry(path, path.read_bytes())
    assert entry is not None and entry.ocr == data["ocr"]
    assert "ocr" not in json.loads(plain.read_text(encoding="utf-8"))


def test_dir_entry_is_exactly_the_version(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        p = sidecar.write_dir_entry(tmp_path, "sub")
    assert json.loads(p.read_text()) == {"ragjson_version": "2.4"}


def test_deleted_rename_and_recover(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        sidecar.write_entry(tmp_path, _entry("x.md"))
        sidecar.mark_deleted(tmp_path, "x.md")
        names = {(e.name, e.deleted) for e in sidecar.list_entries(tmp_path)}
        assert names == {("x.md", True)}
        sidecar.recover(tmp_path, "x.md")
        assert {(e.name, e.deleted) for e in sidecar.list_entries(tmp_path)} == {("x.md", False)}


def test_lock_removes_debris_and_malformed_entry_is_a_clear_error(tmp_path: Path) -> None:
    tmp = tmp_path / ".rag" / "tmp"
    tmp.mkdir(parents=True)
    (tmp / "a.md.ragjson.123.tmp").write_text("{half")
    (tmp_path / ".rag" / "bad.md.ragjson").write_text("{not json")
    with DirLock(tmp_path):
        assert list(tmp.iterdir()) == []
    with pytest.raises(StorageError, match=r"bad\.md\.ragjson"):
        sidecar.read_entry(tmp_path / ".rag" / "bad.md.ragjson")


def _hold_lock(directory: str, started: multiprocessing.synchronize.Event, seconds: float) -> None:
    with DirLock(Path(directory)):
        started.set()
        time.sleep(seconds)  # hold the lock a while: the other side has to wait for it


def test_lock_serialises_processes_and_threads(tmp_path: Path) -> None:
    started = multiprocessing.Event()
    proc = multiprocessing.get_context("fork").Process(target=_hold_lock, args=(str(tmp_path), started, 0.5))
    proc.start()
    assert started.wait(10)
    t0 = time.monotonic()
    with DirLock(tmp_path):
        waited = time.monotonic() - t0
    proc.join(10)
    assert waited > 0.2  # it had to wait for the other process
    order: list[str] = []

    def worker(tag: str) -> None:
        with DirLock(tmp_path):
            order.append(f"{tag}-in")
            time.sleep(0.05)  # stay inside a while, so the other threads would overlap if they could
            order.append(f"{tag}-out")

    threads = [threading.Thread(target=worker, args=(str(i),)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(
        order[i].endswith("-in") and order[i + 1].endswith("-out") and order[i][0] == order[i + 1][0]
        for i in range(0, 6, 2)
    )


def test_vectors_by_hash_only_same_identity() -> None:
    a = _entry()
    found = sidecar.vectors_by_hash([a], "m", 4)
    assert set(found) == {"h1"}
    assert sidecar.vectors_by_hash([a], "other", 4) == {}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _like(tmp_path: Path, mode: int, name: str = "src.md") -> os.stat_result:
    src = tmp_path / name
    src.write_text("the source")
    src.chmod(mode)
    return src.stat()


@pytest.mark.parametrize(("source", "expected"), [(0o600, 0o600), (0o640, 0o640), (0o644, 0o644),
                                                  (0o666, 0o644), (0o755, 0o644), (0o400, 0o600)])  # fmt: skip
def test_entry_is_never_more_readable_than_its_source(tmp_path: Path, source: int, expected: int) -> None:
    like = _like(tmp_path, source)
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, _entry(), like=like)
        assert _mode(path) == expected
        sidecar.mark_deleted(tmp_path, "a.md")  # the renames keep the mode
        assert _mode(sidecar.entry_path(tmp_path, "a.md", deleted=True)) == expected
        sidecar.recover(tmp_path, "a.md")
        assert _mode(path) == expected


def test_entry_mode_drops_the_group_bits_of_another_group_and_honours_the_umask(tmp_path: Path) -> None:
    like = _like(tmp_path, 0o640)
    other_group = os.stat_result((like.st_mode, 0, 0, 1, like.st_uid, like.st_gid + 1, 0, 0, 0, 0))
    old = os.umask(0o077)
    try:
        with DirLock(tmp_path):
            assert _mode(sidecar.write_entry(tmp_path, _entry("a.md"), like=other_group)) == 0o600
            assert _mode(sidecar.write_entry(tmp_path, _entry("b.md"), like=_like(tmp_path, 0o644))) == 0o600
    finally:
        os.umask(old)


def test_restrict_narrows_and_never_widens(tmp_path: Path) -> None:
    f = tmp_path / "entry"
    f.write_text("x")
    f.chmod(0o666)
    assert modes.restrict(f, _like(tmp_path, 0o600)) and _mode(f) == 0o600
    assert not modes.restrict(f, _like(tmp_path, 0o644)) and _mode(f) == 0o600


@pytest.mark.parametrize(("directory", "expected"), [(0o700, 0o700), (0o750, 0o750), (0o755, 0o755),
                                                     (0o777, 0o755), (0o711, 0o711)])  # fmt: skip
def test_store_is_never_more_open_than_its_directory(tmp_path: Path, directory: int, expected: int) -> None:
    d = tmp_path / "d"
    d.mkdir()
    d.chmod(directory)
    with DirLock(d):
        pass
    assert _mode(d / ".rag") == expected
    assert _mode(d / ".rag" / "tmp") == 0o700


def test_a_wider_store_of_an_older_version_is_narrowed(tmp_path: Path) -> None:
    tmp = tmp_path / ".rag" / "tmp"
    tmp.mkdir(parents=True)
    for p in (tmp_path / ".rag", tmp):
        p.chmod(0o777)
    tmp_path.chmod(0o700)
    with DirLock(tmp_path):
        pass
    assert _mode(tmp_path / ".rag") == 0o700 and _mode(tmp) == 0o700


def test_a_name_that_is_not_utf8_is_never_written(tmp_path: Path) -> None:
    bad = os.fsdecode(b"caf\xe9.txt")
    with (
        DirLock(tmp_path),
        pytest.raises(StorageError, match=r"caf\\xe9\.txt\.ragjson: the name is not valid UTF-8"),
    ):
        sidecar.write_dir_entry(tmp_path, bad)
    assert sorted(p.name for p in (tmp_path / ".rag").iterdir()) == [".gitignore", "tmp"]
    assert modes.display_name(bad) == "caf\\xe9.txt" and not modes.valid_name(bad)
    assert modes.valid_name("中文 🍄.md")


def test_a_failed_write_is_a_storage_error_and_leaves_no_debris(tmp_path: Path) -> None:
    """A real failure without root tricks: the target is a non-empty directory, so rename() refuses."""
    with DirLock(tmp_path):
        (tmp_path / ".rag" / "a.md.ragjson" / "x").mkdir(parents=True)
        with pytest.raises(StorageError, match=r"cannot write .*a\.md\.ragjson: Is a directory"):
            sidecar.write_entry(tmp_path, _entry())
        assert list((tmp_path / ".rag" / "tmp").iterdir()) == []


def test_vectors_by_hash_never_passes_on_an_unusable_vector() -> None:
    """A sidecar from another tool (or from before the embed stage refused them) holding a zero, NaN or short
    vector: reusing it by content hash would carry it into a new entry."""
    for vec in (np.zeros(4, np.float32), np.array([1, np.nan, 0, 0], np.float32), np.ones(3, np.float32)):
        assert sidecar.vectors_by_hash([_entry(vec=vec)], "m", 4) == {}
    assert set(sidecar.vectors_by_hash([_entry(vec=np.ones(4, np.float32))], "m", 4)) == {"h1"}


def test_split_revision_round_trips_and_junk_reads_as_none(tmp_path: Path) -> None:
    entry = replace(_entry(), split_revision=2)
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, entry)
    assert json.loads(path.read_text(encoding="utf-8"))["split_revision"] == 2
    assert sidecar.read_entry(path) == entry
    data = {**json.loads(path.read_text(encoding="utf-8")), "split_revision": "2"}
    again = sidecar.entry_from_json(data)
    assert again is not None and again.split_revision is None


def test_the_lead_key_round_trips_and_a_malformed_one_reads_as_none(tmp_path: Path) -> None:
    """`lead` is an additional key (RAG-Storage-Spec v2.4 readers ignore it); one of another shape is no lead (the
    next job makes it again), never an unreadable entry."""
    vec = sidecar.encode_vector(np.ones(4, dtype=np.float32))
    lead = sidecar.StoredLead("A title\nits first words", "h9", vec)
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, replace(_entry(), lead=lead))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["lead"] == {"content": "A title\nits first words", "content_hash": "h9", "vector_base64": vec}
    assert set(data) >= REQUIRED
    entry = sidecar.read_entry(path)
    assert entry is not None and entry.lead == lead
    assert entry.lead.vector is not None and entry.lead.vector.tolist() == [1.0] * 4
    empty = sidecar.StoredLead("", "h0", "")  # a document with nothing to say: no vector, and no lead to make
    assert sidecar.StoredLead.from_json(empty.to_json()) == empty and empty.vector is None
    for junk in ("text", [], {"content": "x", "content_hash": "h"}, {"content": "x", "content_hash": "h",
                 "vector_base64": ""}, {"content": "", "content_hash": "h", "vector_base64": vec},
                 {"content": 1, "content_hash": "h", "vector_base64": vec}):  # fmt: skip
        data["lead"] = junk
        path.write_text(json.dumps(data), encoding="utf-8")
        again = sidecar.read_entry(path)
        assert again is not None and again.lead is None and again.chunks == entry.chunks


def test_vectors_by_hash_passes_on_leads_apart_from_chunks() -> None:
    """A lead whose text is a chunk's has another vector (the chunk's is of its text with its header): the two
    are kept apart, the lead's under LEAD_KEY."""
    lead = sidecar.StoredLead("hello 你好", "h1", sidecar.encode_vector(np.full(4, 2.0, dtype=np.float32)))
    found = sidecar.vectors_by_hash([replace(_entry(), lead=lead)], "m", 4)
    assert set(found) == {"h1", sidecar.LEAD_KEY + "h1"} and found["h1"] != found[sidecar.LEAD_KEY + "h1"]
    bad = replace(lead, vector_base64=sidecar.encode_vector(np.zeros(4, dtype=np.float32)))
    assert set(sidecar.vectors_by_hash([replace(_entry(), lead=bad)], "m", 4)) == {"h1"}


def test_warning_key_round_trips_and_is_absent_without_one(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, replace(_entry("zh.txt"), warning="1 undecodable byte replaced"))
        plain = sidecar.write_entry(tmp_path, _entry())
    assert json.loads(path.read_text(encoding="utf-8"))["warning"] == "1 undecodable byte replaced"
    entry = sidecar.read_entry(path)
    assert entry is not None and entry.warning == "1 undecodable byte replaced"
    assert "warning" not in json.loads(plain.read_text(encoding="utf-8"))


# --- git: the store ignores itself ----------------------------------------------------------------------


def test_a_new_store_ignores_itself_for_git(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        sidecar.write_entry(tmp_path, _entry("a.md"))
    ignore = (tmp_path / ".rag" / ".gitignore").read_text(encoding="utf-8")
    assert ignore.splitlines() == ["# written by ragd: this folder holds its index sidecars, never to be committed",
                                   "*"]  # fmt: skip
    # nothing of ragd's reads it as an entry, a note or debris
    assert [e.name for e in sidecar.list_entries(tmp_path)] == ["a.md"]
    assert sidecar.load_entries(tmp_path).unreadable == {}


def test_a_store_of_an_earlier_version_gets_its_gitignore_once_locked(tmp_path: Path) -> None:
    (tmp_path / ".rag" / "tmp").mkdir(parents=True)
    with DirLock(tmp_path, create=False):  # a reader (verify, export) writes nothing
        pass
    assert not (tmp_path / ".rag" / ".gitignore").exists()
    with DirLock(tmp_path):
        pass
    assert (tmp_path / ".rag" / ".gitignore").read_text().endswith("\n*\n")


def test_a_gitignore_the_user_edited_is_kept(tmp_path: Path) -> None:
    (tmp_path / ".rag" / "tmp").mkdir(parents=True)
    (tmp_path / ".rag" / ".gitignore").write_text("")  # "I commit my sidecars"
    with DirLock(tmp_path):
        pass
    assert (tmp_path / ".rag" / ".gitignore").read_text() == ""


def test_the_gitignore_is_what_the_ragjson_fixture_tree_lacks_and_nothing_else(tmp_path: Path) -> None:
    """A ragjson tool's store (no tmp/, no .gitignore) gains only those two: its entries and notes are untouched."""
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(FIXTURE, tree)
    before = sorted(p.name for p in (tree / "docs" / ".rag").iterdir())
    with DirLock(tree / "docs"):
        pass
    after = sorted(p.name for p in (tree / "docs" / ".rag").iterdir())
    assert sorted(set(after) - set(before)) == [".gitignore", "tmp"] and set(before) <= set(after)


# --- a store left with nothing ---------------------------------------------------------------------------


def _emptied_store(directory: Path) -> None:
    directory.mkdir(exist_ok=True)
    with DirLock(directory):
        sidecar.write_entry(directory, _entry("a.md"))
        sidecar.mark_deleted(directory, "a.md")
    (directory / ".rag" / "tmp" / "x.md.ragjson.1.tmp").write_text("{debris")


def test_an_emptied_store_is_removed_and_its_folder_kept(tmp_path: Path) -> None:
    _emptied_store(tmp_path / "d")
    assert sidecar.drop_emptied(tmp_path / "d")
    assert not (tmp_path / "d" / ".rag").exists() and (tmp_path / "d").is_dir()
    assert not sidecar.drop_emptied(tmp_path / "d")  # nothing to remove


@pytest.mark.parametrize(
    "keep",
    [
        "d/b.md",  # a document in the folder
        "d/sub/",  # a subfolder
        "d/notes.txt~",  # anything else of the user's
        "d/.rag/b.md.ragjson",  # a live entry
        "d/.rag/20261130T163032Z.mushroom",  # a change note not applied yet
        "d/.rag/README",  # a file ragd does not know
        "d/.rag/tmp/staged",  # not ragd's debris
    ],
)
def test_a_store_with_anything_left_stays(tmp_path: Path, keep: str) -> None:
    _emptied_store(tmp_path / "d")
    target = tmp_path / keep
    if keep.endswith("/"):
        target.mkdir()
    else:
        target.write_text("{}")
    assert not sidecar.drop_emptied(tmp_path / "d")
    assert (tmp_path / "d" / ".rag" / "a.md.ragjson.deleted").exists()


def _waiting_for_flock(directory: Path) -> bool:
    """Someone waits for the flock on `directory` (a blocked request in /proc/locks: `N: -> FLOCK ...`)."""
    ino = os.stat(directory).st_ino
    return any("->" in line and f":{ino} " in line for line in Path("/proc/locks").read_text().splitlines())


def test_a_job_waiting_for_the_lock_of_a_removed_store_takes_a_new_one(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    _emptied_store(directory)
    old_tmp = directory / ".rag" / "tmp"
    wrote: list[Path] = []

    def job() -> None:
        with DirLock(directory):
            wrote.append(sidecar.write_entry(directory, _entry("new.md")))

    with DirLock(directory, create=False):  # the remover holds the lock
        thread = threading.Thread(target=job)
        thread.start()
        poll(lambda: _waiting_for_flock(old_tmp), timeout=10, what="the job waiting for the lock")
        for p in (directory / ".rag").iterdir():
            if p.is_file():
                p.unlink()
        os.rmdir(old_tmp)  # its debris went as the lock was taken
        os.rmdir(directory / ".rag")
    thread.join(10)
    assert wrote and wrote[0].exists()
    assert (directory / ".rag" / ".gitignore").exists()


def test_a_write_into_a_store_deleted_under_it_is_a_store_that_went_whatever_is_there_now(
    tmp_path: Path,
) -> None:
    """`.rag/` deleted under a job's writes: the write's "No such file" is a store that went (its folder looked at
    again soon), not an error of the file's, whatever is there when it is asked: no store; one made again at once by
    another thread's lock; or the same store still, `rm -r` having removed the write's temporary file and failed on
    `tmp/` (the agent wrote another file in it meanwhile). The last was taken for an error of the file's: an ERROR
    line a file, and the file FAILED for a minute."""
    import shutil

    from ragd.pipeline.filerecord import store_went

    with DirLock(tmp_path):
        shutil.rmtree(tmp_path / sidecar.RAG_DIR)
        with pytest.raises(StorageError) as failed:
            sidecar.write_entry(tmp_path, _entry("a.md"))
        assert store_went(failed.value)  # gone
    with DirLock(tmp_path):  # made again by another lock
        assert sidecar.store_id(tmp_path) is not None
        assert store_went(failed.value)
        # the same store still there: `rm -r` removed the write's temporary file before its rename, as it does file
        # by file, and failed on `tmp/` (a file the agent wrote meanwhile); the write says what write_atomic says
        emptied = StorageError(f"cannot write {tmp_path / '.rag' / 'a.md.ragjson'}: No such file or directory",
                               "", errno=errno.ENOENT)  # fmt: skip
        assert store_went(emptied)
    denied = StorageError("cannot write", "", errno=13)
    assert not store_went(denied)


def test_an_entry_just_written_is_read_back_once_as_written_while_its_file_is_unchanged(
    tmp_path: Path,
) -> None:
    """The index writer reads back each entry a job just wrote (sidecar/recent.py): the first read takes the entry
    written, unless its file changed since; any later read is from the disk."""
    written = replace(_entry("a.md"), model_name="kept")
    with DirLock(tmp_path):
        path = sidecar.write_entry(tmp_path, written)
    first = sidecar.read_entry(path)
    assert first is written
    again = sidecar.read_entry(path)
    assert again == written and again is not written

    with DirLock(tmp_path):  # another tool replaces it (a new file renamed over it)
        sidecar.write_entry(tmp_path, written)
    other = replace(written, model_name="theirs")
    tmp = path.with_name("other.tmp")
    tmp.write_bytes(sidecar.dumps(other.to_json()))
    os.replace(tmp, path)
    got = sidecar.read_entry(path)
    assert got is not None and got.model_name == "theirs"

    with DirLock(tmp_path):  # written again, then changed in place (the same inode)
        sidecar.write_entry(tmp_path, written)
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(b"\n ")
    got = sidecar.read_entry(path)
    assert got is not None and got is not written and got.model_name == "kept"

    with DirLock(tmp_path):  # written again, then deleted
        sidecar.write_entry(tmp_path, written)
    path.unlink()
    with pytest.raises(StorageError):
        sidecar.read_entry(path)


def test_the_entries_kept_for_reading_back_are_bounded_oldest_first(tmp_path: Path) -> None:
    from ragd.pipeline.sidecar.recent import Recent

    recent = Recent(max_bytes=100)
    paths = [tmp_path / f"{n}.ragjson" for n in range(4)]
    for p in paths:
        p.write_bytes(b"{}")
        recent.put(str(p), p.stat(), _entry(p.name), 40)
    assert len(recent) == 2  # 160 bytes: the two oldest went
    assert recent.take(str(paths[0])) is None and recent.take(str(paths[1])) is None
    assert recent.take(str(paths[3])) is not None and recent.take(str(paths[3])) is None  # taken once
    recent.put(str(paths[0]), paths[0].stat(), _entry(), 101)  # larger than the bound: not kept
    assert recent.take(str(paths[0])) is None
