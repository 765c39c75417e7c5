"""Document metadata: normalising values, front matter, PDF and Office properties, folder defaults and their
precedence, the sidecar key, and the `[metadata]` config."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from ragd.config import LimitsConfig, load_config
from ragd.errors import ConfigError
from ragd.model import Extracted, SplitterSettings, fields_json
from ragd.pipeline import folder_meta, sidecar
from ragd.pipeline.metadata import (
    MAX_TERMS_BYTES,
    MAX_VALUE_CHARS,
    Defaults,
    EntryMetadata,
    Labels,
    label,
    merge_defaults,
    normalise,
    relabel,
)
from ragd.pipeline.parse import frontmatter, parse
from ragd.pipeline.split import split
from tests.support import docgen

LIMITS = LimitsConfig()


# -- values ----------------------------------------------------------------------------------------------------
def test_values_are_normalised_to_text() -> None:
    got = normalise({"Tags": "a, #b ,, A", "Version": 2.5, "draft": True, "count": 3, "Product": " X\n 200 "},
                    "front matter")  # fmt: skip
    assert got.fields == {"tags": ("a", "b"), "version": ("2.5",), "draft": ("true",), "count": ("3",),
                          "product": ("X 200",)}  # fmt: skip
    assert got.notes == ()


def test_keys_take_their_aliases_and_lists_add_up() -> None:
    got = normalise({"tag": ["x"], "tags": ["y", "X"], "date": "2024-03-01", "authors": ["Ann", "Bo"]}, "fm")
    assert got.fields == {"tags": ("x", "y"), "created": ("2024-03-01",), "author": ("Ann", "Bo")}


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (dt.date(2024, 3, 1), "2024-03-01"),
        (dt.datetime(2024, 3, 1, 10, 30), "2024-03-01T10:30:00"),
        (dt.datetime(2024, 3, 1, 10, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))), "2024-03-01T09:30:00Z"),
        ("2024-03-01T10:30:00Z", "2024-03-01T10:30:00Z"),
        ("2024-03-01T10:30:00+08:00", "2024-03-01T02:30:00Z"),
        ("D:20240301103000+01'00'", "2024-03-01T09:30:00Z"),
        ("D:20240301", "2024-03-01"),
        ("D:20241399", "D:20241399"),  # not a date: kept as written
        ("last spring", "last spring"),
    ],
)
def test_dates_become_iso_8601(raw: object, want: str) -> None:
    assert normalise({"created": raw}, "x").fields == {"created": (want,)}


def test_odd_input_is_left_out_with_a_note_never_an_error() -> None:
    got = normalise({
        "owner": {"name": "n"}, "tags": ["ok", ["nested"], None], "title": "t" * (MAX_VALUE_CHARS + 1),
        "bad key!": "v", "score": float("nan"), "empty": "  ", 3: "number key", "ctl": "a\x00b\x1bc",
    }, "front matter")  # fmt: skip
    assert got.fields == {"tags": ("ok",), "ctl": ("a b c",)}
    text = "\n".join(got.notes)
    for needle in ("'owner' holds a dict", "'tags' holds a list", "'title' has a value of 501 characters",
                   "key 'bad key!' is not a field name", "key '3' is not a field name"):  # fmt: skip
        assert needle in text, text


def test_many_keys_and_values_are_bounded() -> None:
    got = normalise({f"k{i}": "v" for i in range(100)} | {"z": "late"}, "x")
    assert len(got.fields) == 64 and "more than 64 keys" in got.notes[-1]
    tags = normalise({"tags": [f"t{i}" for i in range(100)]}, "x")
    assert len(tags.fields["tags"]) == 64 and "the first 64 kept" in tags.notes[0]


# -- front matter ----------------------------------------------------------------------------------------------
def test_yaml_front_matter_keeps_scalars_as_written() -> None:
    text = ('---\ntitle: "A: \\"B\\""\nversion: 2.10\ndate: 2024-03-01\ntags: [x, y]\n'
            'run: !!python/object/apply:os.system ["echo hi"]\n---\n# H\n')  # fmt: skip
    got = frontmatter.read(text)
    assert got is not None
    assert got.fields == {"title": ('A: "B"',), "version": ("2.10",), "created": ("2024-03-01",),
                          "tags": ("x", "y"), "run": ("echo hi",)}  # fmt: skip  # a tag constructs nothing


def test_toml_front_matter() -> None:
    got = frontmatter.read('+++\ntitle = "T"\ndate = 2024-03-01T10:00:00Z\ntags = ["a"]\n+++\nbody\n')
    assert got is not None and got.fields == {
        "title": ("T",),
        "created": ("2024-03-01T10:00:00Z",),
        "tags": ("a",),
    }


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("---\ntitle: [unclosed\n---\nbody\n", "front matter: not valid YAML"),
        ("+++\ntitle = \n+++\n", "front matter: not valid TOML"),
        ("---\n- a\n- b\n---\n", "a list, not a mapping"),
        ("---\ntitle: x\nno end\n", "not closed within 500 lines"),
        ("---\nbig: " + "x" * 70_000 + "\n---\n", "larger than 64 KiB"),
    ],
)
def test_broken_front_matter_is_a_note(text: str, note: str) -> None:
    got = frontmatter.read(text)
    assert got is not None and got.fields == {} and note in got.notes[0], got


def test_no_front_matter() -> None:
    assert frontmatter.read("# Title\n\n---\n\ntext\n") is None
    assert frontmatter.read("---\n---\nempty block\n") is None


# -- from parse to the context header -----------------------------------------------------------------------------
def test_markdown_front_matter_title_feeds_the_context_header(tmp_path: Path) -> None:
    path = tmp_path / "n.md"
    path.write_text(
        '---\ntitle: "Pump: \\"P-7\\" manual"\ntags: [pumps]\n---\n# Install\n\nMount the pump.\n'
    )
    doc = parse(path, LIMITS)
    assert doc.title == 'Pump: "P-7" manual'
    assert doc.metadata is not None and doc.metadata.fields["tags"] == ("pumps",)
    chunks = split(doc, SplitterSettings())
    assert chunks[0].header == 'File: n.md | Title: Pump: "P-7" manual'
    assert doc.text.startswith("---\n")  # the text, line numbers included, is the file's as before


def test_a_broken_front_matter_never_fails_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.md"
    path.write_text("---\ntitle: [oops\n---\n# Heading\n\nbody\n")
    doc = parse(path, LIMITS)
    assert doc.title == "Heading" and doc.metadata is not None and "not valid YAML" in doc.metadata.notes[0]


def test_pdf_properties(tmp_path: Path) -> None:
    when = dt.datetime(2024, 3, 1, 10, 30, tzinfo=dt.UTC)
    path = docgen.make_pdf(tmp_path / "p.pdf", ["text"], title="Spec", author="Ann Lee", created=when)
    doc = parse(path, LIMITS)
    assert doc.metadata is not None
    assert doc.metadata.fields == {
        "title": ("Spec",),
        "author": ("Ann Lee",),
        "created": ("2024-03-01T10:30:00Z",),
    }


def test_office_core_properties(tmp_path: Path) -> None:
    path = docgen.make_docx(tmp_path / "d.docx", title="Core Title", paragraphs=["x"])
    doc = parse(path, LIMITS)
    assert doc.title == "Core Title" and doc.metadata is not None
    assert doc.metadata.fields["title"] == ("Core Title",)
    assert doc.metadata.fields["author"] == ("python-docx",)  # its template's creator
    assert doc.metadata.fields["created"][0].endswith("Z")


# -- folder defaults and precedence --------------------------------------------------------------------------------
def test_precedence_document_over_nearer_over_farther_and_tags_add_up() -> None:
    farther = Extracted({"product": ("P1",), "version": ("1",), "tags": ("a",), "type": ("t",)})
    nearer = Extracted({"product": ("P2",), "tags": ("b", "A")})
    defaults = merge_defaults([farther, nearer])
    assert defaults.fields == {"product": ("P2",), "version": ("1",), "tags": ("a", "b"), "type": ("t",)}
    document = Extracted(
        {"version": ("9",), "tags": ("c",), "title": ("T",), "customer": ("C",), "x": ("y",)}
    )
    meta = label(document, defaults, ("customer",))
    assert meta is not None
    assert fields_json(meta.fields) == {"title": "T", "tags": ["a", "b", "c"], "product": "P2", "version": "9",
                                        "type": "t", "customer": "C"}  # fmt: skip
    assert meta.document == document.fields  # every key the document gave, `x` too (keys may be added later)
    assert label(None, Defaults(), ()) is None  # nothing to record: no `metadata` key


def test_the_basis_changes_with_the_defaults_and_the_keys() -> None:
    none, one = Labels(), Labels(merge_defaults([Extracted({"product": ("X",)})]))
    assert none.basis is None and one.basis is not None
    assert Labels(keys=("customer",)).basis not in (None, one.basis)
    old = one.entry(Extracted({"customer": ("C",)}))
    assert old is not None and old.fields == {"product": ("X",)} and old.basis == one.basis
    again = Labels(merge_defaults([Extracted({"product": ("Y",)})]), ("customer",)).again(old)
    assert again is not None and again.fields == {"product": ("Y",), "customer": ("C",)}
    assert relabel(again, Defaults(), ()) == EntryMetadata({}, {"customer": ("C",)}, (), None)


def test_the_index_budget_leaves_late_values_out_with_a_note() -> None:
    meta = label(Extracted({"tags": tuple(f"{i:03d}" + "标" * 120 for i in range(64))}), Defaults(), ())
    assert meta is not None
    kept = meta.fields["tags"]
    assert 0 < len(kept) < 64 and sum(len(t.encode()) for t in kept) < MAX_TERMS_BYTES
    assert "left out" in meta.notes[-1]


def test_folder_defaults_apply_below_within_the_root(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / folder_meta.FOLDER_FILE).write_text('product = "outside the root"\n')
    (root / folder_meta.FOLDER_FILE).write_text('product = "R"\ntags = ["r"]\ntitle = "no"\n')
    (root / "a" / folder_meta.FOLDER_FILE).write_text('version = "2"\ntags = ["a"]\n[nested]\nx = 1\n')
    got = folder_meta.defaults_for(deep, [root])
    assert got.fields == {"product": ("R",), "tags": ("r", "a"), "version": ("2",)}
    notes = "\n".join(got.notes)
    assert "'title' is a document's own" in notes and "'nested' holds a dict" in notes
    assert folder_meta.defaults_for(root, [root]).fields == {"product": ("R",), "tags": ("r",)}
    assert folder_meta.defaults_for(deep, []).fields == {}  # no root: only the folder itself


def test_a_changed_or_broken_defaults_file_is_read_again(tmp_path: Path) -> None:
    f = tmp_path / folder_meta.FOLDER_FILE
    f.write_text('product = "A"\n')
    assert folder_meta.defaults_for(tmp_path, [tmp_path]).fields == {"product": ("A",)}
    f.write_text('product = "B"\n')
    os.utime(f, ns=(1, 1))  # a new stat whatever the clock's resolution
    assert folder_meta.defaults_for(tmp_path, [tmp_path]).fields == {"product": ("B",)}
    f.write_text("product = \n")
    got = folder_meta.defaults_for(tmp_path, [tmp_path])
    assert got.fields == {} and f"{f}: not valid TOML" in got.notes[0]
    f.write_bytes(b"\xff\xfe junk")
    assert "not valid TOML" in folder_meta.defaults_for(tmp_path, [tmp_path]).notes[0]


# -- the sidecar key, the config -----------------------------------------------------------------------------------
def test_the_sidecar_key_reads_back_and_odd_keys_are_tolerated() -> None:
    meta = EntryMetadata(
        {"tags": ("a",), "product": ("X",), "author": ("A", "B")}, {"tags": ("a",)}, ("n",), "b1"
    )
    assert meta.to_json() == {"fields": {"tags": ["a"], "product": "X", "author": ["A", "B"]},
                              "document": {"tags": ["a"]}, "notes": ["n"], "basis": "b1"}  # fmt: skip
    assert EntryMetadata.from_json(meta.to_json()) == meta
    assert EntryMetadata.from_json({"fields": {"k": 3, "t": ["a", 1]}, "notes": "x"}) == EntryMetadata(
        {"t": ("a",)}, {}, (), None
    )
    assert EntryMetadata.from_json("junk") is None


def test_an_entry_of_the_ragjson_tool_reads_without_metadata() -> None:
    data = {"ragjson_version": "2.4", "processing": {"status": "EMBEDDED"},
            "source": {"file_name": "a.md", "md5_hash": "m", "size_bytes": 1, "mtime": 1, "inode": 1},
            "embedding": {"model_name": "m", "dimension": 2}, "chunks": []}  # fmt: skip
    entry = sidecar.entry_from_json(data)
    assert entry is not None and entry.metadata is None and "metadata" not in entry.to_json()


def test_config_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[metadata]\nkeys = ["Customer", "status", "tags", "customer"]\n')
    assert load_config(path, environ={}).metadata.keys == ("customer", "status")
    path.write_text('[metadata]\nkeys = ["bad key"]\n')
    with pytest.raises(ConfigError, match=r"metadata\.keys"):
        load_config(path, environ={})
