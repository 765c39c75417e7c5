"""The split stage: a parsed `Document` -> `Chunk`s with offsets, line range, heading path and page.

Splitting is langchain's `RecursiveCharacterTextSplitter` with regex separators and `keep_separator="end"`:
markdown headings, blank lines, line breaks, sentence ends (。！？；… and ". "), Chinese clause marks
(，、：), spaces, then a hard cut. Every separator stays at the END of the piece before it, so no chunk
starts with 。. Around the library, this module adds what it does not know about markdown (when
`doc.is_markdown`) and about the section titles of reStructuredText and Org text (`doc.markup`); structure.py
finds them:

- **Code fences are never cut** (markdown). Each ``` / ~~~ fenced block (opening line through closing line; an
  unclosed fence runs to the end of the text) is replaced, before splitting, by one private-use placeholder
  character that the splitter's length function counts as the block's real length. A small block merges with
  its neighbours like a paragraph; a block longer than `chunk_size` stays whole as one oversized chunk (the
  simplest rule that never cuts code).
- **Headings stay with what follows.** Each run of heading lines (ATX headings, RST titles with their
  adornment lines, Org headlines; only blank lines between them), with the line breaks after it, is masked the
  same way, so a chunk never ends with a stranded heading, and a heading directly followed by a fence is kept
  with that fence.
- **Heading paths** come from those headings (for markdown ATX `#` .. `######` outside fences; setext headings
  are not recognised), as plain text (`structure.clean_heading`: no links, permalink anchors, emphasis): a
  chunk gets the headings in force at its first line that is not itself a heading, so a chunk opening with
  `# Install` / `## Linux` gets ("Install", "Linux").
- **kind="markdown"** cuts the text before each run of headings, then splits each section on its own: chunks
  never span two sections and carry no overlap across them. **kind="recursive"** splits the whole text,
  headings being only its first separator.
- **Chunks end at page breaks** (a PDF, a multi-page image): the text is also cut where each page starts, so
  that a chunk's page is the page of every word in it.

A text that already holds characters of Unicode planes 15-16 (the placeholders), or more than 65533 fences and
heading runs together, is split without the masking (a warning is logged): fences may then be cut.

Every chunk is an exact substring of `doc.text` (`doc.text[c.start_index:c.end_index] == c.content`),
stripped of leading/trailing whitespace. A chunk without a letter, a digit or an ideograph is dropped (blank, or
markup alone: the rules and empty cells of a layout table, a line of dashes): nothing in it can be asked for, and
its vector, the model's reading of punctuation, came first for unrelated questions.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:  # langchain is imported on first use: it costs ~0.2 s at start-up
    from langchain_text_splitters import RecursiveCharacterTextSplitter
from ..model import Chunk, Document, PageSpan, SplitterSettings
from .structure import Heading, Structure, has_words, scan

log = logging.getLogger(__name__)

KINDS = ("recursive", "markdown")

# Separators, coarsest first; all regexes, the matched text stays at the END of the piece before it.
_HEADING_SEP = "\\n(?=[ ]{0,3}#{1,6}[ \\t]|[\U00100000-\U0010fffd])"  # a heading line or its placeholder
_TITLE_SEP = "\\n(?=[\U00100000-\U0010fffd])"  # before the placeholder of an RST/Org title
_PLAIN_SEPARATORS = (
    r"\n(?:[ \t]*\n)+",  # paragraphs (blank lines)
    r"\n",  # lines
    r"(?:[。！？；…]+[”’」』）》]*|[.!?][\"'”’)\]]*[ \t]+)",  # sentence ends, Chinese and English
    r"[，、：]",  # Chinese clauses
    r"[ \t\u3000]+",  # words
)
# Then hard cuts: first in steps of chunk_size/20 characters (langchain merges single characters in quadratic
# time: 4 s for a 1 MB line), then single characters (only for runs of huge placeholders).
_HARD_CUT_STEPS = 20

_LEADING_WS = re.compile(r"\s*")
_NON_WS = re.compile(r"\S")
_AFTER_HEADING = re.compile(r"\n(?:[ \t]*\n)*")

# Placeholders: one code point of a supplementary private-use plane per masked span.
_PH_FENCE = 0xF0000  # plane 15: fenced blocks
_PH_HEADING = 0x100000  # plane 16: heading runs (the heading separator looks for these)
_PH_PLANE = 0xFFFE  # placeholders available in each plane
_PH_RE = re.compile("[\U000f0000-\U0010fffd]")
# Extra length (beyond 1) of each placeholder of the document being split in this context.
_PH_EXTRA: ContextVar[dict[str, int] | None] = ContextVar("ragd_split_placeholder_extra", default=None)


@dataclass(frozen=True)
class _Masked:
    """`text` with each atomic span replaced by one placeholder; maps offsets between the two."""

    text: str
    positions: tuple[int, ...]  # masked offset of each placeholder
    cumulative: tuple[int, ...]  # extra length of the placeholders before index k (len = spans + 1)
    starts: tuple[int, ...]  # original offset of each masked span
    extra: dict[str, int]

    def to_original(self, masked_offset: int) -> int:
        return masked_offset + self.cumulative[bisect_left(self.positions, masked_offset)]

    def to_masked(self, original_offset: int) -> int:
        """For offsets outside the masked spans (section starts are, being the starts of heading runs)."""
        return original_offset - self.cumulative[bisect_left(self.starts, original_offset)]


def _masked_length(text: str) -> int:
    extra = _PH_EXTRA.get()
    if not extra:
        return len(text)
    return len(text) + sum(extra[c] for c in _PH_RE.findall(text))


@lru_cache(maxsize=32)
def _splitter(
    markup: str, chunk_size: int, chunk_overlap: int, masked: bool
) -> RecursiveCharacterTextSplitter:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    step = max(1, chunk_size // _HARD_CUT_STEPS)
    headings = [_HEADING_SEP] if markup == "markdown" else [_TITLE_SEP] if markup else []
    separators = [*headings, *_PLAIN_SEPARATORS, f"(?s:.{{{step}}})", ""]
    try:
        return RecursiveCharacterTextSplitter(
            separators=separators,
            keep_separator="end",
            is_separator_regex=True,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            length_function=_masked_length if masked else len,
            add_start_index=True,  # for create_documents(); split() locates chunks itself (_place)
            strip_whitespace=True,
        )
    except ValueError as exc:
        raise ConfigError(
            f"invalid splitter settings: {exc}", "set splitter.chunk_size > splitter.chunk_overlap >= 0"
        ) from exc


def _heading_runs(text: str, headings: tuple[Heading, ...]) -> list[tuple[int, int]]:
    """[start, end) of each run of headings separated only by blank lines, with the line breaks after it."""
    runs: list[tuple[int, int]] = []
    for heading in headings:
        glue = _AFTER_HEADING.match(text, heading.line_end)
        end = glue.end() if glue else heading.line_end
        if runs and runs[-1][1] == heading.start:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((heading.start, end))
    return runs


def _atomic_spans(text: str, structure: Structure) -> list[tuple[int, int, int]]:
    """(start, end, placeholder plane) of what the splitter must not cut: each fenced block, and each run
    of heading lines with the line breaks after it (and with the fence right after it, if any)."""
    fences = dict(structure.fences)
    spans: list[tuple[int, int, int]] = []
    for start, end in _heading_runs(text, structure.headings):
        spans.append((start, fences.pop(end, end), _PH_HEADING))
    spans.extend((start, end, _PH_FENCE) for start, end in fences.items())
    spans.sort()
    return spans


def _mask(text: str, spans: list[tuple[int, int, int]]) -> _Masked:
    unmasked = _Masked(text, (), (0,), (), {})
    if not spans:
        return unmasked
    if len(spans) >= _PH_PLANE or _PH_RE.search(text):
        log.warning("split: text holds private-use characters or too many blocks; code fences may be cut")
        return unmasked
    parts: list[str] = []
    positions: list[int] = []
    cumulative = [0]
    extra: dict[str, int] = {}
    prev = masked_len = 0
    for k, (start, end, plane) in enumerate(spans):
        parts.append(text[prev:start])
        masked_len += start - prev
        placeholder = chr(plane + k)
        parts.append(placeholder)
        positions.append(masked_len)
        masked_len += 1
        extra[placeholder] = end - start - 1
        cumulative.append(cumulative[-1] + extra[placeholder])
        prev = end
    parts.append(text[prev:])
    starts = tuple(start for start, _, _ in spans)
    return _Masked("".join(parts), tuple(positions), tuple(cumulative), starts, extra)


def _sections(text: str, headings: tuple[Heading, ...]) -> list[tuple[int, int]]:
    """Cut before each run of headings (so a section holding only headings joins the next one)."""
    first = _NON_WS.search(text)
    starts = [0]
    starts.extend(start for start, _ in _heading_runs(text, headings) if first and first.start() < start)
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def _at_pages(
    bounds: list[tuple[int, int]], pages: tuple[PageSpan, ...], atomic: list[tuple[int, int, int]]
) -> list[tuple[int, int]]:
    """`bounds` also cut where each page but the first starts, so that no chunk spans two pages: a chunk's page
    is that of every word in it (one chunk of two short pages was cited by the first page, the word asked for
    being on the second). Never inside a fence or a run of headings (never cut)."""
    cuts = sorted(p.start for p in pages[1:] if not any(s < p.start < e for s, e, _ in atomic))
    if not cuts:
        return bounds
    out: list[tuple[int, int]] = []
    for a, b in bounds:
        out.extend(pairwise([a, *(c for c in cuts if a < c < b), b]))
    return out


def _split_span(
    splitter: RecursiveCharacterTextSplitter, masked: str, start: int, end: int, overlap: int
) -> list[tuple[int, int]]:
    """Masked [start, end) of each chunk langchain makes of masked[start:end], in order."""
    piece = masked[start:end]
    return [(start + a, start + b) for a, b in _place(piece, splitter.split_text(piece), overlap)]


def _candidates(
    piece: str, chunk: str, prev: tuple[int, int], overlap: int
) -> Iterator[tuple[int, int] | None]:
    """Where `chunk` can sit after a chunk placed at `prev`, earliest first; None = drop it as a duplicate.

    It starts no earlier than the previous chunk and at most `overlap` characters before its end (langchain
    keeps at most `chunk_overlap` of length, and a placeholder counts >= 1), with only whitespace after that
    end; it ends after the previous one, as it holds at least one new piece -- unless that piece was only
    whitespace: then it is a copy of the previous chunk's tail and is dropped.
    """
    prev_start, prev_end = prev
    lowest = max(prev_start, prev_end - overlap)
    gap = _NON_WS.search(piece, prev_end)
    highest = gap.start() if gap else len(piece)
    pos = piece.find(chunk, max(lowest, prev_end - len(chunk) + 1), highest + len(chunk))
    while pos >= 0:
        yield pos, pos + len(chunk)
        pos = piece.find(chunk, pos + 1, highest + len(chunk))
    if prev_end and piece.find(chunk, lowest, prev_end) >= 0:
        yield None


_EXHAUSTED = (-1, -1)


def _place(piece: str, chunks: list[str], overlap: int) -> list[tuple[int, int]]:
    """Offsets of langchain's chunks in `piece`: the earliest placement consistent with how it merges.

    In a repetitive text a chunk may occur several times near its place; a depth-first search (with failed
    states remembered) picks the earliest occurrence that still lets every later chunk be placed and leaves no
    text uncovered. Ordinary text has a single candidate per chunk, so this is one linear pass.
    """
    placed: list[tuple[int, int] | None] = [None] * len(chunks)
    dead: set[tuple[int, int, int]] = set()
    stack = [(0, (0, 0), _candidates(piece, chunks[0], (0, 0), overlap))] if chunks else []
    while stack:
        i, prev, options = stack[-1]
        option = next(options, _EXHAUSTED)
        if option is _EXHAUSTED:
            dead.add((i, *prev))
            stack.pop()
            continue
        placed[i] = option
        after = option or prev
        if i + 1 == len(chunks):
            if not piece[after[1] :].strip():
                return [p for p in placed if p]
        elif (i + 1, *after) not in dead:
            stack.append((i + 1, after, _candidates(piece, chunks[i + 1], after, overlap)))
    if chunks:  # cannot happen with langchain's merge; never record a wrong offset
        raise RuntimeError(f"split: cannot place langchain's chunks in the text ({len(chunks)} chunks)")
    return []


class _Locator:
    """Line numbers, heading paths and pages by bisection over precomputed offsets."""

    def __init__(self, doc: Document, headings: tuple[Heading, ...]) -> None:
        self._text = doc.text
        self._line_starts = [0, *(m.end() for m in re.finditer("\n", doc.text))]
        self._headings = headings
        self._heading_starts = [h.start for h in headings]
        self._doc = doc
        spans = doc.pages
        self._pages_sorted = all(a.end <= b.start for a, b in pairwise(spans))
        self._page_starts = [p.start for p in spans]

    def line(self, offset: int) -> int:
        return bisect_right(self._line_starts, offset)

    def heading_path(self, start: int, end: int) -> tuple[str, ...]:
        pos = start
        while True:  # skip the chunk's leading heading lines: the path is that of its first body line
            i = bisect_left(self._heading_starts, pos)
            if i == len(self._headings) or self._headings[i].start != pos:
                break
            after = _LEADING_WS.match(self._text, self._headings[i].line_end)
            if after is None or after.end() >= end:
                break
            pos = after.end()
        i = bisect_right(self._heading_starts, pos) - 1
        return self._headings[i].path if i >= 0 else ()

    def page(self, offset: int) -> int | None:
        spans = self._doc.pages
        if not spans:
            return None
        if not self._pages_sorted:
            return self._doc.page_at(offset)
        i = bisect_right(self._page_starts, offset) - 1
        if i >= 0 and offset < spans[i].end:
            return spans[i].number
        return spans[-1].number if offset >= spans[-1].end else None


def split(doc: Document, settings: SplitterSettings) -> list[Chunk]:
    """Cut `doc.text` into chunks per `settings` (see the module docstring for the rules)."""
    if settings.kind not in KINDS:
        raise ConfigError(f"unknown splitter kind {settings.kind!r}", f"use one of: {', '.join(KINDS)}")
    text = doc.text
    if not text.strip():
        return []
    markup = "markdown" if doc.is_markdown else doc.markup or ""
    structure = scan(text, markup)
    atomic = _atomic_spans(text, structure)
    masked = _mask(text, atomic)
    splitter = _splitter(markup, settings.chunk_size, settings.chunk_overlap, bool(masked.extra))
    by_heading = settings.kind == "markdown" and structure.headings
    bounds = _sections(text, structure.headings) if by_heading else [(0, len(text))]
    sections = [(masked.to_masked(a), masked.to_masked(b)) for a, b in _at_pages(bounds, doc.pages, atomic)]
    token = _PH_EXTRA.set(masked.extra)
    try:
        spans = [
            (masked.to_original(a), masked.to_original(b))
            for start, end in sections
            for a, b in _split_span(splitter, masked.text, start, end, settings.chunk_overlap)
        ]
    finally:
        _PH_EXTRA.reset(token)
    return _chunks(doc, spans, _Locator(doc, structure.headings))


def _chunks(doc: Document, spans: list[tuple[int, int]], where: _Locator) -> list[Chunk]:
    chunks: list[Chunk] = []
    prev_end = 0
    for raw_start, raw_end in spans:
        raw = doc.text[raw_start:raw_end]
        content = raw.strip()  # a glued line break may end up at an edge
        if not has_words(content):
            continue
        start = raw_start + len(raw) - len(raw.lstrip())
        end = start + len(content)
        path = where.heading_path(start, end)
        chunks.append(
            Chunk(
                content=content,
                start_index=start,
                end_index=end,
                start_line=where.line(start),
                end_line=where.line(end - 1),
                overlap_size=max(0, prev_end - start) if chunks else 0,
                heading_path=path,
                page=where.page(start),
                header=context_header(doc.path.name, doc.title, path),
            )
        )
        prev_end = end
    return chunks


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def context_header(file_name: str, title: str | None, heading_path: tuple[str, ...]) -> str:
    """`File: notes.md | Title: 小米 15 Pro | Section: Specs > Battery` (empty parts omitted).

    The title is not repeated in the section when the first heading is the title itself.
    """
    title = _one_line(title or "")
    path = [_one_line(h) for h in heading_path if h.strip()]
    if title and path and path[0].casefold() == title.casefold():
        path = path[1:]
    parts = []
    if file_name:
        parts.append(f"File: {_one_line(file_name)}")
    if title:
        parts.append(f"Title: {title}")
    if path:
        parts.append(f"Section: {' > '.join(path)}")
    return " | ".join(parts)
