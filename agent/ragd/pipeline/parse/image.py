"""Images through OCR: every frame (a multi-page TIFF's pages) is a page of the Document."""

from __future__ import annotations

import logging
from pathlib import Path

from ...config import ParseConfig
from ...errors import FileSkipped, ParseError
from ...model import Document
from .ocr import PageReader, unavailable
from .pdf import join_pages

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"})
_OCR_HINT = "images need OCR: [parse] ocr = true (the default) and rapidocr-onnxruntime installed and loading"


def refuse_image(options: ParseConfig) -> None:
    """Raise FileSkipped when images cannot be read here (OCR off, not installed, or failing to load)."""
    why = unavailable(options)
    if why is not None:
        raise FileSkipped(f"OCR unavailable: {why}", _OCR_HINT)


def parse_image(path: Path, options: ParseConfig, budget: float | None = None) -> Document:
    """OCR every frame of the image at `path`; `pages` maps the text back to frame numbers (1-based). `budget`:
    seconds OCR may take in all (PageReader.file_budget)."""
    refuse_image(options)
    from PIL import Image, ImageSequence, UnidentifiedImageError

    reader = PageReader(options, budget)
    texts: list[str] = []
    try:
        with Image.open(path) as image:
            for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
                texts.append(reader.read(number, frame) if reader.wants(number) else "")
    except (UnidentifiedImageError, Image.DecompressionBombError, SyntaxError, ValueError) as exc:
        raise ParseError(
            f"unreadable image: {exc}", "open it in an image viewer and save a repaired copy"
        ) from exc
    except (FileNotFoundError, PermissionError):
        raise  # the caller's to report, as for every other file type
    except OSError as exc:
        raise ParseError(f"corrupt or truncated image: {exc}", "save a repaired copy of the image") from exc
    text, spans = join_pages(texts)
    log.debug("OCR: %d frames of %s", len(texts), path)
    return Document(path=path, text=text, parser="ocr", is_markdown=False, pages=spans, ocr=reader.report())
