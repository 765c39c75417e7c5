"""How text is cut into the keyword index's words: the same cut for a chunk and for a question.

- Text is `fts.normalize`d first (NFKC, accents off Latin letters), so full-width and half-width forms, and `café`
  and `cafe`, are the same words.
- A run of CJK characters is cut by jieba (rjieba: jieba's algorithm and dictionary in Rust) in search mode, which
  gives a long word and the shorter words inside it (`配置文件` -> `配置`, `文件`, `配置文件`), so a question that
  says `文件` finds a chunk that says `配置文件`.
- Any other text is cut into runs of letters and digits (`E1042`, `utf8`, `3`), the underscore, dots and dashes
  separating them (`parse_config` -> `parse`, `config`; `os.path` -> `os`, `path`), and symbols such as emoji are
  words of their own. An identifier is then a phrase of such words: `"parse_config"` matches `parse_config` and
  `parse-config`, and `config` alone matches both.

The words are joined with spaces; the keyword index's analyzer (keywords.py) then lower-cases them and stems
English words (`configured` -> `configur`), at indexing and at question time alike.
"""

from __future__ import annotations

import re
import unicodedata

from .fts import CJK, normalize

_PIECE = re.compile(rf"([{CJK}]+)|[^\W_{CJK}]+|\S")
MAX_WORD = 80  # characters; a longer run (a hash, a base64 blob) is cut into pieces this long


def _jieba() -> object:
    import rjieba  # lazy: its dictionary (~30 MB) only in a process that cuts Chinese

    return rjieba


def cut(text: str) -> list[str]:
    """The words of `text`, in order."""
    out: list[str] = []
    for m in _PIECE.finditer(normalize(text)):
        word = m.group(0)
        if m.group(1):
            out.extend(w for w in _jieba().cut_for_search(word) if not w.isspace())  # type: ignore[attr-defined]
        elif word[0].isalnum():
            out.extend(word[i : i + MAX_WORD] for i in range(0, len(word), MAX_WORD))
        elif unicodedata.category(word[0]) == "So":  # emoji and other symbols
            out.append(word)
    return out


def joined(text: str) -> str:
    """`cut(text)` as the keyword index stores it: words separated by single spaces."""
    return " ".join(cut(text))
