"""Filter expressions: pure checks, then the same expressions run against a real zvec collection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.index import IndexBackend, open_index
from ragd.index.zvec import filters as F
from tests.unit.index.test_index_zvec import IDENTITY, embed, load_corpus

# Directory names chosen to break naive LIKE/quote handling: wildcards, quotes, backslashes (also at the end,
# which a `=` literal cannot express in zvec 0.8), CJK, emoji, spaces and a newline.
DIRS = [
    "a",
    "ab",
    "a_b",
    "axb",
    "50%",
    "50x",
    "it's",
    'say "hi"',
    "back\\slash",
    "end\\",
    "x\\'y",
    "中文",
    "中文x",
    "🚀",
    "sp ace",
    "new\nline",
    "a/sub",
    "a_b/sub",
    "50%/deep/er",
]


def test_like_literal_escapes_every_special_character() -> None:
    assert F.like_literal("a_b%c'd\\e") == "a\\_b\\%c\\'d\\\\e"
    assert F.like_literal("中文 🚀") == "中文 🚀"
    with pytest.raises(TypeError):
        F.like_literal(3)  # type: ignore[arg-type]


def test_expressions() -> None:
    assert F.equals("source_path", "/r/a_b") == "source_path LIKE '/r/a\\_b'"
    assert F.under("p", "/r/a/") == "(p LIKE '/r/a' OR p LIKE '/r/a/%')"
    assert F.under("p", "/") == "p LIKE '/%'"
    assert F.any_of("ext", ["md", "md", "txt"]) == "(ext LIKE 'md' OR ext LIKE 'txt')"
    assert F.all_of("a LIKE 'x'", None, "", "b LIKE 'y'") == "(a LIKE 'x') AND (b LIKE 'y')"
    assert F.all_of(None, "a LIKE 'x'") == "a LIKE 'x'" and F.all_of() == ""


@pytest.mark.parametrize(
    "bad",
    [
        lambda: F.equals("bad field", "x"),
        lambda: F.equals("x; DROP", "x"),
        lambda: F.under("p", ""),
        lambda: F.under("p", "relative/dir"),
        lambda: F.any_of("p", []),
        lambda: F.under_any("p", []),
        lambda: F.for_delete(""),
        lambda: F.for_delete("   "),
    ],
)
def test_invalid_input_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        bad()  # type: ignore[operator]


def test_is_under_matches_only_that_directory() -> None:
    assert F.is_under("/r/a", "/r/a") and F.is_under("/r/a/x", "/r/a/") and F.is_under("/r/a/x", "/")
    assert (
        not F.is_under("/r/ab", "/r/a") and not F.is_under("/r/a_b", "/r/a") and not F.is_under("/r", "/r/a")
    )


@pytest.fixture(scope="module")
def tricky(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexBackend, Path]]:
    base = tmp_path_factory.mktemp("tricky")
    root = base / "kb"
    index = open_index(base / "data", IDENTITY, IndexConfig())
    load_corpus(index, root, {f"{d}/f.md": [f"file in {d}"] for d in DIRS})
    yield index, root
    index.close()


def _files_under(root: Path, d: str) -> set[str]:
    return {str(root / x / "f.md") for x in DIRS if x == d or x.startswith(d + "/")}


@pytest.mark.parametrize("d", DIRS)
def test_prefix_matches_exactly_that_directory(tricky: tuple[IndexBackend, Path], d: str) -> None:
    index, root = tricky
    assert set(index.sources(str(root / d))) == _files_under(root, d)
    hits = index.query(vector=embed("file"), text=None, k=50, path_prefixes=[str(root / d)])
    assert {h.source_path for h in hits} == _files_under(root, d)


@pytest.mark.parametrize("d", DIRS)
def test_equality_matches_exactly_that_path(tricky: tuple[IndexBackend, Path], d: str) -> None:
    index, root = tricky
    chunks = index.chunks(str(root / d / "f.md"))
    assert [c.content for c in chunks] == [f"file in {d}"]


def test_delete_subtree_spares_look_alike_siblings(index: IndexBackend, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    load_corpus(index, root, {f"{d}/f.md": [f"file in {d}"] for d in DIRS})
    for d, gone in (
        ("a_b", {"a_b", "a_b/sub"}),
        ("50%", {"50%", "50%/deep/er"}),
        ("end\\", {"end\\"}),
        ("a", {"a", "a/sub"}),
        ("中文", {"中文"}),
        ("x\\'y", {"x\\'y"}),
    ):
        before = set(index.sources())
        assert index.delete_subtree(str(root / d)) == len(gone)
        assert before - set(index.sources()) == {str(root / g / "f.md") for g in gone}
    assert {Path(p).parent.name for p in index.sources()} >= {"ab", "axb", "50x", "中文x", "it's"}
    assert index.delete_source(str(root / 'say "hi"' / "f.md")) == 1
    assert index.delete_source(str(root / "new\nline" / "f.md")) == 1
    assert index.delete_source(str(root / "back\\slash" / "f.md")) == 1
    assert index.chunks(str(root / "back\\slash" / "f.md")) == []


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexBackend]:
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    yield ix
    ix.close()
