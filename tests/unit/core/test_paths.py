"""ragd.paths: which part of the roots a `wait PATH ...` covers."""

from __future__ import annotations

from pathlib import Path

from ragd.paths import Within


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
