"""Which new subfolder arrived with sidecars of its own (moved in: the index re-syncs its subtree) and which one its
own first jobs are filling (they announce its files), on real stores."""

from __future__ import annotations

from pathlib import Path

from ragd.pipeline import mushroom, sidecar
from ragd.pipeline.dirplan import _moved_in
from ragd.pipeline.sidecar import DirLock
from tests.unit.pipeline.test_sidecar import _entry


def _store(folder: Path, files: list[str], dirs: tuple[str, ...] = (), note: list[str] | None = None) -> Path:
    """`folder` with an entry for each of `files` and `dirs` (made), and a pending note naming `note`."""
    folder.mkdir(parents=True, exist_ok=True)
    with DirLock(folder):
        for name in files:
            (folder / name).write_text("x")
            sidecar.write_entry(folder, _entry(name))
        for name in dirs:
            (folder / name).mkdir(exist_ok=True)
            sidecar.write_dir_entry(folder, name)
        if note is not None:
            mushroom.write(folder, [mushroom.Event(n, "upsert") for n in note])
    return folder


def test_a_folder_without_entries_is_not_moved_in(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    assert not _moved_in(tmp_path / "new")
    assert not _moved_in(_store(tmp_path / "empty", []))


def test_a_folder_with_entries_and_no_note_is_moved_in(tmp_path: Path) -> None:
    assert _moved_in(_store(tmp_path / "x", ["a.md"]))


def test_a_tree_its_own_first_jobs_are_filling_is_not_moved_in(tmp_path: Path) -> None:
    """Each folder's note names its files; a subfolder's entry is its own folder's to announce."""
    top = _store(tmp_path / "top", ["a.md"], ("sub", "empty"), note=["a.md"])
    _store(top / "sub", ["b.md", "c.md"], note=["b.md", "c.md"])
    assert not _moved_in(top)


def test_a_folder_moved_in_with_a_note_left_behind_is_moved_in(tmp_path: Path) -> None:
    """The note names the one file of the change before the move, not the folder's others (found by the soak)."""
    assert _moved_in(_store(tmp_path / "x", ["a.md", "b.md"], note=["b.md"]))


def test_a_folder_moved_in_that_holds_only_folders_is_moved_in(tmp_path: Path) -> None:
    top = _store(tmp_path / "archive", [], ("2025", "2026"))
    _store(top / "2025", [])
    _store(top / "2026", ["notes.md"])
    assert _moved_in(top)
    below = _store(tmp_path / "left", [], ("sub",), note=[])
    _store(below / "sub", ["a.md", "b.md"], note=["a.md"])
    assert _moved_in(below)
