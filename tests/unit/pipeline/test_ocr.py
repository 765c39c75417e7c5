"""OCR (parse/ocr.py): reading order and paragraphs on synthetic boxes, and the real engine on rendered pages."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ragd.config import ParseConfig
from ragd.pipeline.parse.ocr import OcrBox, PageReader, PageTimeout, page_from_boxes, read_image, unavailable
from tests.support import scangen

needs_engine = pytest.mark.skipif(
    importlib.util.find_spec("rapidocr_onnxruntime") is None,
    reason="the OCR engine (rapidocr-onnxruntime) is not installed",
)


def box(
    text: str, left: float, top: float, *, width: float = 100, height: float = 30, conf: float = 0.99
) -> OcrBox:
    return OcrBox(text, conf, left, top, left + width, top + height)


def test_boxes_are_read_line_by_line_left_to_right() -> None:
    # a slightly tilted line: its right box sits a few pixels higher than the left one; given out of order
    boxes = [box("world", 200, 48), box("second", 10, 100), box("hello", 10, 52), box("line", 200, 101)]
    page = page_from_boxes(boxes)
    assert page.lines == ("hello world", "second line")
    assert page.text == "hello world\nsecond line"


def test_a_large_gap_starts_a_paragraph() -> None:
    boxes = [box("one", 10, 0), box("two", 10, 40), box("three", 10, 140), box("four", 10, 180)]
    assert page_from_boxes(boxes).text == "one\ntwo\n\nthree\nfour"


def test_chinese_boxes_join_without_a_space_latin_with_one() -> None:
    boxes = [box("甲方：北京", 10, 0), box("科技有限公司", 120, 0), box("ACME", 240, 0), box("Ltd", 350, 0)]
    assert page_from_boxes(boxes).text == "甲方：北京科技有限公司 ACME Ltd"


def test_confidence_is_weighted_by_characters_and_empty_boxes_dropped() -> None:
    page = page_from_boxes(
        [box("aaaa", 0, 0, conf=1.0), box("b", 0, 50, conf=0.5), box("  ", 0, 90, conf=0.1)]
    )
    assert page.confidence == pytest.approx(0.9)
    assert page_from_boxes([]).text == "" and page_from_boxes([]).confidence == 0.0


@needs_engine
def test_unavailable_says_why() -> None:
    assert unavailable(ParseConfig(ocr=False)) == "[parse] ocr is off"
    assert unavailable(ParseConfig()) is None


@needs_engine
def test_real_read_of_a_rendered_english_page() -> None:
    image = scangen.render_page("The quarterly report\nlists every zebrafish\n\nA new paragraph here")
    page = read_image(image)
    assert page.text.splitlines()[:2] == ["The quarterly report", "lists every zebrafish"]
    assert "\n\nA new paragraph here" in page.text
    assert page.confidence > 0.9
    assert read_image(np.asarray(image)).text == page.text  # a numpy array (grey) reads the same


@needs_engine
def test_real_read_of_a_rendered_chinese_page() -> None:
    if scangen.cjk_font_path() is None:
        pytest.skip(scangen.NO_CJK_FONT)
    page = read_image(scangen.render_page("甲方：北京科技有限公司\n合同金额为壹万元整", cjk=True))
    assert page.lines == ("甲方：北京科技有限公司", "合同金额为壹万元整")
    assert page.confidence > 0.9


@needs_engine
def test_blank_page_reads_as_nothing() -> None:
    from PIL import Image

    assert read_image(Image.new("L", (400, 300), 255)).text == ""


@needs_engine
def test_page_reader_caps_pages_and_reports() -> None:
    reader = PageReader(ParseConfig(ocr_max_pages=1, ocr_min_confidence=0.999))
    image = scangen.render_page("a page of text")
    texts = [reader.read(n, image) if reader.wants(n) else "" for n in (1, 2)]
    assert texts[0] and texts[1] == ""
    report = reader.report()
    assert report is not None and report.pages == (1,) and report.low_pages == (1,)
    assert report.not_read == ((2, "over parse.ocr_max_pages (1)"),)
    assert report.to_json()["not_read"] == [{"page": 2, "reason": "over parse.ocr_max_pages (1)"}]


NATO = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
]
DENSE = "\n".join(f"line {word}: the quick brown fox jumps over the lazy dog" for word in NATO)


@needs_engine
def test_a_page_is_interrupted_at_its_timeout_and_the_engine_reads_the_next_page() -> None:
    # 0.05 s is far less than the detection model alone takes on a page: a page that ran to its end would return
    # its text (the timer's flag is only read as a reason when the engine raised), so PageTimeout proves that
    # onnxruntime stopped on the flag
    with pytest.raises(PageTimeout, match="ocr_page_timeout"):
        read_image(scangen.render_page(DENSE), timeout=0.05)
    assert "quick brown fox" in read_image(scangen.render_page(DENSE), timeout=600).text  # nothing left set


@needs_engine
def test_page_reader_lists_a_timed_out_or_failed_page_and_goes_on() -> None:
    reader = PageReader(ParseConfig(ocr_page_timeout=0.05))
    assert reader.wants(1) and reader.read(1, scangen.render_page(DENSE)) == ""
    assert reader.wants(2)  # a page over its time does not stop the file
    assert reader.read(2, np.zeros((0, 0, 3), dtype=np.uint8)) == ""  # the engine refuses an empty picture
    reader.options = ParseConfig()
    assert reader.wants(3) and "quick brown fox" in reader.read(3, scangen.render_page(DENSE))
    report = reader.report()
    assert report is not None and report.pages == (3,)
    assert report.not_read[0] == (1, "not read: stopped at parse.ocr_page_timeout (0.05 s)")
    assert report.not_read[1][0] == 2 and report.not_read[1][1].startswith("OCR failed:")


@needs_engine
def test_page_reader_starts_no_page_past_the_files_budget() -> None:
    reader = PageReader(ParseConfig(), file_budget=1e-6)
    assert not reader.wants(1)
    report = reader.report()
    assert report is not None and report.not_read == (
        (1, "not read: the file's time (limits.parse_timeout) would run out"),
    )


@needs_engine
def test_every_line_of_a_clean_page_is_read() -> None:
    # a direction classifier per line would turn some clean lines upside down (read as garbage): not used
    page = read_image(scangen.render_page(DENSE))
    assert len(page.lines) == 12
    for word, line in zip(NATO, page.lines, strict=True):
        assert line.startswith(f"line {word}") and line.endswith("lazy dog"), line


@needs_engine
def test_an_upside_down_page_is_read_turned() -> None:
    image = scangen.render_page("Quarterly invoice 4711\n\nPaid in full on the first of March.")
    page = read_image(image.rotate(180))
    assert page.lines[0].startswith("Quarterly invoice 4711") and page.confidence > 0.9, page
