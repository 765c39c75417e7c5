"""PDF text extraction with pypdfium2, page by page (about 100x faster than markitdown's pdfminer path).

A page whose text layer is empty (a scan) is rendered at OCR_DPI and read by OCR (ocr.py) when `[parse] ocr` is on
and the engine is installed: a mixed PDF keeps its text pages as they are, and the Document's `ocr` says which
pages OCR read, how sure it was, and which it did not read (over `ocr_max_pages`, failed, out of time).
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

from ...config import ParseConfig
from ...errors import FileSkipped, ParseError
from ...model import Document, Extracted, PageSpan
from ..metadata import normalise
from .ocr import PageReader, unavailable
from .text import clean_title, normalise_newlines

log = logging.getLogger(__name__)

PAGE_SEPARATOR = "\n\n"
# PDFium is not thread-safe and pypdfium2 does not serialise calls: one document at a time per process.
_PDFIUM_LOCK = threading.Lock()
# Control characters PDFium emits for unmapped glyphs, soft hyphens and text-object boundaries.
_PDF_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
_SCANNED_HINT = "turn [parse] ocr on (it needs rapidocr-onnxruntime), or give it a text layer (e.g. ocrmypdf)"
OCR_DPI = 200  # what OCR reads best at; a page is rendered at most OCR_MAX_SIDE pixels on its longer side
OCR_MAX_SIDE = 2000  # rapidocr shrinks larger pictures to this anyway (its max_side_len)
_PROPERTIES = (("Title", "title"), ("Author", "author"), ("CreationDate", "created"))


def parse_pdf(path: Path, options: ParseConfig | None = None, budget: float | None = None) -> Document:
    """Text of every page, joined by a blank line; `pages` maps offsets back to 1-based page numbers. `budget`:
    seconds OCR may take in all (PageReader.file_budget)."""
    options = options or ParseConfig()
    no_ocr = unavailable(options)
    reader = None if no_ocr else PageReader(options, budget)
    pages, title, metadata = _extract(path, reader)
    text, spans = join_pages(pages)
    if not text.strip():
        if no_ocr:
            raise FileSkipped(f"no extractable text (scanned PDF? OCR unavailable: {no_ocr})", _SCANNED_HINT)
        raise FileSkipped("no extractable text: no text layer, and OCR found no text on its pages")
    report = reader.report() if reader else None
    parser = "pdfium+ocr" if report and report.pages else "pdfium"
    return Document(path=path, text=text, parser=parser, title=title, is_markdown=False, pages=spans, ocr=report,
                    metadata=metadata)  # fmt: skip


def join_pages(pages: list[str]) -> tuple[str, tuple[PageSpan, ...]]:
    parts: list[str] = []
    spans: list[PageSpan] = []
    offset = 0
    for number, page in enumerate(pages, start=1):
        if parts:
            parts.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        parts.append(page)
        spans.append(PageSpan(number, offset, offset + len(page)))
        offset += len(page)
    return "".join(parts), tuple(spans)


def _extract(path: Path, reader: PageReader | None) -> tuple[list[str], str | None, Extracted | None]:
    import pypdfium2 as pdfium

    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as exc:
            raise _load_error(exc) from exc
        try:
            title = clean_title(pdf.get_metadata_value("Title"))
            metadata = properties(pdf.get_metadata_dict(skip_empty=True))
            pages = [_page_text(pdf, i) for i in range(len(pdf))]
            if reader is not None:
                pages = [text or _ocr_page(pdf, i, reader) for i, text in enumerate(pages)]
        except pdfium.PdfiumError as exc:
            raise ParseError(
                f"corrupt PDF: {exc}", "open it in a PDF viewer and save a repaired copy"
            ) from exc
        finally:
            pdf.close()
    log.debug("pdfium: %d pages from %s", len(pages), path)
    return pages, title, metadata


def properties(info: dict[str, str]) -> Extracted | None:
    """The document information dictionary's Title, Author and CreationDate as metadata (docs/metadata.md)."""
    picked = {key: info[name] for name, key in _PROPERTIES if info.get(name)}
    return normalise(picked, "PDF properties") if picked else None


def _page_text(pdf: Any, index: int) -> str:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            raw = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    return _PDF_CONTROL.sub("", normalise_newlines(raw)).strip()


def _ocr_page(pdf: Any, index: int, reader: PageReader) -> str:
    """The text OCR reads on page `index` (a page without a text layer), or "" (listed by the reader)."""
    import pypdfium2 as pdfium

    number = index + 1
    if not reader.wants(number):
        return ""
    page = pdf[index]
    try:
        width, height = page.get_size()  # points (1/72 inch)
        scale = min(OCR_DPI / 72, OCR_MAX_SIDE / max(width, height, 1.0))
        image = page.render(scale=scale, grayscale=True).to_pil()
    except pdfium.PdfiumError as exc:
        reader.failed(number, f"could not render the page for OCR: {exc}")
        return ""
    finally:
        page.close()
    return reader.read(number, image)


def _load_error(exc: Any) -> ParseError:
    import pypdfium2.raw as pdfium_c

    if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
        return ParseError(
            "encrypted (password-protected) PDF", "save a copy without the password to index it"
        )
    if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
        return ParseError(
            "PDF uses an unsupported security handler (encrypted)",
            "save a copy without encryption to index it",
        )
    return ParseError(f"corrupt PDF: {exc}", "open it in a PDF viewer and save a repaired copy")
