"""Scans through the real commands: `ragd run --once` reads a scanned PDF and an image by OCR, `ragd search` finds
a word of the scanned page with its page cited, and the sidecar entry says what OCR did; the running agent reads
a scan dropped into its folder (in its parse workers) and `ragctl status` says OCR is on. With `[parse] ocr =
false` the image is SKIPPED with the reason."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ragd.pipeline import sidecar
from ragd.vocabulary import FileState
from tests.e2e.agent import ragctl, ragctl_json, running_agent
from tests.e2e.conftest import ragd, ragd_json
from tests.support import scangen

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("rapidocr_onnxruntime") is None,
    reason="the OCR engine (rapidocr-onnxruntime) is not installed",
)


def test_scanned_page_found_with_its_page(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    # a long first page: the scanned page's words start a chunk of their own, cited with page 2
    pages = [
        ("text", "A typed cover page about the annual report. " * 40),
        ("scan", "Minutes of the meeting\nquokkascan budget"),
    ]
    scangen.write_mixed_pdf(root / "report.pdf", pages, tmp_path)
    scangen.write_image(root / "whiteboard.png", "Sprint goals\nnumbatboard release")
    # what is tested is what OCR finds, not how fast: a loaded CI machine took longer than the default deadlines
    config.write_text(
        config.read_text() + "\n[parse]\nocr_page_timeout = 600\n\n[limits]\nparse_timeout = 1200\n"
    )
    ragd("run", "--once", str(root))

    hit = ragd_json("search", "quokkascan", "--mode", "keyword", "-k", "1")["results"][0]
    assert hit["path"] == str(root / "report.pdf") and hit["page"] == 2
    assert "[p. 2]" in ragd("search", "quokkascan", "--mode", "keyword", "-k", "1").stdout
    board = ragd_json("search", "numbatboard", "--mode", "keyword", "-k", "1")["results"][0]
    assert board["path"] == str(root / "whiteboard.png") and board["page"] == 1

    entry = sidecar.read_entry(sidecar.entry_path(root, "report.pdf"))
    assert entry is not None and entry.status == FileState.EMBEDDED and entry.parser == "pdfium+ocr"
    assert entry.ocr is not None and entry.ocr["pages"] == [2] and entry.ocr["confidence"] > 0.9

    out = ragd("status", str(root)).stdout
    assert f"EMBEDDED  {root / 'report.pdf'}  text from OCR on p. 2 (confidence " in out
    assert f"EMBEDDED  {root / 'whiteboard.png'}  text from OCR (confidence " in out
    states = {e["path"]: e for e in ragd_json("status", str(root))["entries"]}
    assert states[str(root / "report.pdf")]["ocr"]["pages"] == [2]


@pytest.mark.skipif(scangen.cjk_font_path() is None, reason=scangen.NO_CJK_FONT)
def test_chinese_scan_found_with_its_page(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    # about 390 characters a page: pages 1 and 2 fill one chunk, page 3 starts the next
    filler = "\n".join(["本合同由甲乙双方在平等自愿的基础上签订，双方应当遵守。"] * 13)
    page3 = "第三页：年度预算\n袋鼠公园的门票收入用于保护动物。\n" + filler
    scangen.write_image_pdf(root / "合同 扫描件.pdf", [filler, filler, page3], cjk=True)
    ragd("run", "--once", str(root))
    hit = ragd_json("search", "门票收入", "--mode", "keyword", "-k", "1")["results"][0]
    assert hit["path"] == str(root / "合同 扫描件.pdf") and hit["page"] == 3, hit
    assert "门票收入" in hit["content"]
    entry = sidecar.read_entry(sidecar.entry_path(root, "合同 扫描件.pdf"))
    assert entry is not None and entry.parser == "pdfium+ocr" and entry.ocr is not None
    assert entry.ocr["pages"] == [1, 2, 3] and entry.ocr["confidence"] > 0.9


def test_image_skipped_when_ocr_is_off(tmp_path: Path, config: Path) -> None:
    config.write_text(config.read_text() + "\n[parse]\nocr = false\n")
    root = tmp_path / "kb"
    root.mkdir()
    scangen.write_image(root / "whiteboard.png", "Sprint goals")
    ragd("run", "--once", str(root))
    entry = sidecar.read_entry(sidecar.entry_path(root, "whiteboard.png"))
    assert entry is not None and entry.status == FileState.SKIPPED
    assert entry.error is not None and entry.error["message"] == "OCR unavailable: [parse] ocr is off"
    # OCR turned on (as after an upgrade from a version without it): the skipped image is read at the next run
    config.write_text(config.read_text().replace("ocr = false", "ocr = true"))
    ragd("run", "--once", str(root))
    entry = sidecar.read_entry(sidecar.entry_path(root, "whiteboard.png"))
    assert entry is not None and entry.status == FileState.EMBEDDED and entry.parser == "ocr"


def test_running_agent_reads_a_scan_dropped_into_its_folder(tmp_path: Path, config: Path) -> None:
    config.write_text(config.read_text() + "\n[run]\nworkers = 1\n")  # parse workers: a process, not a thread
    root = tmp_path / "kb"
    root.mkdir()
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:
        status = ragctl_json("status", "--json")
        assert status["parse"]["ocr"] is True and status["parse"]["ocr_off"] is None
        assert "\nocr: on (Chinese + English; a page may take 30 s" in ragctl("status").stdout
        (root / "scans").mkdir()
        # full pages (about 600 characters each: two do not fit a chunk): each page is a chunk of its own
        full = "\n".join(f"Receipt line {i} for the office supplies order" for i in range(12))
        scangen.write_tiff(root / "scans" / "receipt.tif", [full, full, full + "\nTotal wombatfee paid"])
        ragctl("wait", "--timeout", "120")
        hit = ragctl_json("search", "wombatfee", "--mode", "keyword", "-k", "1")["results"][0]
        assert hit["path"] == str(root / "scans" / "receipt.tif") and hit["page"] == 3
        entry = sidecar.read_entry(sidecar.entry_path(root / "scans", "receipt.tif"))
        assert entry is not None and entry.parser == "ocr" and entry.ocr is not None
        assert entry.ocr["pages"] == [1, 2, 3], entry.ocr
        assert "Traceback" not in agent.log()
