"""The query's words marked in a result's text, and the part of a long chunk worth showing.

The words are those the keyword search looks for (`index.fts.terms`): English words and phrases matched whole,
case-insensitively; a run of Chinese is matched by its two-character pieces (a Chinese question is not cut into
words the way the index cuts its text, so every pair of its characters that the text holds is marked, and pairs
next to each other join into one mark); and, for a Chinese question, the English words the cross-lingual search
looked for too (`index.lexicon`, once it has been read).
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

from markupsafe import Markup, escape

from ..index.keyword import fts

CONTEXT_CHARS = 360  # of a long chunk, about this much around its first match
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_BLANK_LINES = re.compile(r"\n\s*\n")
_FILLER = frozenset("的了是在和与或及吗呢吧啊也就都而")


@lru_cache(maxsize=256)
def pattern(query: str) -> re.Pattern[str] | None:
    """One regular expression for every word of `query` worth marking; None when there is none."""
    words: set[str] = set()
    for term in fts.terms(query):
        text = term.text.strip()
        if _HAN.search(text):
            words.update(_pairs(text))
        elif len(text) > 1 or text.isalnum():
            words.add(text)
    words.update(_cross_lingual(query))
    if not words:
        return None
    alts = []
    for w in sorted(words, key=len, reverse=True):
        body = r"\s+".join(re.escape(part) for part in w.split())
        alts.append(body if _HAN.search(w) else rf"(?<!\w){body}(?!\w)")
    return re.compile("|".join(alts), re.IGNORECASE)


def _pairs(run: str) -> set[str]:
    chars = [c for c in run if _HAN.match(c)]
    if len(chars) == 1:
        return {chars[0]}
    return {a + b for a, b in itertools.pairwise(chars) if not (a in _FILLER and b in _FILLER)}


def _cross_lingual(query: str) -> set[str]:
    if not _HAN.search(query):
        return set()
    from ..index.keyword import lexicon

    try:
        return {w for w in lexicon.shared().english(query) if len(w) > 2}
    except Exception:  # the dictionary unreadable here: the search said so already; marks without it
        return set()


def spans(text: str, query: str) -> list[tuple[int, int]]:
    """Where `query`'s words are in `text`: (start, end) pairs, in order, touching ones joined."""
    found = pattern(query)
    if found is None:
        return []
    out: list[tuple[int, int]] = []
    at = 0
    while (m := found.search(text, at)) is not None:  # overlapping matches too: 路由 and 由器 in 路由器
        at = m.start() + 1
        if m.end() == m.start():
            continue
        if out and m.start() <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], m.end()))
        else:
            out.append((m.start(), m.end()))
    return out


def marked(text: str, query: str) -> Markup:
    """`text`, escaped, with `query`'s words in <mark>."""
    parts: list[str] = []
    at = 0
    for start, end in spans(text, query):
        parts += [escape(text[at:start]), Markup("<mark>"), escape(text[start:end]), Markup("</mark>")]
        at = end
    parts.append(escape(text[at:]))
    return Markup("").join(parts)


def excerpt(text: str, query: str, size: int = CONTEXT_CHARS) -> Markup:
    """About `size` characters of `text` around its first match (all of it when short), marked."""
    text = _BLANK_LINES.sub("\n", text.strip())
    if len(text) <= size:
        return marked(text, query)
    found = spans(text, query)
    center = found[0][0] if found else 0
    start = max(0, min(center - size // 3, len(text) - size))
    end = start + size
    if start > 0:  # begin and end at a space where one is near
        space = text.find(" ", start, start + 20)
        start = space + 1 if space != -1 else start
    if end < len(text):
        space = text.rfind(" ", end - 20, end)
        end = space if space != -1 else end
    body = marked(text[start:end], query)
    return Markup("").join([Markup("… ") if start > 0 else "", body, Markup(" …") if end < len(text) else ""])
