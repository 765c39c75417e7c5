"""Citations through the real commands: Sphinx-like HTML and reStructuredText get plain heading paths (in the
sidecars and in `ragd search --json`), and every hit prints `path:start-end` with the page of a PDF, in
`ragd search` and in `ragctl search` against a running agent. Entries of older split rules are split again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragd.pipeline import sidecar
from ragd.pipeline.structure import SPLIT_REVISION
from ragd.vocabulary import FileState
from tests.e2e.agent import ragctl, running_agent
from tests.e2e.conftest import ragd, ragd_json
from tests.support import docgen

PERMALINK = '<a class="headerlink" href="#{0}" title="Permalink to this heading">¶</a>'
SPHINX = (
    f"<h1>Debian Guide{PERMALINK.format('guide')}</h1><p>Intro.</p>"
    f"<section><h2>3. Upgrade Procedure{PERMALINK.format('upgrade')}</h2>"
    "<p>Run apt full-upgrade after quokkaupgrade checks.</p>"
    f'<dl><dt id="f">dpkg --configure<a class="headerlink" href="#f" title="Permalink to this definition">¶</a></dt>'
    "<dd>configures unpacked packages</dd></dl></section>"
    f"<section><h2><code>apt</code> &amp; <em>friends</em>{PERMALINK.format('apt')}</h2>"
    "<p>The wombatfriends are apt-get and apt-cache.</p></section>"
)
RST = """\
=============
 User Manual
=============

Overview text.

Installing
==========

Unpack the numbatinstall archive.

From source
-----------

Build it with ``make``; the platypussource way.

----------

=====  =====
col    col2
=====  =====
a      b
=====  =====

Usage
=====

Run it.
"""
PDF_PAGES = ["Cover page of the report. " * 60, "Chapter two\nThe echidnapage figures\nare on this page"]


@pytest.fixture
def sections(config: Path) -> Path:
    """The agent's config with kind="markdown": a chunk per section, so each section's path shows."""
    config.write_text(
        config.read_text() + '\n[splitter]\nkind = "markdown"\nchunk_size = 1000\nchunk_overlap = 0\n'
    )
    return config


def _corpus(root: Path) -> None:
    root.mkdir()
    docgen.make_html(root / "guide.html", "Debian Guide", SPHINX)
    (root / "manual.rst").write_text(RST)
    docgen.make_pdf(root / "report.pdf", PDF_PAGES)


def _paths(root: Path, name: str) -> list[list[str]]:
    entry = sidecar.read_entry(sidecar.entry_path(root, name))
    assert entry is not None and entry.status == FileState.EMBEDDED
    return [c.meta.get("heading_path") or [] for c in entry.chunks]


def _hit(token: str) -> dict[str, object]:
    hits = ragd_json("search", token, "--mode", "keyword", "-k", "1")["results"]
    assert hits, token
    return hits[0]  # type: ignore[no-any-return]


def test_heading_paths_and_citations(tmp_path: Path, sections: Path) -> None:
    root = tmp_path / "kb"
    _corpus(root)
    ragd("run", "--once", str(root))

    html_paths = _paths(root, "guide.html")
    assert ["Debian Guide", "3. Upgrade Procedure"] in html_paths
    assert ["Debian Guide", "apt & friends"] in html_paths
    entry = sidecar.read_entry(sidecar.entry_path(root, "guide.html"))
    assert entry is not None and not any("¶" in c.content or "Permalink" in c.content for c in entry.chunks)
    assert {tuple(p) for p in _paths(root, "manual.rst")} >= {
        ("User Manual",),
        ("User Manual", "Installing"),
        ("User Manual", "Installing", "From source"),
        ("User Manual", "Usage"),
    }

    assert _hit("quokkaupgrade")["heading_path"] == ["Debian Guide", "3. Upgrade Procedure"]
    assert _hit("wombatfriends")["heading_path"] == ["Debian Guide", "apt & friends"]
    assert _hit("numbatinstall")["heading_path"] == ["User Manual", "Installing"]
    assert _hit("platypussource")["heading_path"] == ["User Manual", "Installing", "From source"]
    pdf = _hit("echidnapage")
    first, last = pdf["start_line"], pdf["end_line"]
    assert pdf["page"] == 2 and isinstance(first, int) and isinstance(last, int) and 1 < first <= last

    cite = f"1. {root / 'report.pdf'}:{first}-{last}  [p. 2]  score "
    assert cite in ragd("search", "echidnapage", "--mode", "keyword", "-k", "1").stdout
    rst_cite = f"1. {root / 'manual.rst'}:"
    human = ragd("search", "platypussource", "--mode", "keyword", "-k", "1").stdout
    assert human.startswith(rst_cite) and "  [User Manual > Installing > From source]  score " in human
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert cite in ragctl("search", "echidnapage", "--mode", "keyword", "-k", "1").stdout


def test_entries_of_older_split_rules_are_split_again_reusing_vectors(tmp_path: Path, sections: Path) -> None:
    """An .rst entry as the previous version wrote it (no revision, no heading paths) is split again at the next
    run: its heading paths appear; its vectors are reused wherever the chunk text is the same."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "manual.rst").write_text(RST)
    (root / "notes.md").write_text("# Notes\n\nPlain notes.\n")
    ragd("run", "--once", str(root))
    path = sidecar.entry_path(root, "manual.rst")
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["split_revision"]
    for chunk in data["chunks"]:
        chunk.pop("heading_path", None)
    path.write_text(json.dumps(data), encoding="utf-8")

    again = ragd_json("run", "--once", str(root))
    assert again["embedded"] == 1 and again["unchanged"] == 1  # only the .rst file; notes.md stays
    assert again["vectors_reused"] >= 1
    assert ("User Manual", "Installing") in {tuple(p) for p in _paths(root, "manual.rst")}
    assert _hit("numbatinstall")["heading_path"] == ["User Manual", "Installing"]
    assert ragd_json("run", "--once", str(root))["embedded"] == 0  # split once: now it is current


def test_a_chunk_of_markup_alone_leaves_the_entry_and_the_index_at_the_next_run(
    tmp_path: Path, sections: Path
) -> None:
    """A layout table of empty cells, converted from HTML, made a chunk of its own before split revision 4 (here
    the section before the first heading), whose vector came first for unrelated questions. Now it makes none; an
    entry as that version wrote it (revision 3, the chunk in it) is split again at the next run, nothing embedded,
    and the chunk leaves the entry and the index."""
    root = tmp_path / "kb"
    root.mkdir()
    cells = "<table>" + "<tr>" + "<td></td>" * 6 + "</tr>" * 3 + "</table>"
    docgen.make_html(root / "files.html", "Files", f"{cells}<h1>Files</h1><p>The wombatfiles list.</p>")
    ragd("run", "--once", str(root))
    path = sidecar.entry_path(root, "files.html")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [c["content"] for c in data["chunks"]] == ["# Files\n\nThe wombatfiles list."]
    table = dict(data["chunks"][0], content="|  |  |  |  |  |  |\n| --- | --- | --- | --- | --- | --- |")
    data["chunks"].insert(0, table)  # as revision 3 wrote it
    data["split_revision"] = 3
    path.write_text(json.dumps(data), encoding="utf-8")

    again = ragd_json("run", "--once", str(root))
    assert again["embedded"] == 1 and again["texts_embedded"] == 0
    entry = sidecar.read_entry(path)
    assert entry is not None and entry.split_revision == SPLIT_REVISION
    assert [c.content for c in entry.chunks] == ["# Files\n\nThe wombatfiles list."]
    hits = ragd_json("search", "which files are listed", "--mode", "vector", "-k", "10")["results"]
    assert [h["chunk_index"] for h in hits if str(h["path"]).endswith("files.html")] == [0]


def test_a_word_on_the_second_of_two_short_pages_is_cited_by_its_page(tmp_path: Path, config: Path) -> None:
    """Two short pages fit in one chunk, which was cited by the first page; chunks end at page breaks, so the hit
    for a word on page 2 is a passage of page 2 alone, cited `p. 2`."""
    root = tmp_path / "kb"
    root.mkdir()
    docgen.make_pdf(root / "scan.pdf", ["Meeting notes, first page.", "The quollword decision is here."])
    ragd("run", "--once", str(root))
    entry = sidecar.read_entry(sidecar.entry_path(root, "scan.pdf"))
    assert entry is not None and [c.meta.get("page") for c in entry.chunks] == [1, 2]
    hit = _hit("quollword")
    assert hit["page"] == 2 and "first page" not in str(hit["content"])
    assert _hit("meeting")["page"] == 1
    human = ragd("search", "quollword", "--mode", "keyword", "-k", "1").stdout
    assert human.startswith(f"1. {root / 'scan.pdf'}:") and "  [p. 2]  score " in human
    # an entry an earlier version wrote (split revision 4: both pages in one chunk) is split again at the next run
    path = sidecar.entry_path(root, "scan.pdf")
    data = json.loads(path.read_text(encoding="utf-8"))
    first, second = data["chunks"]
    joined = f"{first['content']}\n\n{second['content']}"
    data["chunks"] = [dict(first, content=joined, content_hash=hashlib.md5(joined.encode()).hexdigest(),
                           end_index=second["end_index"], end_line=second["end_line"])]  # fmt: skip
    data["split_revision"] = 4
    path.write_text(json.dumps(data), encoding="utf-8")
    again = ragd_json("run", "--once", str(root))
    assert again["embedded"] == 1
    entry = sidecar.read_entry(path)
    assert entry is not None and entry.split_revision == SPLIT_REVISION
    assert [c.meta.get("page") for c in entry.chunks] == [1, 2]
    assert _hit("quollword")["page"] == 2
