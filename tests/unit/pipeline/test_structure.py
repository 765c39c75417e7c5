"""Tests of ragd.pipeline.structure: clean heading text, RST section titles, Org headlines, permalink anchors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.model import Document, SplitterSettings
from ragd.pipeline.split import split
from ragd.pipeline.structure import clean_heading, drop_permalinks, scan_org, scan_rst


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        # Sphinx (Python docs, Debian policy) through markitdown
        ('Contents[¶](#contents "Permalink to this heading")', "Contents"),
        ('3. Upgrade Procedure[¶](#upgrade-procedure "Permalink to this headline")', "3. Upgrade Procedure"),
        ('f(x)[¶](#f "Permalink to this definition")', "f(x)"),
        # MkDocs, Docusaurus, GitHub
        ('Install `ragd`[¶](#install "Permanent link")', "Install ragd"),
        ('Usage[\u200b](#usage "Direct link to heading")', "Usage"),
        ("[](#install)Install", "Install"),
        ("Install [#](#install)", "Install"),
        ("Install 🔗", "Install"),
        # a link in brackets beside the heading: Node.js's source link, a wiki's edit link
        ("Stream[[src]](https://github.com/nodejs/node/blob/3626fea/lib/stream.js#L55)", "Stream"),
        ("History [[edit]](https://w.org/edit?section=2) ", "History"),
        ("See [[1]](#note-1) and [a [b] c](x.md)", "See and a [b] c"),
        ("Title¶", "Title"),
        # links, images, emphasis, code, entities, HTML, escapes
        ("See [the guide](https://x.org/guide) first", "See the guide first"),
        ("Ref [link][1] here", "Ref link here"),
        ("![logo](logo.png) Project", "Project"),
        ("[![badge](b.svg)](https://ci) Build", "Build"),
        ("**Bold** and *em* and _under_ and ~~gone~~", "Bold and em and under and gone"),
        ("__Strong__ text", "Strong text"),
        ("`__init__` and ``a ` b``", "__init__ and a ` b"),
        ("`**not bold**` code", "**not bold** code"),
        ("Tom &amp; Jerry &lt;3 &#169;", "Tom & Jerry <3 ©"),
        ('<a name="top"></a>Top <code>x</code>', "Top x"),
        ("Vec<T> generics", "Vec<T> generics"),
        ("my\\_var\\_name and \\*\\*stars\\*\\*", "my_var_name and **stars**"),
        ("snake_case_name", "snake_case_name"),
        ("a * b * c", "a * b * c"),
        # ATX leftovers, whitespace
        ("  Usage   ##  ", "Usage"),
        ("Notes on C#", "Notes on C#"),
        ("Multi\t  space\u3000words", "Multi space words"),
        ("安装 **指南**", "安装 指南"),
        ("`rst link <https://x.org>`_ title", "rst link title"),
    ],
)
def test_clean_heading(raw: str, clean: str) -> None:
    assert clean_heading(raw) == clean


def test_drop_permalinks_keeps_real_links() -> None:
    md = (
        '# Title[¶](#title "Permalink to this heading")\n'
        "See [the title](#title), ![](#img) and [site](https://x.org).\n"
        '## [](#usage)Usage\ndef f()[¶](#f "Permalink to this definition")\n'
    )
    assert drop_permalinks(md) == (
        "# Title\nSee [the title](#title), ![](#img) and [site](https://x.org).\n## Usage\ndef f()\n"
    )


def titles(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(text[h.start : h.line_end], h.path) for h in scan_rst(text)]


def test_rst_underline_only() -> None:
    text = "Install\n=======\n\nBody.\n\nLinux\n-----\n\nMore.\n"
    assert titles(text) == [("Install\n=======", ("Install",)), ("Linux\n-----", ("Install", "Linux"))]


def test_rst_overline_and_underline_is_its_own_style() -> None:
    text = "=======\n Guide\n=======\n\nIntro.\n\nInstall\n=======\n\nUse\n---\n\nFAQ\n=======\n\nQ.\n"
    got = titles(text)
    assert [path for _, path in got] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Use"),
        ("Guide", "FAQ"),
    ]
    assert got[0][0] == "=======\n Guide\n======="


def test_rst_levels_follow_first_appearance() -> None:
    """`~` first seen at level 1 stays level 1, even though `=` is the usual top."""
    text = "A\n~\n\nB\n=\n\nC\n^\n\nD\n=\n\nE\n~\n\nF\n=\n"  # 1-character titles, 1-character underlines
    assert titles(text) == []  # too short to be told from text: underlines need 2 characters
    text = "Aa\n~~\n\nBb\n==\n\nCc\n^^\n\nDd\n==\n\nEe\n~~\n\nFf\n==\n"
    assert [path for _, path in titles(text)] == [
        ("Aa",),
        ("Aa", "Bb"),
        ("Aa", "Bb", "Cc"),
        ("Aa", "Dd"),
        ("Ee",),
        ("Ee", "Ff"),
    ]


def test_rst_titles_right_after_a_title_and_wide_characters() -> None:
    text = "安装\n====\nLinux\n-----\n\n短\n=\n"  # 安装 is 4 columns wide; 短 needs 2
    assert [path for _, path in titles(text)] == [("安装",), ("安装", "Linux")]


@pytest.mark.parametrize(
    "text",
    [
        "Text before\n\n----------\n\nText after\n",  # a transition
        "para line one\nline two\n==========\n",  # no blank line before the title line
        "Too long a title\n=====\n",  # underline shorter than the title
        "\n=====  =====\nA      B\n=====  =====\n1      2\n=====  =====\n",  # a simple table
        "\n+-----+-----+\n| a   | b   |\n+=====+=====+\n",  # a grid table
        "    indented\n    ========\n",  # a literal block
        "=====\n=====\n",  # adornment over adornment
        "=======\n Title\n-------\n",  # overline and underline differ
    ],
)
def test_rst_not_titles(text: str) -> None:
    assert scan_rst(text) == ()


def test_rst_chunks_get_heading_paths_and_never_end_with_a_title() -> None:
    sections = "".join(
        f"Section {i}\n----------\n\n" + "Words of the section body. " * 12 + "\n\n" for i in range(6)
    )
    text = "=====\nGuide\n=====\n\nIntro paragraph.\n\n" + sections
    doc = Document(Path("/kb/guide.rst"), text, "text", is_markdown=False, markup="rst")
    for kind in ("recursive", "markdown"):
        chunks = split(doc, SplitterSettings(kind, 300, 0))
        assert chunks[0].heading_path == ("Guide",)
        for c in chunks:
            assert not c.content.rstrip().endswith("----------"), c.content
            first = c.content.split("\n")[0]
            if first.startswith("Section"):
                assert c.heading_path == ("Guide", first)
        assert {c.heading_path for c in chunks} >= {("Guide", f"Section {i}") for i in range(6)}


def test_plain_text_keeps_no_heading_paths() -> None:
    text = "Install\n=======\n\nBody.\n"
    doc = Document(Path("/kb/a.txt"), text, "text", is_markdown=False)
    assert [c.heading_path for c in split(doc, SplitterSettings("recursive", 100, 0))] == [()]


def test_org_headlines() -> None:
    text = (
        "#+TITLE: Notes\n* TODO [#A] First :work:urgent:\nBody.\n** Sub /italic/ =code=\n"
        "#+BEGIN_SRC python\n* not a headline\n#+END_SRC\n* [[https://x.org][Linked]] second\n*bold* text\n"
    )
    assert [h.path for h in scan_org(text)] == [("First",), ("First", "Sub italic code"), ("Linked second",)]
    doc = Document(Path("/kb/n.org"), text, "text", is_markdown=False, markup="org")
    chunks = split(doc, SplitterSettings("markdown", 1000, 0))
    assert [c.heading_path for c in chunks] == [
        (),
        ("First",),
        ("First", "Sub italic code"),
        ("Linked second",),
    ]
