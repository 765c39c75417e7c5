"""Path safety (verbs/paths.py): inside a root (lexically and after symlinks), no `..`, no NUL, nothing ragd ignores."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.config import IgnoreConfig
from ragd.pipeline.scan import Ignore
from ragd.verbs.paths import PathRefused, SafePath, check_path, check_tracked


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    kb, notes = tmp_path / "kb", tmp_path / "notes"
    (kb / "docs").mkdir(parents=True)
    (kb / "docs" / "a.md").write_text("a")
    (notes / "inner").mkdir(parents=True)
    (notes / "n.md").write_text("n")
    (tmp_path / "outside.txt").write_text("secret")
    return [kb, notes]


def refused(raw: object, roots: list[Path], why: str) -> None:
    with pytest.raises(PathRefused, match=why) as err:
        check_path(raw, roots)
    assert str(roots[0]) in err.value.hint  # the message says which paths may be read


def test_paths_inside_a_root_are_accepted_as_named(roots: list[Path]) -> None:
    kb = roots[0]
    assert check_path(str(kb / "docs" / "a.md"), roots) == SafePath(kb / "docs" / "a.md", kb)
    assert check_path(str(kb), roots) == SafePath(kb, kb)
    assert (
        check_path(str(kb / "docs" / "new.md"), roots).root == kb
    )  # need not exist (orphans, deleted files)
    assert check_path(str(kb) + "//docs/./a.md", roots).path == kb / "docs" / "a.md"


def test_relative_paths_resolve_against_the_root_that_holds_them(roots: list[Path]) -> None:
    kb, notes = roots
    assert check_path("n.md", roots) == SafePath(notes / "n.md", notes)
    assert check_path("docs/a.md", roots) == SafePath(kb / "docs" / "a.md", kb)
    assert check_path("missing.md", roots).path == kb / "missing.md"  # none holds it: the first root


def test_nested_roots_give_the_innermost(roots: list[Path]) -> None:
    notes = roots[1]
    inner = notes / "inner"
    assert check_path(str(inner / "x.md"), [notes, inner]).root == inner


def test_escapes_are_refused(roots: list[Path], tmp_path: Path) -> None:
    kb, _ = roots
    refused("../outside.txt", roots, "contains '..'")
    refused(str(kb / "docs" / ".." / "docs" / "a.md"), roots, "contains '..'")  # even when it stays inside
    refused("/etc/passwd", roots, "outside every root")
    refused(str(tmp_path / "kb2" / "a.md"), roots, "outside every root")  # a sibling sharing the prefix
    refused(str(tmp_path), roots, "outside every root")
    refused(str(kb / "a\x00.md"), roots, "NUL byte")
    refused("", roots, "is not a path")
    refused(42, roots, "is not a path")
    refused("x" * 5000, roots, "longer than")
    with pytest.raises(PathRefused, match="no roots"):
        check_path("/kb/a.md", [])


def test_symlinks_are_judged_by_where_they_lead(roots: list[Path], tmp_path: Path) -> None:
    kb, notes = roots
    (kb / "leak.txt").symlink_to(tmp_path / "outside.txt")
    (kb / "up").symlink_to(tmp_path)
    (kb / "to-notes.md").symlink_to(notes / "n.md")
    (kb / "same.md").symlink_to(kb / "docs" / "a.md")
    refused(str(kb / "leak.txt"), roots, "leads outside every root")
    refused("leak.txt", roots, "leads outside every root")
    refused(str(kb / "up" / "outside.txt"), roots, "leads outside every root")
    assert check_path(str(kb / "to-notes.md"), roots).path == kb / "to-notes.md"  # into another root: fine
    assert check_path(str(kb / "same.md"), roots).path == kb / "same.md"


def test_a_root_that_is_itself_a_symlink_works(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.md").write_text("a")
    link = tmp_path / "link"
    link.symlink_to(real)
    assert check_path(str(link / "a.md"), [link]) == SafePath(link / "a.md", link)


def test_ignored_paths_are_not_part_of_the_knowledge_base(roots: list[Path]) -> None:
    kb, _ = roots
    ignore = Ignore(IgnoreConfig(patterns=("*.secret",)))
    (kb / ".rag").mkdir()
    (kb / "node_modules").mkdir()
    for name in (".rag/a.md.ragjson", ".git/config", "node_modules/x.md", "docs/a.md~", "docs/k.secret",
                 ".hidden.md", "docs/.#a.md"):  # fmt: skip
        with pytest.raises(PathRefused, match="is ignored by ragd"):
            check_tracked(check_path(str(kb / name), roots), ignore)
    check_tracked(check_path(str(kb / "docs" / "a.md"), roots), ignore)
    check_tracked(check_path(str(kb / "docs"), roots), ignore)
    check_tracked(check_path(str(kb), roots), ignore)
