"""Parse stage: a source file -> `Document` (markdown or plain text, title, page spans).

Formats, by extension (case-insensitive):

| extensions | how | text |
|---|---|---|
| .md .markdown | decoded here | markdown |
| .txt .text .log .json .yaml .yml .toml | decoded here | plain (`is_markdown=False`) |
| .rst .rest .org | decoded here | plain, `markup="rst"` / `"org"`: the splitter knows their section titles |
| .pdf | pypdfium2, page by page; `pages` holds each page's offsets; pages without text through OCR | plain |
| .png .jpg .jpeg .tif .tiff .bmp .webp | OCR (ocr.py, `[parse] ocr`), every frame a page | plain |
| .html .htm | BeautifulSoup and markdownify, as markitdown's HTML converter (html.py) | markdown |
| .csv .docx .pptx .xlsx .xls | markitdown's converter for the extension | markdown |
| .doc .ppt | `soffice --headless --convert-to docx/pptx`, then markitdown | markdown |
| .odt .ods .odp | odfdo (odf.py): a text's headings, lists and tables; a sheet's table; a slide's frames | markdown |

Text files are decoded without markitdown: a byte-order mark, else strict UTF-8, else UTF-8 with a few undecodable
bytes (a stray byte, a last character cut off: each run of them becomes U+FFFD, `Document.warning` says how many),
else charset-normalizer's detection (GBK/GB18030, Big5, Shift-JIS, cp125x, ...; `Document.encoding` records it). JSON is plain text too:
markitdown would only decode it the same way. Newlines become `\\n`. Titles: HTML `<title>`, OOXML core
properties, OpenDocument properties, PDF metadata, Markdown front matter (YAML or TOML: frontmatter.py) / Org `#+TITLE:`; else the first markdown heading (HTML,
.docx, .pptx, .odt, .odp, prose text types); else the line under a man-page `NAME` header; else None. Data formats
(.json, .yaml, .toml, .log, .csv, spreadsheets) get no heading-derived title.

Metadata (`Document.metadata`, docs/metadata.md): Markdown front matter, PDF document information (title, author,
creation date), OOXML core properties and OpenDocument properties (title, creator, created); what cannot be read is a note, never a failure.

Outcomes: `FileSkipped` for an unsupported extension, an empty or too large file, no text after extraction
(a scanned PDF with OCR off, an image where OCR found nothing), images with OCR off or not installed, text over `limits.max_text_chars` (never truncated) and .doc/.ppt without LibreOffice;
`ParseError` for encrypted, corrupt or binary-junk files and converter failures. OSError reading the file
(vanished, unreadable) propagates to the caller. Heavy libraries are imported on first use only.
OCR stops a page at `parse.ocr_page_timeout` (it is listed, the next page is read), and starts no page that would take the file past
OCR_SHARE of `limits.parse_timeout` (the rest of the document is indexed, the pages not read are listed). Here only .doc/.ppt honour `limits.parse_timeout` (the converters run in this process and cannot be interrupted);
the agent runs this stage in worker processes (pipeline/workers.py), which enforce it for every file.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
from pathlib import Path

from ...config import LimitsConfig, ParseConfig
from ...errors import FileSkipped, ParseError
from ...model import Document
from ..structure import scan_rst
from . import frontmatter
from .image import IMAGE_EXTENSIONS, parse_image, refuse_image
from .legacy import LEGACY_EXTENSIONS, parse_legacy
from .odf import ODF_EXTENSIONS, parse_odf
from .office import MARKITDOWN_EXTENSIONS, parse_markitdown
from .pdf import parse_pdf
from .text import (
    clean_title,
    damaged_utf8,
    decode,
    heading_title,
    man_title,
    normalise_newlines,
    replaced_warning,
)

__all__ = ["IMAGE_EXTENSIONS", "SUPPORTED_EXTENSIONS", "TEXT_EXTENSIONS", "parse", "refuse_image"]

log = logging.getLogger(__name__)

OCR_SHARE = 0.8  # of limits.parse_timeout that OCR may use on one file (ocr.PageReader.file_budget)
MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown"})
MARKUP_EXTENSIONS = {".rst": "rst", ".rest": "rst", ".org": "org"}  # plain text with known section titles
PROSE_EXTENSIONS = frozenset({".txt", ".text", *MARKUP_EXTENSIONS})  # plain text that may carry a title
DATA_EXTENSIONS = frozenset({".json", ".yaml", ".yml", ".toml", ".log"})  # plain text, no title
TEXT_EXTENSIONS = MARKDOWN_EXTENSIONS | PROSE_EXTENSIONS | DATA_EXTENSIONS
SUPPORTED_EXTENSIONS: frozenset[str] = (
    TEXT_EXTENSIONS
    | MARKITDOWN_EXTENSIONS
    | ODF_EXTENSIONS
    | LEGACY_EXTENSIONS
    | IMAGE_EXTENSIONS
    | frozenset({".pdf"})
)  # images only with OCR: parse() and the file job's precheck say so when it is off (refuse_image)


# Plain-text documents known by their name, not an extension (README, README.Debian, NEWS, …): read as text when
# their first SNIFF_BYTES are text (`kind_of`), as is any file with no extension at all
DOC_NAMES = frozenset({"README", "READ-ME", "CHANGES", "CHANGELOG", "NEWS", "INSTALL", "AUTHORS", "CONTRIBUTORS",
                       "COPYING", "COPYRIGHT", "LICENSE", "LICENCE", "NOTICE", "TODO", "NOTES", "FAQ", "HACKING",
                       "CONTRIBUTING", "THANKS", "BUGS", "HISTORY", "RELEASE-NOTES", "RELEASE_NOTES", "USAGE"})  # fmt: skip
SNIFF_BYTES = 8192
COMPRESSED = frozenset({".gz", ".bz2", ".xz", ".zst", ".lz", ".lzma", ".z"})


def kind_of(path: Path) -> str | None:
    """The extension `path` is parsed as: its own when supported; ".txt" for a file with no extension or a
    documentation name (DOC_NAMES, with any suffix: README.Debian) whose start is text; None: not supported.
    Raises PermissionError (and FileNotFoundError, ...) when the start of such a file cannot be read."""
    ext = path.suffix.lower()
    if ext in SUPPORTED_EXTENSIONS:
        return ext
    if ext and path.name.split(".", 1)[0].upper() not in DOC_NAMES:
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except (PermissionError, FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise  # unreadable, gone or replaced: the caller's verdict (FAILED "permission denied"), not "not text"
    except OSError:
        return None
    return ".txt" if _looks_like_text(head) else None


def _looks_like_text(head: bytes) -> bool:
    if not head.strip() or b"\0" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return True
    except UnicodeDecodeError:
        with contextlib.suppress(ParseError):  # UTF-8 with a stray byte is text (read with it replaced)
            if damaged_utf8(head) is not None:
                return True
        import charset_normalizer  # on first use only (as every heavy library here)

        best = charset_normalizer.from_bytes(head).best()
        return best is not None and best.percent_chaos < 10


def unsupported(path: Path) -> FileSkipped:
    """The verdict on a file `kind_of` does not read."""
    ext = path.suffix.lower()
    hint = (f"supported: {' '.join(sorted(SUPPORTED_EXTENSIONS))}; and text files with no extension or named like "
            "README, NEWS, CHANGES (README.Debian too)")  # fmt: skip
    if ext in COMPRESSED:
        return FileSkipped(
            f"compressed file {ext!r}: not read", "decompress it (e.g. gunzip -k) to index its text"
        )
    if not ext or path.name.split(".", 1)[0].upper() in DOC_NAMES:
        return FileSkipped(
            f"not text: {path.name!r} has no known extension and does not start with text", hint
        )
    return FileSkipped(f"unsupported file type {ext!r}", hint)


def parse(path: Path, limits: LimitsConfig, options: ParseConfig | None = None) -> Document:
    """Turn the file at `path` into a Document; raise FileSkipped or ParseError (see the module docstring)."""
    options = options or ParseConfig()
    kind = kind_of(path)
    if kind is None:
        raise unsupported(path)
    ext = kind
    if ext in IMAGE_EXTENSIONS:
        refuse_image(options)
    size = path.stat().st_size
    if size == 0:
        raise FileSkipped("empty file (0 bytes)")
    if size > limits.max_file_size:
        raise FileSkipped(
            f"file too large: {size} bytes > limits.max_file_size {limits.max_file_size}",
            "raise limits.max_file_size to index it",
        )
    doc = _dispatch(path, ext, limits, options)
    if not doc.text.strip() and doc.parser == "ocr":
        raise FileSkipped("no text: OCR found none in the image", _unread_hint(doc))
    if not doc.text.strip():
        raise FileSkipped("no extractable text (the file holds only whitespace or markup)")
    if len(doc.text) > limits.max_text_chars:
        raise FileSkipped(
            f"text too long: {len(doc.text)} characters > max_text_chars {limits.max_text_chars}",
            "raise limits.max_text_chars, or split the file",
        )
    log.debug("parsed %s with %s: %d characters", path, doc.parser, len(doc.text))
    return doc


def _unread_hint(doc: Document) -> str:
    if doc.ocr is None or not doc.ocr.not_read:
        return ""
    return "; ".join(f"page {n}: {why}" for n, why in doc.ocr.not_read[:3])


def _dispatch(path: Path, ext: str, limits: LimitsConfig, options: ParseConfig) -> Document:
    if ext in TEXT_EXTENSIONS:
        return _parse_text(path, ext)
    budget = OCR_SHARE * limits.parse_timeout  # what is left is for the split, and the margin
    if ext == ".pdf":
        return parse_pdf(path, options, budget)
    if ext in IMAGE_EXTENSIONS:
        return parse_image(path, options, budget)
    if ext in LEGACY_EXTENSIONS:
        return parse_legacy(path, ext, limits.parse_timeout)
    if ext in ODF_EXTENSIONS:
        return parse_odf(path, ext)
    return parse_markitdown(path, ext)


def _parse_text(path: Path, ext: str) -> Document:
    decoded = decode(path.read_bytes())
    text = normalise_newlines(decoded.text)
    title, metadata = None, frontmatter.read(text) if ext in MARKDOWN_EXTENSIONS else None
    if metadata is not None and metadata.fields.get("title"):
        title = clean_title(metadata.fields["title"][0])
    if MARKUP_EXTENSIONS.get(ext) == "rst":
        titles = scan_rst(text)
        title = clean_title(titles[0].path[-1]) if titles else None
    if title is None and ext in MARKDOWN_EXTENSIONS:
        title = heading_title(frontmatter.body(text)) or man_title(text)  # past the front matter
    elif title is None and ext in PROSE_EXTENSIONS:
        title = heading_title(text) or man_title(text)
    return Document(
        path=path,
        text=text,
        parser="text",
        title=title,
        is_markdown=ext in MARKDOWN_EXTENSIONS,
        markup=MARKUP_EXTENSIONS.get(ext),
        encoding=decoded.encoding,
        metadata=metadata,
        warning=replaced_warning(decoded),
    )
