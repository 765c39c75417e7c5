"""OCR: pages per second and character error rate on generated Chinese and English scans.

    python -m bench.bench_ocr [--cache ~/.cache/ragd-devset] [--pages 6] [--seed 3]

The text is real: paragraphs of the development set's man pages (bench/devset: Debian's Simplified Chinese
manpages-zh and the English man pages; the corpus is built there first if it is not yet, as bench_eval does).
A Chinese page takes paragraphs of `zh/man1` in which at least a third of the characters are Chinese (so it
holds the option names and English words those pages have), an English page paragraphs of `en/man1` with none.
Each page is an A4 sheet at 200 dpi (1654 x 2339 pixels, what ragd renders a scanned PDF page at), 11 pt type
(Noto Sans CJK for Chinese, DejaVu Sans for English), 1.5 line spacing, lines wrapped to the margins, a blank
line between paragraphs: about 45 dense lines. Two conditions of the same pages:

- clean: the rendered page as it is (a born-digital page printed to an image);
- scanned: rotated 0.6 degrees, blurred (Gaussian, radius 0.7), with grain (Gaussian noise, sigma 12) and saved
  as a JPEG at quality 60 (a flatbed scan or a phone photo of a page, flattened).

Measured, through ragd's own code (`ragd.pipeline.parse.ocr.read_image`: the engine as a worker runs it, one
thread, and the reading order and paragraph joining ragd applies):
- seconds per page (wall and this process's CPU), pages per second, characters per second read;
- character error rate: the Levenshtein distance (rapidfuzz) between what was read and the page's text over the
  text's length, all whitespace removed from both first (line breaks and the spaces between words or boxes do not
  count; every other character does, punctuation included): the mean of the pages and the pooled rate (all
  errors over all characters);
- the mean recognition confidence ragd records, and how many pages fall below `ocr_min_confidence` (0.8);
- and the whole parse of a scanned PDF of the clean pages (`ragd.pipeline.parse.parse`: pdfium renders each page,
  then OCR), pages per second end to end.
The engine is loaded (and its first page read) before any timing. The process's peak RSS is printed at the end.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import random
import re
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidfuzz.distance import Levenshtein

from bench.bench_eval import corpus
from ragd.config import LimitsConfig, ParseConfig
from ragd.pipeline.parse import parse
from ragd.pipeline.parse.ocr import engine, read_image

A4 = (1654, 2339)  # pixels at 200 dpi
MARGIN = 150
SIZE = 31  # 11 pt at 200 dpi
PITCH = 46  # 1.5 lines
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
TOKEN = re.compile(r"[\u3000-\u9fff\uf900-\uffef]|[^\s\u3000-\u9fff\uf900-\uffef]+\s*|\s+")
MIN_CONFIDENCE = ParseConfig().ocr_min_confidence
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
NO_CJK_FONT = "the CJK font is not installed: pip install cvttf-notosanscjk-regular (the dev extra)"


def font(language: str) -> Any:
    """Noto Sans CJK (the dev extra's cvttf-notosanscjk-regular; None without it) or DejaVu Sans (else Pillow's)."""
    from PIL import ImageFont

    if language == "zh":
        spec = importlib.util.find_spec("cvttf_NotoSansCJK_Regular")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / "NotoSansCJKtc-Regular.otf"
        return ImageFont.truetype(str(path), SIZE) if path.is_file() else None
    return ImageFont.truetype(str(DEJAVU), SIZE) if DEJAVU.is_file() else ImageFont.load_default(SIZE)


@dataclass
class Read:
    language: str
    condition: str
    chars: int
    wall: float
    cpu: float
    errors: int
    confidence: float

    @property
    def cer(self) -> float:
        return self.errors / max(self.chars, 1)


def paragraphs(root: Path, language: str, seed: int) -> list[str]:
    """Paragraphs (whitespace collapsed) of the man pages under root/<language>/man1, in a seeded order."""
    out: list[str] = []
    for page in sorted((root / language / "man1").glob("*.md")):
        for block in page.read_text(encoding="utf-8").split("\n\n"):
            text = " ".join(block.replace("#", " ").split())
            if len(text) < 20:
                continue
            share = len(CJK.findall(text)) / len(text)
            if (language == "zh" and share >= 1 / 3) or (language == "en" and share == 0):
                out.append(text)
    random.Random(seed).shuffle(out)
    return out


def wrap(text: str, face: Any, width: int) -> list[str]:
    """Greedy wrapping: a CJK character or a word (with its trailing spaces) at a time."""
    lines, line = [], ""
    for token in TOKEN.findall(text):
        if line and face.getlength((line + token).rstrip()) > width:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines


def pages(source: list[str], face: Any, count: int) -> list[list[str]]:
    """`count` pages of lines ("" between paragraphs), filled from `source` in order."""
    fit = (A4[1] - 2 * MARGIN) // PITCH
    out: list[list[str]] = []
    it = iter(source)
    while len(out) < count:
        page: list[str] = []
        while len(page) < fit:
            lines = wrap(next(it), face, A4[0] - 2 * MARGIN)
            if len(page) + len(lines) > fit and page:
                break
            page += ([""] if page else []) + lines[: fit - len(page) - (1 if page else 0)]
        out.append(page)
    return out


def render(lines: list[str], face: Any) -> Any:
    from PIL import Image, ImageDraw

    image = Image.new("L", A4, 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((MARGIN, MARGIN + i * PITCH), line, font=face, fill=0)
    return image


def scanned(image: Any, seed: int, tmp: Path) -> Any:
    """The page as a flatbed scan: a slight rotation, blur, grain, JPEG."""
    import numpy as np
    from PIL import Image, ImageFilter

    page = image.rotate(0.6, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255)
    page = page.filter(ImageFilter.GaussianBlur(0.7))
    noise = np.random.default_rng(seed).normal(0, 12, (A4[1], A4[0]))
    page = Image.fromarray(np.clip(np.asarray(page, dtype=np.float64) + noise, 0, 255).astype(np.uint8))
    path = tmp / f"scan-{seed}.jpg"
    page.save(path, quality=60)
    return Image.open(path)


def squeeze(text: str) -> str:
    return "".join(text.split())


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def measure(language: str, condition: str, image: Any, truth: str) -> Read:
    t0, c0 = time.perf_counter(), cpu()
    page = read_image(image)
    wall, used = time.perf_counter() - t0, cpu() - c0
    want, got = squeeze(truth), squeeze(page.text)
    return Read(language, condition, len(want), wall, used, Levenshtein.distance(got, want), page.confidence)


def row(reads: list[Read]) -> str:
    n = len(reads)
    wall = sum(r.wall for r in reads)
    chars = sum(r.chars for r in reads)
    pooled = sum(r.errors for r in reads) / max(chars, 1)
    low = sum(r.confidence < MIN_CONFIDENCE for r in reads)
    return (
        f"| {reads[0].language} | {reads[0].condition} | {n} | {chars / n:,.0f} | {wall / n:.2f} "
        f"({sum(r.cpu for r in reads) / n:.2f}) | {n / wall:.2f} | {chars / wall:,.0f} | "
        f"{100 * statistics.fmean(r.cer for r in reads):.2f} % | {100 * pooled:.2f} % | "
        f"{100 * max(r.cer for r in reads):.2f} % | {statistics.fmean(r.confidence for r in reads):.3f} | {low} |"
    )


def pdf_rate(images: list[Any], tmp: Path, name: str) -> tuple[int, float]:
    """(pages read, pages/s) of ragd's whole parse of a scanned PDF of `images` (no text layer)."""
    path = tmp / f"{name}.pdf"
    rgb = [i.convert("RGB") for i in images]
    rgb[0].save(path, save_all=True, append_images=rgb[1:], resolution=200.0)
    options = ParseConfig(ocr_page_timeout=3600, ocr_max_pages=10_000)
    t0 = time.perf_counter()
    doc = parse(path, LimitsConfig(parse_timeout=86_400), options)
    wall = time.perf_counter() - t0
    read = len(doc.ocr.pages) if doc.ocr else 0
    return read, read / wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("~/.cache/ragd-devset"), help="the devset's corpus")
    ap.add_argument("--pages", type=int, default=6, help="pages per language (each read clean and scanned)")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    root, _ = corpus(args.cache.expanduser(), False)
    faces = {"zh": font("zh"), "en": font("en")}
    if faces["zh"] is None:
        print(NO_CJK_FONT, file=sys.stderr)
        return 2
    print(
        f"command: python -m bench.bench_ocr {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip()
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f} before")  # fmt: skip
    t0 = time.perf_counter()
    engine()
    read_image(render(["warm-up 预热"], faces["zh"]))
    print(f"engine loaded and warmed up in {time.perf_counter() - t0:.2f} s")

    reads: list[Read] = []
    rates: dict[str, tuple[int, float]] = {}
    with tempfile.TemporaryDirectory(prefix="ragd-bench-ocr-") as tmp_name:
        tmp = Path(tmp_name)
        for language in ("zh", "en"):
            face = faces[language]
            sheets = pages(paragraphs(root, language, args.seed), face, args.pages)
            images = [render(lines, face) for lines in sheets]
            for i, (lines, image) in enumerate(zip(sheets, images, strict=True)):
                truth = "\n".join(lines)
                reads.append(measure(language, "clean", image, truth))
                reads.append(measure(language, "scanned", scanned(image, args.seed * 1000 + i, tmp), truth))
                print(f"  {language} page {i + 1}: CER clean {100 * reads[-2].cer:.2f} %, "
                      f"scanned {100 * reads[-1].cer:.2f} %", flush=True)  # fmt: skip
            rates[language] = pdf_rate(images, tmp, language)

    print()
    print("| language | condition | pages | characters per page | s per page (CPU) | pages/s | characters/s | "
          "CER mean | CER pooled | CER worst page | mean confidence | pages below 0.8 |")  # fmt: skip
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for language in ("zh", "en"):
        for condition in ("clean", "scanned"):
            print(row([r for r in reads if r.language == language and r.condition == condition]))
    print()
    for language, (read, rate) in rates.items():
        print(
            f"whole parse of a scanned PDF ({language}, {read} pages, pdfium at 200 dpi + OCR): {rate:.2f} pages/s"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MiB; load average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
