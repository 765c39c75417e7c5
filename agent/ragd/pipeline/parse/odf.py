"""OpenDocument files (.odt, .ods, .odp: LibreOffice's own formats) through odfdo, without LibreOffice.

A text document becomes markdown as odfdo writes it (headings, lists, tables), with the escapes markdown does not
need in running text undone (`\\-`, `\\#`, backquotes, tildes; `\\*`, `\\_` and `\\|` stay, as markitdown leaves
them in .docx text). A spreadsheet becomes one `## sheet` section per sheet with a table; a presentation one
`# title` section per slide (its first text frame), its other frames as paragraphs. The document properties
(meta.xml: title, creator, creation date) become the document's metadata, as for OOXML files (office.py).

An encrypted (password-protected) file keeps its manifest readable and its content encrypted: refused by the
manifest's `encryption-data`, before odfdo reads anything.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from ...errors import ParseError
from ...model import Document
from .office import PASSWORD_HINT, REPAIR_HINT, conversion_error, package_properties
from .text import check_clean, clean_title, heading_title, normalise_newlines

ODF_EXTENSIONS = frozenset({".odt", ".ods", ".odp"})
_KINDS = {".odt": "text", ".ods": "spreadsheet", ".odp": "presentation"}
_MANIFEST = "META-INF/manifest.xml"
_META = "meta.xml"
_NS = {
    "dc": "http://purl.org/dc/elements/1.1/",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
}
_PROPERTIES = (
    ("office:meta/dc:title", "title"),
    ("office:meta/meta:initial-creator", "author"),
    ("office:meta/dc:creator", "author"),
    ("office:meta/meta:creation-date", "created"),
)
_ESCAPED = re.compile(r"\\([-#`~])")
_TABLE_RULING = re.compile(r"[|\-:\s]+")
# escaped at the start of a line, they keep plain text from being read as a list item or a heading
_LINE_START = ("\\-", "\\#")


def parse_odf(path: Path, ext: str) -> Document:
    """The markdown of an OpenDocument file; ParseError when it is encrypted, corrupt or of another kind."""
    _check_package(path, ext)
    # on first use only (lxml): a worker that never sees one never pays for it
    from odfdo import Document as OdfDocument

    try:
        odf = OdfDocument(path)
        kind = odf.get_type()
        if kind != _KINDS[ext]:
            found = f"an OpenDocument {kind}" if kind else "an OpenDocument of no known type"
            raise ParseError(f"this {ext} file holds {found}, not a {_KINDS[ext]}",
                             "give it the extension of its type (.odt, .ods, .odp)")  # fmt: skip
        text = {"text": _text, "spreadsheet": _sheets, "presentation": _slides}[kind](odf)
    except (ParseError, OSError):  # OSError: the file vanished or cannot be read, as for every parser
        raise
    except Exception as exc:  # stage boundary: lxml, zipfile and odfdo raise many exception types
        raise conversion_error(ext, exc) from exc
    text = normalise_newlines(text).strip()
    check_clean(text)
    metadata = package_properties(path, _META, _PROPERTIES, _NS)
    title = None
    if metadata is not None and metadata.fields.get("title"):
        title = clean_title(metadata.fields["title"][0])
    if title is None and ext != ".ods":
        title = heading_title(text)
    return Document(path=path, text=text, parser="odfdo", title=title, is_markdown=True, metadata=metadata)


def _check_package(path: Path, ext: str) -> None:
    """Refuse what is not a zip (corrupt) and what is encrypted, by the manifest alone."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            manifest = zf.read(_MANIFEST) if _MANIFEST in names else b""
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as err:
        raise ParseError(f"corrupt {ext} file: not a zip archive", REPAIR_HINT) from err
    if b"encryption-data" in manifest:
        raise ParseError(f"encrypted (password-protected) {ext} file", PASSWORD_HINT)
    if "content.xml" not in names:
        raise ParseError(f"corrupt {ext} file: no content.xml in it", REPAIR_HINT)


def _text(odf: Any) -> str:
    lines = []
    for line in str(odf.to_markdown()).split("\n"):
        lead = len(line) - len(line.lstrip())
        keep = 2 if line[lead:].startswith(_LINE_START) else 0
        lines.append(line[: lead + keep] + _ESCAPED.sub(r"\1", line[lead + keep :]))
    return "\n".join(lines)


def _sheets(odf: Any) -> str:
    parts = []
    for table in odf.to_markdown():  # for a spreadsheet: one TableMarkdown (name, content) per sheet
        content = str(table.content).strip()
        if _TABLE_RULING.sub("", content):  # not an empty sheet (its table has only rulings: `|   |\n|---|`)
            name = str(table.name).split("#", 1)[-1]  # "<file name>#<sheet>"
            parts.append(f"## {name}\n\n{content}")
    return "\n\n".join(parts)


def _slides(odf: Any) -> str:
    parts = []
    for page in odf.body.get_draw_pages():
        lines = [
            [x.strip() for x in str(f.get_formatted_text()).splitlines() if x.strip()]
            for f in page.get_frames()
        ]
        frames = [f for f in lines if f]
        if frames:  # the title frame's first line is the slide's heading
            first, *rest = frames[0]
            parts.append("\n\n".join([f"# {first}", *(["\n".join(rest)] if rest else []),
                                         *("\n".join(f) for f in frames[1:])]))  # fmt: skip
    return "\n\n".join(parts)
