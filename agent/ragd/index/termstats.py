"""How common a query's terms are in the collection, estimated from a sample of its chunks (issue 14).

zvec 0.8 scores a keyword query over every document that holds any of its terms (about 2 µs a document at 100k
chunks: a word in every chunk costs 200 ms, docs/benchmarks.md), and it exposes no document frequencies. So ragd
reads a sample of the collection's chunks (`sample`: about SAMPLE chunks chosen by their content hash, hence
spread over the whole collection whatever the order they were written in) and counts in it the documents that
hold each term. From that count it derives the most a term can add to one document's BM25 score (`bound`):
zvec's scorer adds, per query token, idf × tf·(k1+1) / (tf + k1·(…)), which is below idf × (k1+1) whatever tf
and the document's length (docs/zvec-notes.md), and idf = ln(1 + (N − df + 0.5) / (df + 0.5)).

A bound must never be too low (the keyword search in `keyword.py` leaves out documents on the strength of it), so
every estimate errs on the side of a rarer term: the document frequency is the lower end of a confidence interval
of the sampled share (Wilson, Z standard errors), and the sample is matched more strictly than the tokenizer does
(a word or a quoted term as a whole, not inside a longer run of letters or digits, without stemming: `retries`
does not count `retry`), which can only count fewer documents. A bare run of CJK characters, which zvec cuts into
words and ORs, counts as one token per character, each as rare as the whole run (jieba's words are not known here).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .fts import CJK, Term

SAMPLE = 1000  # chunks read for the estimate (at 100k chunks: ~10 ms to read, ~30 ms to count)
MIN_SAMPLE = 200  # fewer: no estimate (a small collection is fast to search anyway)
K1 = 1.2  # zvec's BM25 k1 (a document's score for one token is at most idf × (K1 + 1))
Z = 3.0  # standard errors below the sampled share: a bound is too low for about 1 term in 1,000
_WORD = re.compile(r"[a-z]+|[0-9]+")
_TOKEN = re.compile(rf"[a-z]+|[0-9]+|[{CJK}]+|[^\s{CJK}a-z0-9]")
_CJK_RUN = re.compile(rf"[{CJK}]+")


class TermStats:
    """Document-frequency estimates for query terms, from `texts` (a sample of a collection of `documents`)."""

    def __init__(self, texts: Sequence[str], documents: int) -> None:
        lowered = [t.lower() for t in texts]
        self.documents = max(documents, len(lowered))
        self.size = len(lowered)
        self._words: Counter[str] = Counter()
        for text in lowered:
            self._words.update(set(_WORD.findall(text)))
        self._joined = "\n".join(lowered)  # for runs of CJK characters and symbols: substring search
        self._starts = list(_starts(lowered))
        self._cache: dict[str, int] = {}

    def _count(self, token: str) -> int:
        """Sampled documents holding `token` (an ASCII word or number as a whole run, else as a substring)."""
        if _WORD.fullmatch(token):
            return self._words[token]
        return self._matches(re.escape(token))

    def _matches(self, pattern: str) -> int:
        if pattern not in self._cache:
            found = re.finditer(pattern, self._joined)
            self._cache[pattern] = len({bisect.bisect_right(self._starts, m.start()) for m in found})
        return self._cache[pattern]

    def share(self, term: Term) -> float:
        """The sampled share of documents holding `term`'s rarest token: what zvec walks to search it."""
        counts = [self._count(token) for token in _tokens(term.text)]
        return min(counts, default=0) / max(self.size, 1)

    def bound(self, term: Term) -> float:
        """The most `term` can add to one document's BM25 score (too high rather than too low).

        A quoted term is one clause scored with its own document frequency (a phrase of common tokens can be rare:
        `"item5"` scored 11.1 at 100k, the idf of one document); a bare CJK run is an OR of the tokens jieba cuts
        it into, each a clause, at most one per character, each at least as rare as the run."""
        text = term.text.lower()
        if not term.phrase and _CJK_RUN.fullmatch(text):
            return len(text) * self._idf_bound(self._matches(re.escape(text))) * (K1 + 1)
        count = self._words[text] if _WORD.fullmatch(text) else self._matches(_delimited(text))
        return self._idf_bound(count) * (K1 + 1)

    def _idf_bound(self, count: int) -> float:
        n, big_n = self.size, self.documents
        df = _wilson_low(count, n) * big_n
        return math.log(1.0 + (big_n - df + 0.5) / (df + 0.5))


def _starts(texts: Sequence[str]) -> list[int]:
    """The offset in the joined sample at which each text after the first starts (for bisect)."""
    out, at = [], 0
    for text in texts[:-1]:
        at += len(text) + 1
        out.append(at)
    return out


def _tokens(text: str) -> list[str]:
    """`text`'s tokens as the sample is matched: runs of ASCII letters, of digits, of CJK characters, and symbols."""
    return [m.group(0) for m in _TOKEN.finditer(text.lower())]


def _delimited(text: str) -> str:
    """A pattern for `text` not inside a longer run of ASCII letters or digits (so `w12` is not found in `w120`)."""
    return rf"(?<![a-z0-9]){re.escape(text)}(?![a-z0-9])"


def _wilson_low(count: int, n: int) -> float:
    """The lower end of the Wilson score interval (Z standard errors) of a share `count` / `n`."""
    if n == 0:
        return 0.0
    p, z2 = count / n, Z * Z
    centre = p + z2 / (2 * n)
    margin = Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z2 / n))


def sample(coll: Any, documents: int, hash_field: str, text_field: str) -> TermStats | None:
    """Read about SAMPLE chunks of `coll` (`documents` in all): those whose content hash (hex md5, uniformly
    spread) sorts below a bound chosen so that SAMPLE of them are expected. None when too few come back."""
    share = SAMPLE / max(documents, 1)
    flt = (
        f"{hash_field} < '{min(0xFFFF, math.ceil(share * 0x10000)):04x}'"
        if share < 1
        else f"{hash_field} != ''"
    )
    docs = coll.query(topk=2 * SAMPLE, filter=flt, output_fields=[text_field])
    texts = [str(d.fields.get(text_field) or "") for d in docs if d is not None]
    return TermStats(texts, documents) if len(texts) >= MIN_SAMPLE else None
