"""OCR of page images with rapidocr (PP-OCRv4, Chinese + English, its models inside its wheel: fully offline).

`read_image(image)` reads one picture into an `OcrPage`: the recognised boxes put in reading order (boxes whose
vertical centres are close form a line, read left to right; lines top to bottom) and the lines joined into
paragraphs (a blank line where the gap above a line is large, else "\\n"). `PageReader` reads the pages of one file
under `[parse]`'s limits and makes its `OcrReport`.

The engine is created on first use, once per process (about 0.6 s and 150 MB; a full page at 200 dpi peaks near
900 MB resident). It runs in the parse workers (pipeline/workers.py) with one thread each: the workers already use
every core. A page is interrupted when it passes `ocr_page_timeout`: the engine's onnxruntime sessions run with
the page's `RunOptions`, whose `terminate` flag a timer sets at the deadline (onnxruntime then stops the model
between two of its operators, and no later model call of that page starts); the page is listed as not read and
the next page is read. The worker's per-file deadline (`limits.parse_timeout`, enforced by the pool) bounds the
whole file.
"""

from __future__ import annotations

import importlib.util
import logging
import statistics
import sys
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import ParseConfig
from ...model import OcrReport
from . import ocr_probe

log = logging.getLogger(__name__)

ENGINE_MODULE = ocr_probe.ENGINE_MODULE
SAME_LINE = 0.5  # boxes whose vertical centres differ by less than this share of their height are one line
PARAGRAPH_GAP = 0.8  # a gap above a line larger than this share of the typical line height starts a paragraph
UPSIDE_DOWN_BELOW = 0.6  # a page read with a lower mean confidence is tried turned half a turn (read_image)
_ENGINE: Any = None
# _engine_import_error's answer: "" the engine imports, else why not; None: not asked yet
_IMPORT_ERROR: str | None = None
_ENGINE_LOCK = threading.Lock()  # one engine per process, created once; onnxruntime sessions are thread-safe
_PAGE = threading.local()  # .options: the RunOptions of the page this thread is reading (None: no time limit)


class PageTimeout(Exception):
    """A page was stopped at `ocr_page_timeout`."""


@dataclass(frozen=True)
class OcrBox:
    """One recognised piece of text and where it is (pixels: left, top, right, bottom)."""

    text: str
    confidence: float
    left: float
    top: float
    right: float
    bottom: float

    @property
    def centre(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 1.0)


@dataclass(frozen=True)
class OcrPage:
    """What OCR read on one page: `text` in reading order, its mean confidence (0 when empty), the lines."""

    text: str
    confidence: float
    lines: tuple[str, ...]


def unavailable(options: ParseConfig) -> str | None:
    """Why OCR cannot run here (off in the config, the engine not installed, or installed but failing to load),
    or None when it can."""
    if not options.ocr:
        return "[parse] ocr is off"
    return _engine_import_error()


def probe_ahead(options: ParseConfig) -> None:
    """Start finding out, in a thread, whether the engine loads: the child process takes about 1.5 s, which the
    first caller of `unavailable` (a run's skip policy, right after start-up) would otherwise wait for."""
    if options.ocr and _IMPORT_ERROR is None:
        threading.Thread(target=_engine_import_error, name="ocr-probe", daemon=True).start()


def _engine_import_error() -> str | None:
    """Whether the engine's modules import, found out once per process: an installed engine can still fail to load,
    e.g. OpenCV's GUI build on a server without libxcb or libGL (ImportError: libxcb.so.1: cannot open shared object
    file), and every image would otherwise read as "no text". Where the engine is not imported already (the agent's
    own process, which asks for its status), the import is tried in a child process (ocr_probe.py): it costs about
    1.5 s and 55 MB, which the agent does not keep."""
    global _IMPORT_ERROR
    with _ENGINE_LOCK:
        if _IMPORT_ERROR is None:
            if importlib.util.find_spec(ENGINE_MODULE) is None:
                _IMPORT_ERROR = f"the OCR engine ({ENGINE_MODULE}) is not installed"
            elif ENGINE_MODULE in sys.modules:
                _IMPORT_ERROR = ""
            else:
                failure = ocr_probe.run()
                _IMPORT_ERROR = f"the OCR engine ({ENGINE_MODULE}) cannot load: {failure}" if failure else ""
        return _IMPORT_ERROR or None


def engine() -> Any:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            from rapidocr_onnxruntime import RapidOCR

            started = time.monotonic()
            ocr = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
            for part in (ocr.text_det.infer, ocr.text_rec.session):  # (its direction classifier is not used)
                part.session = _TimedSession(part.session)
            _ENGINE = ocr
            log.debug("OCR engine ready in %.2f s", time.monotonic() - started)
        return _ENGINE


class _TimedSession:
    """An onnxruntime InferenceSession whose every run uses the current page's RunOptions (see `read_image`)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> Any:
        options = getattr(_PAGE, "options", None)
        if options is None:
            return self._session.run(output_names, input_feed, run_options)
        if options.terminate:
            raise PageTimeout("the page's time ran out between two model calls")
        return self._session.run(output_names, input_feed, options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def read_image(image: Any, *, timeout: float | None = None) -> OcrPage:
    """OCR one picture (a PIL image or an RGB/grey numpy array) into text in reading order.

    A page read with a mean confidence below UPSIDE_DOWN_BELOW is read again turned half a turn, and the better
    reading kept (an upside-down scan reads as confident-looking garbage of about 0.45). `timeout` (seconds, the
    whole page, both readings): past it the engine is stopped and PageTimeout raised."""
    array = _as_bgr(image)
    if timeout is None:
        return _read_upright(array)
    import onnxruntime

    options = onnxruntime.RunOptions()
    timer = threading.Timer(timeout, setattr, (options, "terminate", True))
    timer.daemon = True
    _PAGE.options = options
    timer.start()
    try:
        return _read_upright(array)
    except Exception as exc:  # rapidocr wraps onnxruntime's "terminate flag" error in its own
        if options.terminate:
            raise PageTimeout(f"over parse.ocr_page_timeout ({timeout:g} s)") from exc
        raise
    finally:
        timer.cancel()
        _PAGE.options = None


def _read_upright(array: np.ndarray) -> OcrPage:
    page = _read(array)
    if page.text and page.confidence < UPSIDE_DOWN_BELOW:
        turned = _read(np.ascontiguousarray(array[::-1, ::-1]))
        if turned.confidence > page.confidence:
            log.debug("OCR: the page reads better upside down (confidence %.3f, not %.3f)", turned.confidence,
                      page.confidence)  # fmt: skip
            return turned
    return page


def _read(array: np.ndarray) -> OcrPage:
    # No direction classifier: it judges each line alone and turns about one clean line in ten upside down,
    # which then reads as garbage (bench/bench_ocr.py: an English page's CER 12.4 % with it, 0.6 % without);
    # a page that is all upside down is caught as a whole by _read_upright instead
    result, _ = engine()(array, use_cls=False)
    return page_from_boxes([box_from_raw(raw) for raw in result or ()])


def box_from_raw(raw: Any) -> OcrBox:
    """rapidocr's `[4 corner points, text, confidence]` as an OcrBox (its bounding rectangle)."""
    points, text, confidence = raw
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    return OcrBox(str(text), float(confidence), min(xs), min(ys), max(xs), max(ys))


def page_from_boxes(boxes: list[OcrBox]) -> OcrPage:
    boxes = [b for b in boxes if b.text.strip()]
    if not boxes:
        return OcrPage("", 0.0, ())
    lines = reading_order(boxes)
    texts = tuple(join_line(line) for line in lines)
    confidence = sum(b.confidence * len(b.text) for b in boxes) / sum(len(b.text) for b in boxes)
    return OcrPage(join_paragraphs(lines, texts), round(confidence, 4), texts)


def reading_order(boxes: list[OcrBox]) -> list[list[OcrBox]]:
    """Boxes grouped into lines (close vertical centres), lines top to bottom, boxes left to right."""
    lines: list[list[OcrBox]] = []
    for box in sorted(boxes, key=lambda b: (b.centre, b.left)):
        if lines:
            line = lines[-1]
            centre = statistics.fmean(b.centre for b in line)
            height = min(box.height, statistics.fmean(b.height for b in line))
            if abs(box.centre - centre) < SAME_LINE * height:
                line.append(box)
                continue
        lines.append([box])
    return [sorted(line, key=lambda b: b.left) for line in lines]


def join_line(line: list[OcrBox]) -> str:
    """The boxes of one line: a space between them, except between two CJK characters."""
    text = line[0].text.strip()
    for box in line[1:]:
        nxt = box.text.strip()
        text += nxt if _cjk(text[-1]) and _cjk(nxt[0]) else " " + nxt
    return text


def join_paragraphs(lines: list[list[OcrBox]], texts: tuple[str, ...]) -> str:
    """Lines joined by "\\n", with a blank line where the gap above a line is large (a new paragraph)."""
    typical = statistics.median(max(b.height for b in line) for line in lines)
    out = [texts[0]]
    for above, line, text in zip(lines, lines[1:], texts[1:], strict=False):
        gap = min(b.top for b in line) - max(b.bottom for b in above)
        out.append(("\n\n" if gap > PARAGRAPH_GAP * typical else "\n") + text)
    return "".join(out)


def _cjk(char: str) -> bool:
    name = unicodedata.name(char, "")
    return name.startswith(("CJK ", "HIRAGANA", "KATAKANA", "HANGUL", "FULLWIDTH", "IDEOGRAPHIC"))


def _as_bgr(image: Any) -> np.ndarray:
    if not isinstance(image, np.ndarray):
        image = np.asarray(image.convert("RGB"))
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[:, :, 2::-1])  # rapidocr takes OpenCV's BGR order


@dataclass
class PageReader:
    """Reads the pages of one file under `[parse]`'s limits and keeps the account for its OcrReport.

    `file_budget` (seconds; None: none) is the share of `limits.parse_timeout` OCR may use: no page is started
    that would, at the pace of the slowest page so far, end past it. The worker kills a file past its deadline
    and all of its text is lost; stopping early keeps the text pages and the pages read so far."""

    options: ParseConfig
    file_budget: float | None = None
    pages: dict[int, OcrPage] = field(default_factory=dict)
    not_read: list[tuple[int, str]] = field(default_factory=list)
    _started: float = field(default_factory=time.monotonic)
    _slowest: float = 0.0

    def wants(self, number: int) -> bool:
        """Whether page `number` may still be read; if not, it is listed with the reason."""
        limit = self.options.ocr_max_pages
        reason = f"over parse.ocr_max_pages ({limit})" if len(self.pages) >= limit else None
        if reason is None and self._out_of_time():
            reason = "not read: the file's time (limits.parse_timeout) would run out"
        if reason is not None:
            self.not_read.append((number, reason))
        return reason is None

    def _out_of_time(self) -> bool:
        if self.file_budget is None:
            return False
        return time.monotonic() - self._started + self._slowest > self.file_budget

    def failed(self, number: int, reason: str) -> None:
        self.not_read.append((number, reason))

    def read(self, number: int, image: Any) -> str:
        """OCR page `number` (the caller asked `wants` first): its text, or "" when the engine failed on it."""
        started = time.monotonic()
        timeout = self.options.ocr_page_timeout
        try:
            page = read_image(image, timeout=timeout)
        except PageTimeout:
            self._slowest = max(self._slowest, time.monotonic() - started)
            self.failed(number, f"not read: stopped at parse.ocr_page_timeout ({timeout:g} s)")
            return ""
        except MemoryError:
            raise  # the worker reports it against run.worker_memory
        except Exception as exc:  # the engine's own errors (onnxruntime, OpenCV) fail this page only
            why = "out of memory: raise run.worker_memory" if "bad_alloc" in str(exc) else str(exc)
            self.failed(number, f"OCR failed: {type(exc).__name__}: {why}")
            return ""
        took = time.monotonic() - started
        self._slowest = max(self._slowest, took)
        log.debug("OCR page %d: %d characters, confidence %.3f, %.2f s", number, len(page.text),
                  page.confidence, took)  # fmt: skip
        self.pages[number] = page
        return page.text

    def report(self) -> OcrReport | None:
        """What OCR did on this file, or None when it was never asked to read a page."""
        if not self.pages and not self.not_read:
            return None
        read = {n: p for n, p in self.pages.items() if p.text}
        weights = {n: len(p.text) for n, p in read.items()}
        mean = (
            sum(read[n].confidence * w for n, w in weights.items()) / sum(weights.values()) if read else 0.0
        )
        low = tuple(n for n, p in read.items() if p.confidence < self.options.ocr_min_confidence)
        return OcrReport(pages=tuple(sorted(read)), confidence=round(mean, 4), low_pages=low,
                         not_read=tuple(sorted(self.not_read)))  # fmt: skip
