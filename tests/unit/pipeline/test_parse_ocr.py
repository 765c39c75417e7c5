"""The parse stage on generated scans (tests/support/scangen.py): images, multi-page TIFF, image-only and mixed
PDFs read by OCR with their page numbers, and the clear SKIPPED reasons when OCR is off."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragd.config import LimitsConfig, ParseConfig
from ragd.errors import FileSkipped, ParseError
from ragd.pipeline.parse import IMAGE_EXTENSIONS, SUPPORTED_EXTENSIONS, parse
from tests.support import docgen, scangen

LIMITS = LimitsConfig()
OFF = ParseConfig(ocr=False)
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("rapidocr_onnxruntime") is None,
    reason="the OCR engine (rapidocr-onnxruntime) is not installed",
)


def test_image_extensions_are_supported() -> None:
    assert {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"} == IMAGE_EXTENSIONS
    assert IMAGE_EXTENSIONS <= SUPPORTED_EXTENSIONS


@pytest.mark.parametrize("suffix", [".png", ".jpg", ".bmp", ".webp", ".TIFF"])
def test_image_becomes_one_page(tmp_path: Path, suffix: str) -> None:
    doc = parse(
        scangen.write_image(tmp_path / f"scan{suffix}", "Meeting notes\nbudget for the wombat"), LIMITS
    )
    assert doc.parser == "ocr" and not doc.is_markdown
    assert doc.text == "Meeting notes\nbudget for the wombat"
    assert [p.number for p in doc.pages] == [1]
    assert doc.ocr is not None and doc.ocr.pages == (1,) and doc.ocr.confidence > 0.9


def test_multi_page_tiff_gives_every_frame_a_page(tmp_path: Path) -> None:
    doc = parse(scangen.write_tiff(tmp_path / "fax.tif", ["first page alpha", "second page bravo"]), LIMITS)
    assert doc.text == "first page alpha\n\nsecond page bravo"
    assert doc.page_at(doc.text.index("bravo")) == 2 and doc.page_at(0) == 1


def test_chinese_image(tmp_path: Path) -> None:
    if scangen.cjk_font_path() is None:
        pytest.skip(scangen.NO_CJK_FONT)
    doc = parse(
        scangen.write_image(tmp_path / "合同.png", "合同编号：第十六号\n\n甲方：北京科技有限公司", cjk=True),
        LIMITS,
    )
    assert doc.text == "合同编号：第十六号\n\n甲方：北京科技有限公司"


def test_image_with_ocr_off_is_skipped_with_the_reason(tmp_path: Path) -> None:
    path = scangen.write_image(tmp_path / "scan.png", "some text")
    with pytest.raises(FileSkipped) as err:
        parse(path, LIMITS, OFF)
    assert err.value.message == "OCR unavailable: [parse] ocr is off"
    assert "ocr = true" in err.value.hint


# A process in which the engine is installed but cv2 does not load, as opencv-python's GUI build on a server
# without libxcb: a `cv2` package first on the path whose import fails as that one's does.
_CANNOT_LOAD = """
import json, sys
from pathlib import Path
from ragd.config import LimitsConfig
from ragd.errors import FileSkipped
from ragd.pipeline.parse import parse
from ragd.pipeline.parse.ocr import unavailable
from ragd.config import ParseConfig
out = {"unavailable": unavailable(ParseConfig())}
for name in sys.argv[1:]:
    try:
        parse(Path(name), LimitsConfig())
        out[name] = "parsed"
    except FileSkipped as exc:
        out[name] = exc.message
print(json.dumps(out))
"""


def test_an_engine_that_cannot_load_is_unavailable_with_its_reason(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "cv2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        'raise ImportError("libxcb.so.1: cannot open shared object file: No such file or directory")\n'
    )
    image = scangen.write_image(tmp_path / "scan.png", "Meeting notes")
    scan = scangen.write_image_pdf(tmp_path / "scan.pdf", ["scanned page one"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), *sys.path])}
    done = subprocess.run([sys.executable, "-c", _CANNOT_LOAD, str(image), str(scan)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    out = json.loads(done.stdout.splitlines()[-1])
    why = "the OCR engine (rapidocr_onnxruntime) cannot load: ImportError: libxcb.so.1: cannot open shared object file"
    assert out["unavailable"].startswith(why), out
    assert out[str(image)].startswith(f"OCR unavailable: {why}"), out
    assert out[str(scan)].startswith(f"no extractable text (scanned PDF? OCR unavailable: {why}"), out


def test_blank_image_is_skipped(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("L", (300, 200), 255).save(tmp_path / "blank.png")
    with pytest.raises(FileSkipped, match="OCR found none in the image"):
        parse(tmp_path / "blank.png", LIMITS)


def test_not_an_image_is_a_parse_error(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="unreadable image"):
        parse(docgen.write_bytes(tmp_path / "photo.JPG", b"data" * 100), LIMITS)


def test_scanned_pdf_is_read_page_by_page(tmp_path: Path) -> None:
    path = scangen.write_image_pdf(tmp_path / "scan.pdf", ["scanned page one", "the walrus is on page two"])
    doc = parse(path, LIMITS)
    assert doc.parser == "pdfium+ocr"
    assert doc.text.startswith("scanned page one\n\nthe walrus")  # OCR may drop a space between short words
    assert doc.page_at(doc.text.index("walrus")) == 2
    assert doc.ocr is not None and doc.ocr.pages == (1, 2) and doc.ocr.not_read == ()


def test_mixed_pdf_keeps_its_text_page_and_reads_the_scan(tmp_path: Path) -> None:
    pages = [("text", "typed page kangaroo"), ("scan", "pictured page platypus"), ("text", "closing words")]
    doc = parse(scangen.write_mixed_pdf(tmp_path / "mixed.pdf", pages, tmp_path), LIMITS)
    assert doc.text == "typed page kangaroo\n\npictured page platypus\n\nclosing words"
    assert [doc.page_at(doc.text.index(w)) for w in ("kangaroo", "platypus", "closing")] == [1, 2, 3]
    assert doc.ocr is not None and doc.ocr.pages == (2,)


def test_pages_past_the_cap_are_listed_and_the_rest_indexed(tmp_path: Path) -> None:
    path = scangen.write_image_pdf(
        tmp_path / "long.pdf", ["page one text", "page two text", "page three text"]
    )
    doc = parse(path, LIMITS, ParseConfig(ocr_max_pages=1))
    assert doc.text.startswith("page one text") and "three" not in doc.text
    assert [p.number for p in doc.pages] == [1, 2, 3]  # the unread pages keep their numbers
    assert doc.ocr is not None and [n for n, _ in doc.ocr.not_read] == [2, 3]
    assert doc.ocr.not_read[0][1] == "over parse.ocr_max_pages (1)"


def test_mixed_pdf_with_ocr_off_keeps_only_its_text(tmp_path: Path) -> None:
    pages = [("text", "typed page kangaroo"), ("scan", "pictured page platypus")]
    doc = parse(scangen.write_mixed_pdf(tmp_path / "mixed.pdf", pages, tmp_path), LIMITS, OFF)
    assert doc.parser == "pdfium" and doc.ocr is None and "platypus" not in doc.text


def test_scanned_pdf_without_any_text_is_skipped(tmp_path: Path) -> None:
    with pytest.raises(FileSkipped, match="no text layer, and OCR found no text on its pages"):
        parse(docgen.make_scanned_pdf(tmp_path / "shapes.pdf"), LIMITS)


def test_ocr_stops_before_the_files_deadline_and_keeps_the_rest(tmp_path: Path) -> None:
    pages = [("text", "typed page kangaroo"), ("scan", "pictured page platypus")]
    doc = parse(
        scangen.write_mixed_pdf(tmp_path / "mixed.pdf", pages, tmp_path), LimitsConfig(parse_timeout=1e-6)
    )
    assert "kangaroo" in doc.text and "platypus" not in doc.text
    assert (
        doc.ocr is not None
        and doc.ocr.not_read[0][0] == 2
        and "limits.parse_timeout" in doc.ocr.not_read[0][1]
    )
