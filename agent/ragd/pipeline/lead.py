"""A document's lead: its title and the first paragraphs of prose of its opening chunks, embedded once per document.

What a document says it is about is often in its first lines (a man page's NAME line, a README's first paragraph),
and in none of the chunks of a long document taken alone. Hybrid search ranks the documents it found by their lead's
cosine to the question as one more list (index/ranking/fusion.py; measured on the development set: docs/benchmarks.md).

Headings (Markdown's, and the titles of reStructuredText and setext with the line of `=`, `-`, `~`… under them),
tables, rules, code (fenced or indented), images, HTML lines and reStructuredText directives are left out: the headings a kind
of document repeats in every one of them (NAME, SYNOPSIS, 概述) made all leads of that kind alike, and the gain
was gone. The lead is made
from the chunks as they are stored, so an entry of an earlier ragd gets one without its file being parsed again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..model import md5_hex

LEAD_CHARS = 200  # characters of prose
LEAD_CHUNKS = 3  # opening chunks the prose is taken from
MIN_PARAGRAPH = 8  # characters: shorter paragraphs are labels, not prose
_NOT_PROSE = re.compile(r"^\s*(#|\||---|```|\[!\[|!\[|<|\.\. )")  # headings, tables, rules, code, images,
# HTML, and reStructuredText's directives, comments and link targets
_ADORNMENT = re.compile(
    r"^\s*([=\-~^*+`:.'\"_#])\1{2,}\s*$", re.MULTILINE
)  # the line under (or over) a title
_TITLE = re.compile(r"(?:^| \| )Title: (.*?)(?: \| Section: |$)")
_PARAGRAPHS = re.compile(r"\n\s*\n")
_INDENTED = re.compile(r"^(?:\s*\n)*(?: {3}|\t)")  # a paragraph whose first line is indented


def title_of(header: str) -> str:
    """The title in a chunk's context header (split.context_header), "" when it names none."""
    found = _TITLE.search(header)
    return found.group(1).strip() if found else ""


def lead_text(header: str, contents: Sequence[str], limit: int = LEAD_CHARS) -> str:
    """The lead of a document whose first chunk has the context header `header` and whose opening chunks hold
    `contents` (LEAD_CHUNKS of them are read): its title, a newline, then up to `limit` characters of its first
    paragraphs of prose (each once: chunks overlap). "" when the document has neither."""
    prose: list[str] = []
    size = 0
    for raw in (p for text in contents[:LEAD_CHUNKS] for p in _PARAGRAPHS.split(text)):
        para = raw.strip()
        if len(para) < MIN_PARAGRAPH or _NOT_PROSE.match(para) or _ADORNMENT.search(para) or para in prose:
            continue
        if _INDENTED.match(raw):  # code, or the body of a directive
            continue
        prose.append(para)
        size += len(para)
        if size >= limit:
            break
    text = " ".join(prose)[:limit]
    title = title_of(header)
    return f"{title}\n{text}" if title and text else title or text


def lead_hash(text: str) -> str:
    """The lead's `content_hash` (md5 hex, as a chunk's): its vector is reused while this stays the same."""
    return md5_hex(text)
