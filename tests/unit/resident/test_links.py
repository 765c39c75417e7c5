"""Which paths share a file (resident/links.py `LinkMap`): what a change to one path must also queue."""

from __future__ import annotations

import os
from pathlib import Path

from ragd.config import IgnoreConfig
from ragd.pipeline.scan import Ignore, list_dir, shared_files
from ragd.resident.links import LinkMap


def _record(links: LinkMap, *dirs: Path) -> None:
    for d in dirs:
        links.record(d, shared_files(list_dir(d, Ignore(IgnoreConfig()))))


def test_a_change_reaches_the_symbolic_and_hard_links_of_the_file(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (a, b, c):
        d.mkdir()
    (b / "t.md").write_text("target")
    (a / "l.md").symlink_to("../b/t.md")
    (c / "h.md").write_text("hard")
    os.link(c / "h.md", a / "h2.md")
    (c / "plain.md").write_text("one name")
    links = LinkMap()
    _record(links, a, b, c)
    assert links.others(b / "t.md") == {a / "l.md"}
    assert links.others(a / "h2.md") == {c / "h.md"}
    assert links.others(c / "h.md") == {a / "h2.md"}
    assert links.others(c / "plain.md") == set()
    assert len(links) == 3  # the two hard links and the symbolic link: no ordinary file is kept
    # a hard link made later, in a folder not listed again: found by the file's inode
    os.link(b / "t.md", c / "t3.md")
    _record(links, c)
    assert links.others(b / "t.md") == {a / "l.md", c / "t3.md"}
    # listed again without its links, or gone: forgotten
    (a / "l.md").unlink()
    _record(links, a)
    assert links.others(b / "t.md") == {c / "t3.md"}
    links.forget(c)
    assert links.others(b / "t.md") == set() and links.others(a / "h2.md") == set()


def test_links_of_links_are_followed(tmp_path: Path) -> None:
    """A symbolic link to one of two hard links: an edit through the other reaches it."""
    (tmp_path / "h1.md").write_text("x")
    os.link(tmp_path / "h1.md", tmp_path / "h2.md")
    (tmp_path / "l.md").symlink_to("h1.md")
    links = LinkMap()
    _record(links, tmp_path)
    assert links.others(tmp_path / "h2.md") == {tmp_path / "h1.md", tmp_path / "l.md"}


def test_nothing_known_costs_nothing(tmp_path: Path) -> None:
    links = LinkMap()
    assert links.others(tmp_path / "missing.md") == set()
    links.record(tmp_path, ())
    assert len(links) == 0
