"""Phrases and identifiers where the keyword engine is a bag of words (Milvus's BM25; ragd's own keyword index,
keywords.py, matches them itself).

The keyword index runs a quoted phrase or an identifier (`"release plan"`, `ERR_CONN_RESET`, `parse_config()`,
`E1042`) as a sequence of tokens; Milvus's BM25 ORs the words it cuts them into, so `reset the conn after an err`
would match `ERR_CONN_RESET`. Here such hits are dropped: a hit is kept when its indexed text holds at least one
of the query's terms as the keyword index would match it. A term that is one plain word or a run of CJK characters
needs no check (BM25 finds exactly what holds it), so a query of only those is left to the engine (`matcher`
returns None).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..keyword.fts import Term, bare, normalize

_SEPARATORS = r"[\W_]+"
_NOT_AFTER_WORD = r"(?<![^\W_])"  # not preceded by a letter or digit
_NOT_BEFORE_WORD = r"(?![^\W_])"


def _pattern(term: Term) -> str:
    text = term.text.lower()
    if not term.phrase:  # a CJK run, cut into words by the engine: any two characters of it in a row will do
        pieces = [text[i : i + 2] for i in range(len(text) - 1)] or [text]
        return "|".join(re.escape(p) for p in pieces)
    if bare(term.text):  # one word: as a word, or the start of one (a Milvus server stems: run, running)
        return _NOT_AFTER_WORD + re.escape(text)
    tokens = [t for t in re.split(_SEPARATORS, text) if t]
    if not tokens:
        return re.escape(text)
    return _NOT_AFTER_WORD + _SEPARATORS.join(re.escape(t) for t in tokens) + _NOT_BEFORE_WORD


def matcher(terms: Sequence[Term]) -> Callable[[str], bool] | None:
    """A test of whether an indexed text holds any of `terms`; None when no term needs one."""
    if all(not t.phrase or bare(t.text) for t in terms):
        return None
    found = re.compile("|".join(f"(?:{_pattern(t)})" for t in terms))

    def holds(text: str) -> bool:
        return found.search(normalize(text).lower()) is not None

    return holds
