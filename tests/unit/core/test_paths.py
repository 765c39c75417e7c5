"""ragd.paths: which part of the roots a `wait PATH ...` covers; why a path cannot be a root."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from hypothesis import given
from hypothesis import strategies as st

from ragd.paths import Within, is_under, root_problem


def test_a_folder_covers_its_subtree_and_a_file_or_link_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / "kb" / "sub" / "deep").mkdir(parents=True)
    (tmp_path / "kb" / "other").mkdir()
    (tmp_path / "kb" / "other" / "f.md").write_text("x")
    (tmp_path / "kb" / "other" / "to-sub").symlink_to(tmp_path / "kb" / "sub")
    kb = tmp_path / "kb"
    within = Within.of([kb / "sub", kb / "other" / "f.md", kb / "other" / "to-sub", kb / "gone" / "g.md"])
    assert within.trees == (kb / "sub",)
    assert set(within.folders) == {kb / "other", kb / "gone"}
    assert within.covers(kb / "sub") and within.covers(kb / "sub" / "deep")
    assert within.covers(kb / "other") and not within.covers(kb / "other" / "below")
    assert not within.covers(kb) and not within.covers(tmp_path / "kb2")
    assert (
        within.touches(kb)
        and within.touches(kb / "sub" / "deep")
        and not within.touches(tmp_path / "elsewhere")
    )


def test_why_a_path_cannot_be_a_root(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    assert root_problem(tmp_path / "dir") is None and root_problem(tmp_path / "link") is None
    assert root_problem(tmp_path / "file") == "is not a directory"
    assert root_problem(tmp_path / "gone") == "does not exist"
    assert root_problem(tmp_path / "file" / "below") == "does not exist"
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert root_problem(tmp_path / "loop") == "cannot be reached: too many levels of symbolic links"


def test_a_path_is_under_itself_and_its_folders_by_whole_components() -> None:
    assert is_under(Path("/a/b"), Path("/a/b")) and is_under(Path("/a/b/c.md"), Path("/a"))
    assert is_under(Path("/a/b"), Path("/"))
    assert not is_under(Path("/a/bc"), Path("/a/b")) and not is_under(Path("/a"), Path("/a/b"))
    assert not is_under(Path("/a/b"), Path("/b")) and not is_under(Path("/目录 %_/x"), Path("/目录"))
    assert is_under(Path("目录/x"), Path(".")) and not is_under(Path("/x"), Path("."))
    assert not is_under(Path("x/y"), Path("/x"))


_PART = st.sampled_from(["a", "b", "ab", "目录", "%_", "..", "x y"])


@given(st.booleans(), st.lists(_PART, max_size=4), st.booleans(), st.lists(_PART, max_size=4))
def test_under_agrees_with_the_path_and_its_parents(
    absolute: bool, parts: list[str], top_absolute: bool, top_parts: list[str]
) -> None:
    path = PurePosixPath("/" if absolute else ".", *parts)
    top = PurePosixPath("/" if top_absolute else ".", *top_parts)
    assert is_under(path, top) == (path == top or top in path.parents)
