"""Plain-text helpers of the parse stage: decoding, garbage detection, newline normalisation, titles."""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

from ...errors import ParseError
from ..structure import clean_heading

# Checked longest first: the UTF-32-LE mark begins with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# C0/C1 control characters that never occur in real text (tab, newlines, form feed and ESC are allowed),
# plus U+FFFD, the mark of text that was already mis-decoded.
_GARBAGE = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f\ufffd]")
MAX_GARBAGE_RATIO = 0.02
# UTF-8 with damage (a stray byte, a last character cut off): at most this share of its non-ASCII bytes undecodable.
# Text in another encoding read as UTF-8 has about half (GBK, Big5, Shift-JIS, EUC-JP) or all (cp1252) of them so.
MAX_DAMAGE_RATIO = 0.05
_ESCAPED = re.compile("[\udc80-\udcff]+")  # the bytes surrogateescape could not decode
_ASCII = bytes(range(0x80))
_BINARY_HINT = "the file looks binary; give it its real extension or add it to ignore.patterns"

_TITLE_SCAN_LINES = 1000
_MAX_TITLE = 200
_WRAPPERS = ('"', "'", "**", "__", "`")  # stripped when they wrap a whole title
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)")
_ORG_TITLE = re.compile(r"^#\+title:[ \t]*(.+)$", re.IGNORECASE)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+)$")
_NOT_SETEXT_TEXT = re.compile(r"^\s*(?:[-*+>|]|\d+[.)])\s")


class Decoded(NamedTuple):
    """A text file's text, its encoding (None for UTF-8) and how many undecodable bytes were replaced."""

    text: str
    encoding: str | None = None
    replaced: int = 0


def decode(data: bytes) -> Decoded:
    """Bytes of a text file -> its text.

    A byte-order mark decides first; then strict UTF-8; then UTF-8 with a few undecodable bytes (each run of them
    becomes U+FFFD and `replaced` counts them); then charset-normalizer's detection (GBK/GB18030, Big5, Shift-JIS,
    cp1252, ...). Raises ParseError for NUL bytes, undecodable bytes or text that is mostly control characters:
    garbage is never returned as text.
    """
    with_bom = _decode_bom(data)
    if with_bom is not None:
        return with_bom
    if b"\x00" in data:
        raise ParseError("binary content: NUL bytes in a text file", _BINARY_HINT)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        damaged = damaged_utf8(data)
        if damaged is not None:
            return damaged
        text, encoding = _detect(data)
        check_clean(text)
        return Decoded(text, encoding)
    check_clean(text)
    return Decoded(text)


def replaced_warning(decoded: Decoded) -> str | None:
    """The entry's warning for a text read with undecodable bytes replaced (None when none were)."""
    n = decoded.replaced
    return f"{n} undecodable byte{'s' if n != 1 else ''} replaced (U+FFFD)" if n else None


def damaged_utf8(data: bytes) -> Decoded | None:
    """UTF-8 text with a few undecodable bytes: its text with each run of them as U+FFFD, or None when `data` is not
    mostly valid UTF-8 (binary, or text in another encoding). Valid multi-byte sequences must be found, and the
    undecodable bytes be at most MAX_DAMAGE_RATIO of the non-ASCII ones, or only a last character cut off.
    Raises ParseError (check_clean) when the decodable part is mostly control characters."""
    escaped = data.decode("utf-8", "surrogateescape")
    replaced = sum(len(run) for run in _ESCAPED.findall(escaped))
    high = len(data.translate(None, _ASCII))  # the non-ASCII bytes
    if replaced == 0 or replaced == high:
        return None
    if replaced > MAX_DAMAGE_RATIO * high and not _cut_short(data):
        return None
    check_clean(_ESCAPED.sub("", escaped))
    return Decoded(_ESCAPED.sub("\ufffd", escaped), None, replaced)


def _cut_short(data: bytes) -> bool:
    """Valid UTF-8 but for its last character, cut off (a truncated copy or download)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _decode_bom(data: bytes) -> Decoded | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as exc:
                damaged = damaged_utf8(data[len(bom) :]) if encoding == "utf-8-sig" else None
                if damaged is not None:
                    return damaged
                raise ParseError(
                    f"undecodable text: starts with a {encoding} byte-order mark but is not "
                    f"valid {encoding} ({exc.reason})",
                    _BINARY_HINT,
                ) from exc
            check_clean(text)
            return Decoded(text, None if encoding == "utf-8-sig" else encoding)
    return None


def _detect(data: bytes) -> tuple[str, str]:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise ParseError("undecodable text: not UTF-8 and no known encoding fits", _BINARY_HINT)
    return str(best), best.encoding


def check_clean(text: str) -> None:
    """Raise ParseError when more than 2% of `text` is control characters or U+FFFD."""
    if not text:
        return
    bad = sum(1 for _ in _GARBAGE.finditer(text))
    if bad > MAX_GARBAGE_RATIO * len(text):
        raise ParseError(
            f"binary content: {100 * bad / len(text):.0f}% of the characters are control characters",
            _BINARY_HINT,
        )


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def clean_title(value: str | None) -> str | None:
    """Collapse whitespace, drop quotes or emphasis marks that wrap the whole title, cap the length."""
    if value is None:
        return None
    title = " ".join(value.split())
    for mark in _WRAPPERS:
        if len(title) > 2 * len(mark) and title.startswith(mark) and title.endswith(mark):
            title = title[len(mark) : -len(mark)].strip()
            break
    return title[:_MAX_TITLE] or None


def heading_title(text: str) -> str | None:
    """The first markdown heading (ATX `# T` or setext `T` over `===`/`---`), outside code fences.

    A YAML front-matter `title:` and an Org `#+TITLE:` line count too, being what those files use.
    """
    lines = text.split("\n", _TITLE_SCAN_LINES)[:_TITLE_SCAN_LINES]
    start, front = _front_matter(lines)
    if front:
        return front
    fenced = False
    for i in range(start, len(lines)):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        found = _line_title(line, lines[i + 1] if i + 1 < len(lines) else "")
        if found:
            return found
    return None


def _line_title(line: str, following: str) -> str | None:
    m = _ATX.match(line) or _ORG_TITLE.match(line)
    if m:
        return clean_title(clean_heading(m.group(1)))
    if (
        line.strip()
        and _SETEXT.match(following)
        and not _SETEXT.match(line)
        and not _NOT_SETEXT_TEXT.match(line)
    ):
        return clean_title(clean_heading(line))
    return None


def _front_matter(lines: list[str]) -> tuple[int, str | None]:
    """(index of the first line after a leading YAML front matter block, its `title:` if any)."""
    if not lines or lines[0].strip() != "---":
        return 0, None
    title = None
    for i in range(1, min(len(lines), 200)):
        if lines[i].strip() in ("---", "..."):
            return i + 1, title
        m = _FRONT_TITLE.match(lines[i])
        if m and title is None:
            title = clean_title(m.group(1))
    return 0, None


def man_title(text: str) -> str | None:
    """The line under a man-page style `NAME` section header, e.g. `ls - list directory contents`."""
    lines = text.split("\n", _TITLE_SCAN_LINES)[:_TITLE_SCAN_LINES]
    for i, line in enumerate(lines):
        if line.rstrip() != "NAME":
            continue
        for following in lines[i + 1 : i + 4]:
            if following.strip():
                return clean_title(following) if following[:1] in (" ", "\t") else None
    return None
