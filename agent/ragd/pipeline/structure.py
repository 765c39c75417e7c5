"""What the split stage knows of a text's structure: code fences, section headings, and clean heading text.

- **Markdown**: ``` / ~~~ fences, and ATX headings (`#` .. `######`) outside them; setext headings are not
  recognised.
- **reStructuredText** (`markup="rst"`): section titles as docutils sees them: a title line underlined (and
  optionally overlined) with one punctuation character repeated at least as wide as the title, after a blank line
  (or at the start, or right after another title). Levels follow the order in which each adornment style (the
  character, with or without an overline) first appears. A run of `====` with no title above it (a transition, a
  table border) is not a title.
- **Org** (`markup="org"`): headlines (`*`, `**`, ... at the start of a line), outside `#+BEGIN_…`/`#+END_…`
  blocks; TODO keywords, priorities and tags are dropped.

Every heading's text goes through `clean_heading`, so a heading path is plain text whatever the source format:
no link syntax, no permalink anchors (Sphinx `¶`, GitHub `#`, `🔗`), images, emphasis marks, backticks, HTML tags
or entities.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath

MARKUPS = ("markdown", "rst", "org")

# The revision of these rules, recorded in each entry ragd writes (`split_revision`; none recorded = 1).
# 2: clean heading paths; RST and Org section titles; no permalink anchors in HTML text.
# 3: document metadata (front matter, PDF and Office properties) in the entry, its title in the context header.
# 4: no chunk of markup alone (the rules and empty cells of a layout table, a line of dashes); a heading's link
#    whose text is in brackets (`[src]`, `[edit]`) is not part of its heading path.
# 5: chunks end at page breaks (split._at_pages): a chunk of a PDF is on one page.
SPLIT_REVISION = 5
_CHANGED_IN_2 = frozenset({".rst", ".rest", ".org", ".html", ".htm"})  # their chunks or heading paths differ
_MARKDOWN = frozenset({".md", ".markdown"})
_PROPERTIES_IN_3 = frozenset({".pdf", ".docx", ".pptx", ".xlsx", ".doc", ".ppt"})  # document properties
_PAGED_IN_5 = frozenset({".pdf"})  # chunks cut at page breaks (the images with pages are read by OCR)

_WORD = re.compile(r"[^\W_]")  # a letter, a digit or an ideograph


def has_words(text: str) -> bool:
    """Whether `text` holds anything to search for: a chunk without a letter, a digit or an ideograph is not made."""
    return _WORD.search(text) is not None


# Lines that open/close a fence or are an ATX heading.
_MARK = re.compile(r"^([ \t]*)(`{3,}|~{3,}|#{1,6}(?=[ \t]|$))(.*)$", re.MULTILINE)

# -- heading text ------------------------------------------------------------------------------------------------
PERMALINK_TEXT = "¶§#🔗\u200b\u00a0\ufe0f"  # the link text of heading anchors (and invisible characters)
_PERMALINK_TITLE = re.compile(r"perma(?:link|nent link)|direct link|link to this|anchor", re.IGNORECASE)
_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")  # opening and closing runs of the same length
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|!\[[^\]]*\]\[[^\]]*\]")
# (a label may hold one level of brackets: Node.js's `[[src]](https://...)` beside each heading)
_LINK = re.compile(
    r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"([^\"]*)\"|'([^']*)'))?\s*\)"
)
_MARKER = re.compile(r"\s*\[[^\[\]]*\]\s*")  # a label in brackets: `[src]`, `[edit]`, `[source]`
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_RST_LINK = re.compile(r"`([^`<]*?)\s*<[^>`]*>`_{1,2}")
_INLINE_TAGS = (
    "a|abbr|b|br|cite|code|del|em|i|img|ins|kbd|mark|path|s|samp|small|span|strong|sub|sup|svg|tt|u|var"
)
_TAG = re.compile(f"</?(?:{_INLINE_TAGS})(?:\\s[^<>]*)?/?>", re.IGNORECASE)
_STRONG = re.compile(r"(?<![\w*])(\*\*|__)(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_EMPHASIS = re.compile(r"(?<![\w*])([*_~])(?=[^\s*_~])(.+?)(?<=[^\s*_~])\1(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_TRAILING_MARKS = re.compile("[\\s¶🔗\u200b\ufe0f]+$")  # an anchor left without its link
# Permalink anchors in markdown converted from HTML (Sphinx, MkDocs, GitHub, Docusaurus): a link to an anchor of
# the same page whose text is only a mark, or whose title says what it is. Bounded, so a long text stays linear.
_ANCHOR_LINKS = re.compile(
    rf"(?<!!)\[[{PERMALINK_TEXT} \t]*\]\(#[^)\s]{{0,200}}(?:[ \t]+\"[^\"\n]{{0,200}}\")?\)"
    r"|(?<!!)\[[^\]\n]{0,40}\]\(#[^)\s]{0,200}[ \t]+\"(?:perma(?:link|nent link)|direct link|link to this)[^\"\n]{0,200}\"\)",
    re.IGNORECASE,
)
MAX_HEADING = 1000  # characters of a heading line looked at
_HOLE = re.compile("\ue000(\\d+)\ue001")  # a protected span (code or escaped character) while cleaning


def clean_heading(text: str) -> str:
    """Plain text of a heading as markdown (or HTML converted to it), RST or Org wrote it.

    `Install [¶](#install "Permalink to this heading")` -> `Install`; `**Use** [`ragctl`](x.md) &amp; more` ->
    `Use ragctl & more`. Code keeps its text (only the backticks go); an escaped character stays literal.
    """
    kept: list[str] = []

    def protect(value: str) -> str:
        kept.append(value)
        return f"\ue000{len(kept) - 1}\ue001"

    text = _CLOSING_HASHES.sub("", text[:MAX_HEADING].strip())
    text = _RST_LINK.sub(lambda m: m.group(1), text)
    text = _CODE.sub(lambda m: protect(m.group(2).strip()), text)
    text = _ESCAPED.sub(lambda m: protect(m.group(1)), text)
    text = _IMAGE.sub("", text)
    text = _LINK.sub(_link_text, text)
    text = _REF_LINK.sub(r"\1", text)
    text = _TAG.sub("", text)
    for pattern in (_STRONG, _STRIKE, _EMPHASIS):
        text = pattern.sub(lambda m: m.group(m.lastindex or 0), text)
    text = html.unescape(text)
    text = _HOLE.sub(lambda m: kept[int(m.group(1))], text)
    return " ".join(_TRAILING_MARKS.sub("", text).split())


def _link_text(m: re.Match[str]) -> str:
    label, href, title = m.group(1), m.group(2), m.group(3) or m.group(4) or ""
    if _PERMALINK_TITLE.search(title):
        return ""
    if href.startswith("#") and not label.strip(PERMALINK_TEXT + " \t"):
        return ""
    if _MARKER.fullmatch(label):  # a link to the source or an edit page beside the heading, not its text
        return ""
    return label


def drop_permalinks(markdown: str) -> str:
    """`## Install[¶](#install "Permalink to this heading")` -> `## Install`, anywhere in the text."""
    return _ANCHOR_LINKS.sub("", markdown)


def needs_resplit(
    file_name: str,
    parser: str | None,
    revision: int | None,
    heading_paths: Iterable[Sequence[str]],
    first: str = "",
    texts: Iterable[str] = (),
) -> bool:
    """Whether an entry ragd wrote under older rules holds chunks (or metadata) these rules would make differently.

    Only those are split again (their vectors are reused wherever a chunk's text is unchanged): any file with a
    heading these rules clean (revisions 2 and 4: permalinks, emphasis, a bracketed link beside it) or with a
    chunk of markup alone (one of `texts`, the chunks' contents, without words: revision 4); from revision 2, RST,
    Org and HTML files; from revision 3, Markdown files whose text (`first`: their first chunk) opens with front
    matter, and PDF and Office files, whose properties are metadata; from revision 5, PDF files, whose chunks end at
    page breaks. Not those OCR read (reading them again costs minutes; they get the new rules
    when they change or with `ragctl sync --force`). An entry another tool wrote (no `parser`) is left as it is.
    """
    revision = revision or 1
    if parser is None or revision >= SPLIT_REVISION or "ocr" in parser:
        return False
    if not all(has_words(t) for t in texts):
        return True
    if any(clean_heading(h) != h for path in heading_paths for h in path):
        return True
    ext = PurePath(file_name).suffix.lower()
    if ext in _PAGED_IN_5:  # (any older revision)
        return True
    if revision >= 3:
        return False
    if ext in _MARKDOWN and first.startswith(("---", "+++")):
        return True
    if ext in _PROPERTIES_IN_3:
        return True
    if revision >= 2:
        return False
    return ext in _CHANGED_IN_2


# -- structures --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Heading:
    start: int  # offset of the heading's first line (an RST overline) in the text
    line_end: int  # offset of the end of its last line (the "\n" or len(text))
    path: tuple[str, ...]  # headings in force from this line on


@dataclass(frozen=True)
class Structure:
    fences: tuple[
        tuple[int, int], ...
    ] = ()  # [start, end) of each fenced block, line start to closing line end
    headings: tuple[Heading, ...] = ()


class _Path:
    """The stack of headings in force: a heading of level n closes those of level >= n."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def push(self, level: int, title: str) -> tuple[str, ...]:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        return tuple(t for _, t in self._stack)


def scan(text: str, markup: str) -> Structure:
    """The structure of `text` written in `markup` (one of MARKUPS; anything else has none)."""
    if markup == "markdown":
        return scan_markdown(text)
    if markup == "rst":
        return Structure((), scan_rst(text))
    if markup == "org":
        return Structure((), scan_org(text))
    return Structure()


def scan_markdown(text: str) -> Structure:
    """Find fenced blocks and the ATX headings outside them, in one pass over the marked lines."""
    fences: list[tuple[int, int]] = []
    headings: list[Heading] = []
    path = _Path()
    fence_start, fence_marker = -1, ""
    for m in _MARK.finditer(text):
        indent, marker, rest = m.group(1), m.group(2), m.group(3)
        if fence_marker:
            if marker[0] == fence_marker[0] and len(marker) >= len(fence_marker) and not rest.strip():
                fences.append((fence_start, m.end()))
                fence_marker = ""
        elif marker[0] in "`~":
            if not (marker[0] == "`" and "`" in rest):  # a backtick info string cannot hold backticks
                fence_start, fence_marker = m.start(), marker
        elif len(indent.expandtabs(4)) <= 3 and (title := clean_heading(rest)):
            headings.append(Heading(m.start(), m.end(), path.push(len(marker), title)))
    if fence_marker:
        fences.append((fence_start, len(text)))
    return Structure(tuple(fences), tuple(headings))


# -- reStructuredText --------------------------------------------------------------------------------------------
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*[ \t]*")  # one punctuation character repeated, from column 0


def _width(text: str) -> int:
    """Columns `text` takes, as docutils counts them: East Asian wide and full-width characters take two."""
    return sum(
        2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in text
    )


def _adornment(line: str) -> str | None:
    """The character of an adornment line (`=====`), else None."""
    return line[0] if len(line.rstrip()) >= 2 and _ADORNMENT.fullmatch(line) else None


def _rst_title(lines: list[str], i: int) -> tuple[str, str, int] | None:
    """(title, style, lines taken) of a section title starting at line i, else None."""
    over = _adornment(lines[i])
    if over is not None and i + 2 < len(lines):  # overline, title, underline of the same character and length
        title, under = lines[i + 1].strip(), lines[i + 2]
        if (
            title
            and _adornment(lines[i + 1]) is None
            and under.rstrip() == lines[i].rstrip()
            and _width(title) <= len(under.rstrip())
        ):
            return title, over * 2, 3
    line = lines[i]
    if i + 1 >= len(lines) or not line.strip() or line[0] in " \t" or over is not None:
        return None
    under_char = _adornment(lines[i + 1])
    if under_char is None or len(lines[i + 1].rstrip()) < _width(line.rstrip()):
        return None
    return line.strip(), under_char, 2


def scan_rst(text: str) -> tuple[Heading, ...]:
    """Section titles of a reStructuredText text (see the module docstring)."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    styles: list[str] = []
    headings: list[Heading] = []
    path = _Path()
    i, after_title = 0, False
    while i < len(lines):
        found = _rst_title(lines, i) if i == 0 or not lines[i - 1].strip() or after_title else None
        after_title = False
        if found is None:
            i += 1
            continue
        raw, style, taken = found
        if style not in styles:
            styles.append(style)
        title = clean_heading(raw)
        if title:
            end = starts[i + taken] - 1
            headings.append(Heading(starts[i], end, path.push(styles.index(style) + 1, title)))
        i += taken
        after_title = True
    return tuple(headings)


# -- Org ---------------------------------------------------------------------------------------------------------
_ORG_HEADLINE = re.compile(r"^(\*+)[ \t]+(.*)$", re.MULTILINE)
_ORG_BLOCK = re.compile(r"^[ \t]*#\+(begin|end)_\w+", re.MULTILINE | re.IGNORECASE)
_ORG_DECOR = re.compile(
    r"^(?:(?:TODO|DONE|NEXT|WAITING|CANCELLED|CANCELED)[ \t]+)?(?:\[#[A-Za-z0-9]\][ \t]*)?"
)
_ORG_TAGS = re.compile(r"[ \t]+:(?:[\w@#%]+:)+[ \t]*$")
_ORG_LINK = re.compile(r"\[\[([^\]]*)\](?:\[([^\]]*)\])?\]")
_ORG_MARKUP = re.compile(r"(?<!\w)([=~+/])(?=\S)(.+?)(?<=\S)\1(?!\w)")


def scan_org(text: str) -> tuple[Heading, ...]:
    """Org headlines outside `#+BEGIN_…` blocks (see the module docstring)."""
    blocks: list[tuple[int, int]] = []
    opened = -1
    for m in _ORG_BLOCK.finditer(text):
        if m.group(1).lower() == "begin" and opened < 0:
            opened = m.start()
        elif m.group(1).lower() == "end" and opened >= 0:
            blocks.append((opened, m.end()))
            opened = -1
    if opened >= 0:
        blocks.append((opened, len(text)))
    headings: list[Heading] = []
    path = _Path()
    block_starts = [a for a, _ in blocks]
    for m in _ORG_HEADLINE.finditer(text):
        k = bisect_right(block_starts, m.start()) - 1
        if k >= 0 and m.start() < blocks[k][1]:
            continue
        raw = _ORG_TAGS.sub("", _ORG_DECOR.sub("", m.group(2).strip()))
        raw = _ORG_LINK.sub(lambda k: k.group(2) if k.group(2) is not None else k.group(1), raw)
        title = clean_heading(_ORG_MARKUP.sub(lambda k: k.group(2), raw))
        if title:
            headings.append(Heading(m.start(), m.end(), path.push(len(m.group(1)), title)))
    return tuple(headings)
