"""`ragd status`'s note on what OCR did (edges/filestatus.py), from an entry's `ocr` key."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ragd.edges.filestatus import ocr_note, page_list
from ragd.pipeline.sidecar import FileEntry, SourceInfo
from ragd.vocabulary import FileState


def _entry(parser: str, ocr: dict[str, Any] | None) -> FileEntry:
    src = SourceInfo("scan.pdf", "0" * 32, 10, 1_700_000_000, 42)
    return replace(FileEntry(FileState.EMBEDDED, "", "", src, "m", 4), parser=parser, ocr=ocr)


def test_page_list_shortens_runs() -> None:
    assert page_list([7, 1, 2, 3, 9, 10]) == "p. 1-3, 7, 9-10"
    assert page_list([4]) == "p. 4"


def test_note_of_a_mixed_pdf_names_pages_low_and_unread() -> None:
    ocr = {"pages": [2, 3], "confidence": 0.934, "low_confidence_pages": [3],
           "not_read": [{"page": 5, "reason": "over parse.ocr_max_pages (2)"}]}  # fmt: skip
    assert (
        ocr_note(_entry("pdfium+ocr", ocr))
        == "text from OCR on p. 2-3 (confidence 0.93; low: p. 3; not read: p. 5)"
    )


def test_note_of_an_image_and_of_no_ocr() -> None:
    assert ocr_note(_entry("ocr", {"pages": [1], "confidence": 0.98})) == "text from OCR (confidence 0.98)"
    assert ocr_note(_entry("pdfium", None)) == ""
