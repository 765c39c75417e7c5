"""HTML, CSV and Office files through markitdown's converters (HTML through BeautifulSoup and markdownify, as
markitdown's converter does, without importing markitdown: html.py).

Each other extension goes straight to its markitdown converter class (one instance per extension, built lazily and
cached). The `MarkItDown` facade is not used: its constructor loads the magika model (~0.1 s) and every
`convert` runs magika on the stream (~16 ms) and then tries other converters on a guess, which can turn a
corrupt file into garbage text. We already know the type from the extension and check the container ourselves.

Permalink anchors of HTML headings and definitions (`[¶](#install "Permalink to this heading")`, as Sphinx,
MkDocs and GitHub pages carry them) are dropped from the markdown: they are noise to both search and citations.
"""

from __future__ import annotations

import io
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO
from xml.etree import ElementTree

from ...errors import ParseError
from ...model import Document, Extracted
from ..metadata import normalise
from ..structure import drop_permalinks
from .text import (
    Decoded,
    check_clean,
    clean_title,
    decode,
    heading_title,
    normalise_newlines,
    replaced_warning,
)

CFB_MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")  # OLE2 compound file: legacy Office, or encrypted OOXML
_ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")
_HTML = frozenset({".html", ".htm"})  # html.py: as markitdown's HtmlConverter, without importing markitdown
_CONVERTER_CLASSES = {
    ".csv": "CsvConverter",
    ".docx": "DocxConverter",
    ".pptx": "PptxConverter",
    ".xlsx": "XlsxConverter",
    ".xls": "XlsConverter",
}
MARKITDOWN_EXTENSIONS = frozenset(_CONVERTER_CLASSES) | _HTML
OOXML_EXTENSIONS = frozenset({".docx", ".pptx", ".xlsx"})
_TEXTUAL = frozenset({".html", ".htm", ".csv"})  # decoded (and checked for junk) by us before conversion
_HEADING_TITLE = frozenset({".html", ".htm", ".docx", ".pptx"})  # first heading is a sensible title
_CORE_XML = "docProps/core.xml"
_DC = "{http://purl.org/dc/elements/1.1/}"
_CORE = (
    (f"{_DC}title", "title"),
    (f"{_DC}creator", "author"),
    ("{http://purl.org/dc/terms/}created", "created"),
)
PASSWORD_HINT = "save a copy without the password to index it"
REPAIR_HINT = "open it in its application and save it again"

_converters: dict[str, Any] = {}
_converters_lock = threading.Lock()


def parse_markitdown(
    path: Path, ext: str, *, parser: str = "markitdown", source: Path | None = None
) -> Document:
    """Convert `path` (of type `ext`) to markdown.

    `source` is the user's file when `path` is a converted copy of it (see legacy.py).
    """
    if ext in _HTML:
        parser = "html"
    decoded = Decoded("")
    if ext in _TEXTUAL:  # checked for junk as it was decoded (with its replaced bytes, if any, left out)
        text, title, decoded = _convert_textual(path, ext)
    else:
        text, title = _convert_binary(path, ext), None
        check_clean(text)
    text = normalise_newlines(text).strip()
    metadata = ooxml_properties(path) if ext in OOXML_EXTENSIONS else None
    if title is None and metadata is not None and metadata.fields.get("title"):
        title = clean_title(metadata.fields["title"][0])
    if title is None and ext in _HEADING_TITLE:
        title = heading_title(text)
    return Document(path=source or path, text=text, parser=parser, title=title, is_markdown=True,
                    encoding=decoded.encoding, metadata=metadata, warning=replaced_warning(decoded))  # fmt: skip


def _convert_textual(path: Path, ext: str) -> tuple[str, str | None, Decoded]:
    decoded = decode(path.read_bytes())
    text = decoded.text
    if ext in _HTML:
        from .html import html_to_markdown

        try:
            markdown, title = html_to_markdown(text)
        except Exception as exc:  # stage boundary: BeautifulSoup and markdownify raise many exception types
            raise conversion_error(ext, exc) from exc
        # Sphinx, MkDocs, GitHub...: a `[¶](#anchor)` after each heading and definition
        return drop_permalinks(markdown), clean_title(title) if title else None, decoded
    # Hand the converter UTF-8 so it does not guess again.
    result = _run(ext, io.BytesIO(text.encode("utf-8")), charset="utf-8")
    title = clean_title(str(result.title)) if result.title else None
    return str(result.markdown), title, decoded


def _convert_binary(path: Path, ext: str) -> str:
    check_container(path, ext)
    with path.open("rb") as fh:
        return str(_run(ext, fh).markdown)


def check_container(path: Path, ext: str) -> None:
    """Refuse an OOXML file that is not a zip: encrypted (an OLE container) or corrupt."""
    if ext not in OOXML_EXTENSIONS:
        return
    with path.open("rb") as fh:
        head = fh.read(len(CFB_MAGIC))
    if head == CFB_MAGIC:
        if _ENCRYPTED_STREAM in path.read_bytes():
            raise ParseError(f"encrypted (password-protected) {ext} file", PASSWORD_HINT)
        raise ParseError(
            f"encrypted (password-protected) or legacy-format {ext} file: an OLE container, "
            "not a zip archive",
            f"{PASSWORD_HINT}, or save it in the real {ext} format",
        )
    if not zipfile.is_zipfile(path):
        raise ParseError(f"corrupt {ext} file: not a zip archive", REPAIR_HINT)


def _run(ext: str, stream: BinaryIO, charset: str | None = None) -> Any:
    from markitdown import StreamInfo

    converter = _converter(ext)
    try:
        return converter.convert(stream, StreamInfo(extension=ext, charset=charset))
    except Exception as exc:  # stage boundary: markitdown's back-ends raise many unrelated exception types
        raise conversion_error(ext, exc) from exc


def _converter(ext: str) -> Any:
    with _converters_lock:
        converter = _converters.get(ext)
        if converter is None:
            from markitdown import converters

            converter = _converters[ext] = getattr(converters, _CONVERTER_CLASSES[ext])()
        return converter


def conversion_error(ext: str, exc: Exception) -> ParseError:
    detail = " ".join(str(exc).split())[:300]
    if "encrypt" in detail.lower() or "password" in detail.lower():
        return ParseError(f"encrypted (password-protected) {ext} file ({detail})", PASSWORD_HINT)
    return ParseError(f"corrupt or unreadable {ext} file: {type(exc).__name__}: {detail}", REPAIR_HINT)


def ooxml_properties(path: Path) -> Extracted | None:
    """An OOXML package's core properties (docProps/core.xml): title, creator (as author), created."""
    return package_properties(path, _CORE_XML, _CORE)


def package_properties(
    path: Path, member: str, wanted: Sequence[tuple[str, str]], namespaces: dict[str, str] | None = None
) -> Extracted | None:
    """The document properties in the XML `member` of a zip package (OOXML's docProps/core.xml, OpenDocument's
    meta.xml): for each (element path, field) of `wanted`, the text of the first element found with some."""
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(member)
            if info.file_size > 1024**2:
                return Extracted(notes=(f"document properties: {member} over 1 MiB; not read",))
            root = ElementTree.fromstring(zf.read(info))
    except KeyError:
        return None  # no properties
    except (OSError, zipfile.BadZipFile, ElementTree.ParseError) as err:
        return Extracted(notes=(f"document properties: unreadable ({type(err).__name__}); not read",))
    picked: dict[str, str] = {}
    for where, key in wanted:
        el = root.find(where, namespaces)
        if key not in picked and el is not None and el.text and el.text.strip():
            picked[key] = el.text
    return normalise(picked, "document properties") if picked else None
