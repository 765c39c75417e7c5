"""Scans generated at test time: text rendered with a font into a picture, with no text layer anywhere.

English uses DejaVu Sans when the system has it (else Pillow's built-in font); Chinese needs the Noto Sans CJK font
of the `cvttf-notosanscjk-regular` package (the dev extra): `cjk_font()` is None without it, and the tests that
need it skip with `NO_CJK_FONT`. Every function writes one file at the given path and returns that path.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NO_CJK_FONT = "the CJK test font is not installed: pip install cvttf-notosanscjk-regular (the dev extra)"
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
PAGE = (1000, 700)  # pixels of a generated page (about half an A4 page at 150 dpi: quick to read)
SIZE = 30  # font size in pixels
LINE = 46  # line pitch in pixels; a paragraph break adds another


def cjk_font_path() -> Path | None:
    spec = importlib.util.find_spec("cvttf_NotoSansCJK_Regular")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "NotoSansCJKtc-Regular.otf"
    return path if path.is_file() else None


def font(*, cjk: bool = False, size: int = SIZE) -> Any:
    """A Pillow font: Noto Sans CJK (`cjk`; None when missing), else DejaVu Sans, else Pillow's default."""
    from PIL import ImageFont

    if cjk:
        path = cjk_font_path()
        return ImageFont.truetype(str(path), size) if path else None
    if DEJAVU.is_file():
        return ImageFont.truetype(str(DEJAVU), size)
    return ImageFont.load_default(size)


def render_page(text: str, *, cjk: bool = False) -> Any:
    """A white page (PIL image) with `text` in black: one line per line, a blank line as a paragraph gap."""
    from PIL import Image, ImageDraw

    face = font(cjk=cjk)
    if face is None:
        raise RuntimeError(NO_CJK_FONT)
    image = Image.new("L", PAGE, 255)
    draw = ImageDraw.Draw(image)
    y = 40
    for line in text.split("\n"):
        if line.strip():
            draw.text((40, y), line, font=face, fill=0)
        y += LINE
    return image


def write_image(path: Path, text: str, *, cjk: bool = False) -> Path:
    """One page as an image; the format follows the suffix (.png, .jpg, .bmp, .webp, .tif)."""
    render_page(text, cjk=cjk).save(path)
    return path


def write_tiff(path: Path, pages: Sequence[str], *, cjk: bool = False) -> Path:
    """A multi-page TIFF, one frame per text."""
    images = [render_page(text, cjk=cjk) for text in pages]
    images[0].save(path, save_all=True, append_images=images[1:], compression="tiff_deflate")
    return path


def write_image_pdf(path: Path, pages: Sequence[str], *, cjk: bool = False) -> Path:
    """A PDF of page images only (no text layer): what a scanner makes."""
    images = [render_page(text, cjk=cjk).convert("RGB") for text in pages]
    images[0].save(path, save_all=True, append_images=images[1:], resolution=150.0)
    return path


def write_mixed_pdf(path: Path, pages: Sequence[tuple[str, str]], tmp: Path) -> Path:
    """A PDF of ("text", words) pages with a text layer and ("scan", words) pages that are only a picture."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for i, (kind, words) in enumerate(pages):
        pdf.add_page()
        if kind == "text":
            pdf.multi_cell(0, 8, words)
        else:
            picture = write_image(tmp / f"scan-{i}.png", words)
            pdf.image(str(picture), x=10, y=10, w=190)
    pdf.output(str(path))
    return path
