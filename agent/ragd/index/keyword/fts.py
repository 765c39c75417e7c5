"""Turn any user text into search terms (`terms`: what every keyword index looks up, keywords.py and Milvus), and
into a safe zvec full-text query string (`render`, `query_string`: zvec's own full-text field, which ragd used until
schema 5 and bench/bench_ranking.py still compares with).

zvec 0.8's query language (measured, see docs/zvec-notes.md) gives meaning to `AND`/`OR`/`NOT` (any case),
`+`/`-` prefixes, `( )`, `field:` prefixes, `^` boosts, `*` and backslashes, and rejects some of them with a syntax
error. A double-quoted phrase is run through the field's tokenizer and must match as a sequence, which is what
identifiers such as `ERR_CONN_RESET` or `parse_config()` need. So:

- every non-CJK word becomes a quoted phrase, stripped of the punctuation around it (`"parse_config"`), except a
  word of ASCII letters only or of digits only, which is one token either way and is left bare (the same matches, and a bare
  term costs less to search: 6.3 against 7.3 ms median on the development set); the query language's operator
  words (`AND`, `OR`, `NOT`, `TO`) are always quoted;
- a run of CJK characters stays a bare term, so jieba splits it into words that are OR-ed (a phrase would demand
  the exact sequence; CJK characters are always safe bare terms);
- text the user put in double quotes stays one phrase;
- double quotes and backslashes inside words act as separators; terms are OR-ed (BM25 ranks documents with more
  of them first). Text is normalised (`normalize`) here and at indexing, so full-width and half-width forms, and
  accented and plain Latin letters, match.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

MAX_TERMS = 32
# Words that say nothing about which document is meant. Left in, they match most documents of their language, and
# with rank fusion every such match outranks a document that only the vector side found (a cross-lingual hit).
# Dropped from keyword queries unless nothing else is left.
STOPWORDS_EN = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does", "for",
    "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on",
    "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with",
    "would", "you", "your",
))  # fmt: skip
STOPWORDS_ZH = (
    "怎么样", "为什么", "怎么", "怎样", "如何", "什么", "哪些", "哪个", "多少", "一般", "可以", "是否", "有没有",
    "我们", "你们", "他们", "这个", "那个", "一个", "的", "了", "吗", "呢", "吧", "啊", "是", "在", "和", "与", "或",
    "也", "都", "就", "要", "会", "能", "把", "被", "给", "对", "从", "到", "我", "你", "他", "她", "它", "这", "那",
)  # fmt: skip
# Only multi-character stopwords cut a CJK run: a single character is too often part of a word (会 in 会议,
# 了 in 了解, 在 in 现在); single-character stopwords are dropped only when they stand alone.
_ZH_STOP = re.compile("|".join(sorted((w for w in STOPWORDS_ZH if len(w) > 1), key=len, reverse=True)))
CJK = (  # the scripts a query keeps as bare runs (tokenized by jieba, not quoted)
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"  # hangul
    "\U00020000-\U0003ffff"  # CJK extensions B..
)
_PIECE = re.compile(rf"([{CJK}]+)|([^{CJK}]+)")
_USER_PHRASE = re.compile(r'"([^"]*)"')
_SEPARATORS = re.compile(r'[\s"\\]+')
_LATIN_ACCENTS = re.compile(r"(?<=[A-Za-z])[\u0300-\u036f]+")


@dataclass(frozen=True)
class Term:
    text: str
    phrase: bool  # quoted phrase (sequence match) or bare CJK term (tokenised and OR-ed)


def normalize(text: str) -> str:
    """NFKC, with accents on Latin letters removed (`café` -> `cafe`): jieba would split `café` into `caf` + `é`,
    and zvec's `ascii_folding` filter runs after that split, so folding happens here, at indexing and at query."""
    if text.isascii():  # the same, at once
        return text
    return unicodedata.normalize("NFC", _LATIN_ACCENTS.sub("", unicodedata.normalize("NFKD", text)))


def chunk_text(header: str, content: str) -> str:
    """What the keyword index cuts of a chunk: its header and content, normalized (zvec keeps it as `fts_text`)."""
    return normalize(f"{header}\n\n{content}" if header else content)


@functools.lru_cache(maxsize=8192)
def fold_char(ch: str) -> str:
    """`normalize` for one character, when that yields exactly one character (else `ch`): keeps offsets."""
    folded = normalize(ch).lower()
    return folded if len(folded) == 1 else ch


def _keep(ch: str) -> bool:
    return ch.isalnum() or unicodedata.category(ch) == "So"  # letters, digits, and symbols such as emoji


def _trim(word: str) -> str:
    start, end = 0, len(word)
    while start < end and not _keep(word[start]):
        start += 1
    while end > start and not _keep(word[end - 1]):
        end -= 1
    return word[start:end]


def _word_terms(word: str) -> list[Term]:
    out: list[Term] = []
    for m in _PIECE.finditer(word):
        if m.group(1):
            out.extend(Term(run, phrase=False) for run in _ZH_STOP.split(m.group(1)) if run)
        elif trimmed := _trim(m.group(2)):
            out.append(Term(trimmed, phrase=True))
    return out


def _informative(t: Term) -> bool:
    return t.text not in STOPWORDS_ZH if not t.phrase else t.text.casefold() not in STOPWORDS_EN


def terms(text: str) -> list[Term]:
    """The search terms in `text`, de-duplicated, at most MAX_TERMS."""
    text = normalize(text)
    found: list[Term] = []
    for m in _USER_PHRASE.finditer(text):
        phrase = " ".join(_SEPARATORS.split(m.group(1))).strip()
        if any(_keep(ch) for ch in phrase):
            found.append(Term(phrase, phrase=True))
    rest = _USER_PHRASE.sub(" ", text)
    words = [t for word in _SEPARATORS.split(rest) for t in _word_terms(word)]
    found.extend(t for t in words if _informative(t))
    if not found:  # a query of stopwords only: search for them after all
        found = words or [Term(m.group(1), phrase=False) for m in _PIECE.finditer(rest) if m.group(1)]
    seen: set[tuple[str, bool]] = set()
    unique = []
    for t in found:
        if (key := (t.text.casefold(), t.phrase)) not in seen:
            seen.add(key)
            unique.append(t)
    return unique[:MAX_TERMS]


# Identifiers: flags (-r, --delete), snake_case, codes with digits (E1042, utf8), capitals (DNS, ERR_...), dotted
# names (os.path, a.conf), calls (open()), paths (/etc): words a keyword search matches exactly and meaning does not.
_IDENTIFIER = re.compile(
    r"(?<!\w)--?[A-Za-z][\w-]*|\w+_\w+|[A-Za-z]+\d+\w*|\b[A-Z]{2,}\w*\b|\w+\.\w+|\w+\(\)|/\w+"
)


def identifier_like(text: str) -> bool:
    """`text` names something exactly (a flag, a code, a file, a function): then keyword matches count in full."""
    return _IDENTIFIER.search(text) is not None


_OPERATORS = frozenset(("AND", "OR", "NOT", "TO"))


def bare(word: str) -> bool:
    """`word` may stand unquoted in a query string: one token whatever the tokenizer (ASCII letters only, or digits
    only: jieba cuts `E1042` into `E` + `1042`, which bare would OR; other scripts are not measured), and not an
    operator."""
    return word.isascii() and (word.isalpha() or word.isdigit()) and word.upper() not in _OPERATORS


def render(found: list[Term]) -> str:
    """The query string OR-ing `found` (a phrase is quoted unless it may stand bare)."""
    return " ".join(f'"{t.text}"' if t.phrase and not bare(t.text) else t.text for t in found)


def query_string(text: str) -> str | None:
    """A zvec `Fts(query_string=...)` for `text`, or None when it holds nothing searchable."""
    found = terms(text)
    return render(found) if found else None
