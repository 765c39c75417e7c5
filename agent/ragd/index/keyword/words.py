"""How text is cut into the keyword index's words: the same cut for a chunk and for a question.

- Text is `fts.normalize`d first (NFKC, accents off Latin letters), so full-width and half-width forms, and `café`
  and `cafe`, are the same words.
- A run of CJK characters is cut by jieba (rjieba: jieba's algorithm in Rust) in search mode, which gives a long
  word and the shorter words inside it (`中华人民共和国` -> `中华`, `人民`, `共和国`, …), so a question that says
  `人民` finds a chunk that says `中华人民共和国`.
- Any other text is cut into runs of letters and digits (`E1042`, `utf8`, `3`), the underscore, dots and dashes
  separating them (`parse_config` -> `parse`, `config`; `os.path` -> `os`, `path`), and symbols such as emoji are
  words of their own. An identifier is then a phrase of such words: `"parse_config"` matches `parse_config` and
  `parse-config`, and `config` alone matches both.

The words are joined with spaces; the keyword index's analyzer (keywords.py) then lower-cases them and stems
English words (`configured` -> `configur`), at indexing and at question time alike.

The dictionary: jieba's (the `jieba` package's `dict.txt`, MIT licence) without the words its corpus saw fewer than
MIN_FREQ times, 120,467 of 349,046 words. rjieba's own default, the whole dictionary, costs the agent about 33 MiB
for as long as it runs; this one about 8 MiB, and it scored the same on the development set (within 0.003 MRR@10
down to 120,000 words; most of the others are rare names, places and idioms: docs/benchmarks.md). Words it lacks
are cut by jieba's HMM, the same way in a chunk and in a question, so they still match themselves. `import rjieba`
would build the default dictionary at once, so the native module is loaded without its package's `__init__`.
"""

from __future__ import annotations

import functools
import glob
import importlib.machinery
import importlib.util
import logging
import os
import re
import threading
import unicodedata
from collections.abc import Iterator
from typing import Any

from .fts import CJK, normalize

log = logging.getLogger(__name__)
MIN_FREQ = 7  # jieba's corpus frequency a word needs to stay in the dictionary

_CJK_RUN = re.compile(rf"([{CJK}]+)")  # split() keeps the runs: text, run, text, …
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]+")
# letters and digits (str.isalnum), or one non-ASCII character that may be a symbol; CJK is not between the runs
_ALNUM_OR_SYMBOL = re.compile(r"[^\W_]+|[^\w\s\x00-\x7f]")
MAX_WORD = 80  # characters; a longer run (a hash, a base64 blob) is cut into pieces this long
_LOADING = threading.Lock()  # one dictionary, however many threads ask for it at once


def dictionary() -> Iterator[tuple[str, int]]:
    """jieba's words of frequency at least MIN_FREQ, with their frequencies (its dict.txt, found without importing
    the package, whose import is slow), a line at a time: as one list, its ~250,000 words were 16.5 MiB of Python
    objects in the agent while it built its cutter (a big folder renamed: the first Chinese text cut there)."""
    spec = importlib.util.find_spec("jieba")
    for place in list(spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(place, "dict.txt")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    row = line.split(" ", 2)
                    if len(row) >= 2 and int(row[1]) >= MIN_FREQ:
                        yield row[0], int(row[1])
            return
    raise FileNotFoundError("jieba's dict.txt (the `jieba` package) is missing")


def _native() -> Any:
    """rjieba's native module, without running its package's `__init__` (which builds the default dictionary)."""
    spec = importlib.util.find_spec("rjieba")
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [p for place in places for p in glob.glob(os.path.join(place, "rjieba*.so"))]
    if not found:
        raise ImportError("rjieba's native module was not found")
    loader = importlib.machinery.ExtensionFileLoader("rjieba.rjieba", found[0])
    spec = importlib.util.spec_from_loader("rjieba.rjieba", loader)
    if spec is None:
        raise ImportError("rjieba's native module cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _jieba() -> Any:
    """A jieba with ragd's dictionary (built at the first Chinese text: about 0.2 s, or ahead by `warm`), or
    rjieba's default when that cannot be had (a warning: the cut then differs from an index made with ragd's
    dictionary)."""
    with _LOADING:
        return _load_jieba()


def warm() -> None:
    """Build the dictionary now (`ragd run --once` does, in a thread, while its documents are embedded: the index
    sync at the end then cuts at once)."""
    _jieba()


@functools.cache
def _load_jieba() -> Any:
    try:
        cutter = _native().Jieba.empty()
        for word, freq in dictionary():
            cutter.add_word(word, freq, None)
        return cutter
    except (ImportError, OSError, ValueError) as err:
        log.warning("cutting Chinese with rjieba's whole dictionary: %s", err)
        import rjieba

        return rjieba


def cut(text: str, *, normalized: bool = False) -> list[str]:
    """The words of `text`, in order (`normalized`: `text` is `fts.normalize`d already, as a chunk's stored
    full-text field is).

    Runs of CJK characters go to jieba; the text between them is cut by one regular expression per run (a Python
    loop per word cost about 1 s per 10,000 chunks of an index sync)."""
    out: list[str] = []
    parts = _CJK_RUN.split(text if normalized else normalize(text))
    jieba: Any = _jieba() if len(parts) > 1 else None
    for i, part in enumerate(parts):
        if i % 2:  # a CJK run (no spaces in it)
            out.extend(jieba.cut_for_search(part))
            continue
        if part.isascii():  # ASCII holds no symbol that is a word of its own
            found = _ASCII_ALNUM.findall(part)
        else:
            found = [
                w for w in _ALNUM_OR_SYMBOL.findall(part) if w[0].isalnum() or unicodedata.category(w) == "So"
            ]
        if len(part) > MAX_WORD and any(len(w) > MAX_WORD for w in found):
            found = [w[i : i + MAX_WORD] for w in found for i in range(0, len(w), MAX_WORD)]
        out.extend(found)
    return out


def joined(text: str, *, normalized: bool = False) -> str:
    """`cut(text)` as the keyword index stores it: words separated by single spaces."""
    return " ".join(cut(text, normalized=normalized))
