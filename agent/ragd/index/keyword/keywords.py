"""The keyword (BM25) index beside a zvec collection: a tantivy index of each chunk's words and filter terms.

Why not zvec's own full-text field (issue 14, docs/benchmarks.md): with it, zvec's inserts slowed as the writing
segment grew (2,400 documents per CPU-second to 30k, ~950 past 40k), its BM25 statistics were per segment (so the
collection had to stay one unoptimized segment), a query with a common word scored every document holding it
(seconds at 1M chunks), and every process with the collection open held a jieba dictionary inside zvec. tantivy
keeps collection-wide statistics over any number of segments, merges them in the background, answers a top-k
query with block-max WAND (skipping documents that cannot enter the top k) and indexes tens of thousands of chunks
a second.

A document per chunk, keyed by the zvec document's id:
- `text`: the chunk's header and content as words.py cuts them, lower-cased and stemmed by the `ragd` analyzer;
- `path` (the source), `dirs` (the source and every directory above it), `ext`, `meta` (the document's metadata
  terms, where.py): untokenized terms that filters match exactly, whatever characters a path holds;
- `id`: stored, to read the hits' chunks from zvec.

Consistency with the collection (the agent is the one writer; zvec's LOCK makes it so): every write names the
sources or folders it touches in a journal, fsynced, before zvec is written; the keyword index is committed after
zvec, and the journal then emptied. A writable open that finds names in the journal (a crash in between) reads
those sources back from zvec into the keyword index; one whose document count differs from zvec's (the keyword
index lost or damaged) rebuilds it from zvec whole. zvec keeps each chunk's keyword text for that (`fts_text`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import IndexError_
from ..where import Where
from . import fts, words

log = logging.getLogger(__name__)

ANALYZER = "ragd"
SUFFIX = ".keywords"  # beside the collection's directory
JOURNAL = "journal"
HEAP = 16_000_000  # the writer's memory (bytes, one thread): a segment is written out when it is full
ID, TEXT, PATH, DIRS, EXT, META = "id", "text", "path", "dirs", "ext", "meta"


def _tantivy() -> Any:
    import tantivy  # lazy: only a process that opens an index

    return tantivy


def place(collection: Path) -> Path:
    """Where the keyword index of the collection at `collection` lives."""
    return collection.with_name(collection.name + SUFFIX)


@dataclass(frozen=True)
class KeywordDoc:
    id: str
    path: str
    ext: str
    text: str  # the chunk's header and content, as the index should cut them (already `fts.normalize`d)
    meta_terms: str  # `|key=value|…|` (where.terms)
    words: str | None = None  # `text` cut already (`words.joined`: a parse worker did it), or None


def ancestors(path: str) -> list[str]:
    """`path` and every directory above it: `/a/b/c` -> `/a/b/c`, `/a/b`, `/a`, `/`."""
    out = [path]
    while (parent := os.path.dirname(path)) != path:
        out.append(parent)
        path = parent
    return out


def _dir_term(path: str) -> str:
    """The `dirs` term that matches `path` and everything below it (a trailing slash does not matter)."""
    if not path.startswith("/"):
        raise ValueError(f"a path filter needs an absolute path, not {path!r}")
    return path.rstrip("/") or "/"


def _regex_literal(text: str) -> str:
    """`text` as a regular expression matching only itself (tantivy's syntax: every non-alphanumeric character as
    a hex escape, which it accepts for any character)."""
    return "".join(ch if ch.isalnum() and ch.isascii() else f"\\x{{{ord(ch):x}}}" for ch in text)


def _schema() -> Any:
    t = _tantivy()
    sb = t.SchemaBuilder()
    sb.add_text_field(ID, stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field(TEXT, tokenizer_name=ANALYZER, index_option="position")
    for name in (PATH, DIRS, EXT, META):
        sb.add_text_field(name, tokenizer_name="raw", index_option="basic")
    return sb.build()


def _analyzer() -> Any:
    t = _tantivy()
    return (
        t.TextAnalyzerBuilder(t.Tokenizer.whitespace())
        .filter(t.Filter.lowercase())
        .filter(t.Filter.stemmer("english"))
        .build()
    )


class KeywordIndex:
    """One collection's keyword index, opened for writing (the agent) or reading."""

    def __init__(self, path: Path, read_only: bool) -> None:
        t = _tantivy()
        self.path = path
        self.read_only = read_only
        self._schema = _schema()
        self._analyzer = _analyzer()
        if read_only and not (path / "meta.json").is_file():
            raise IndexError_(f"there is no keyword index at {path}", "start the agent (or `ragd run --once`) "
                              "once: it makes the keyword index again from the index")  # fmt: skip
        try:
            if read_only:
                self._index = t.Index.open(str(path))
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._index = t.Index(self._schema, path=str(path), reuse=True)
            self._index.register_tokenizer(ANALYZER, self._analyzer)
            self._writer: Any = None if read_only else self._index.writer(heap_size=HEAP, num_threads=1)
            if self._writer is not None:
                # the files of a commit a crash cut short (a `.del` written, meta.json not): the same commit made
                # again would find them there and fail ("FileAlreadyExists"), and the agent would not start
                self._writer.garbage_collect_files()
            self._index.reload()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # tantivy's errors, and a Rust panic (pyo3's PanicException)
            raise IndexError_(f"the keyword index at {path} cannot be opened: {err}",
                              "delete that folder: the agent rebuilds it from the index") from err  # fmt: skip

    # -- the journal of writes not yet in the keyword index ------------------------------------------------------
    def pending(self) -> list[str]:
        """The sources and folders a write named and no commit has yet covered (a crash in between)."""
        try:
            lines = (self.path / JOURNAL).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            with contextlib.suppress(ValueError):  # a line cut short by the crash: its write never started
                found.append(str(json.loads(line)))
        return list(dict.fromkeys(found))

    def begin(self, paths: Iterable[str]) -> None:
        """Name the sources or folders the next write touches, durably, before zvec is written."""
        data = "".join(json.dumps(p) + "\n" for p in paths).encode("utf-8")
        fd = os.open(self.path / JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _settled(self) -> None:
        (self.path / JOURNAL).unlink(missing_ok=True)

    # -- writes ------------------------------------------------------------------------------------------------
    def _document(self, doc: KeywordDoc) -> Any:
        d = _tantivy().Document()
        d.add_text(ID, doc.id)
        d.add_text(TEXT, doc.words if doc.words is not None else words.joined(doc.text, normalized=True))
        d.add_text(PATH, doc.path)
        for directory in ancestors(doc.path):
            d.add_text(DIRS, directory)
        d.add_text(EXT, doc.ext)
        for term in doc.meta_terms.strip("|").split("|") if doc.meta_terms else ():
            d.add_text(META, term)
        return d

    def write(self, *, sources: Iterable[str] = (), folders: Iterable[str] = (),
              docs: Iterable[KeywordDoc] = ()) -> None:  # fmt: skip
        """Remove every chunk of `sources` and below `folders` (a source at a folder's own path is a file of that
        name, not in it: kept, as the collection keeps it), add `docs`, commit, and empty the journal."""
        w = self._writer
        for source in sources:
            w.delete_documents_by_term(PATH, source)
        for folder in folders:
            t, term = _tantivy(), _dir_term(folder)
            w.delete_documents_by_query(t.Query.boolean_query([
                (t.Occur.Must, t.Query.term_query(self._schema, DIRS, term)),
                (t.Occur.MustNot, t.Query.term_query(self._schema, PATH, term))]))  # fmt: skip
        self.add(docs)
        self.commit()

    def add(self, docs: Iterable[KeywordDoc]) -> None:
        """Add `docs`, seen by searches after the next `commit`."""
        for doc in docs:
            self._writer.add_document(self._document(doc))

    def commit(self) -> None:
        self._writer.commit()
        self._index.reload()
        self._settled()

    def clear(self) -> None:
        self._writer.delete_all_documents()
        self.commit()

    # -- reads -------------------------------------------------------------------------------------------------
    def documents(self) -> int:
        return int(self._index.searcher().num_docs)

    def analyzed(self, text: str) -> list[str]:
        """The index's terms for `text` (cut, lower-cased, stemmed), in order."""
        return [str(t) for t in self._analyzer.analyze(words.joined(text))]

    def _term_query(self, found: Sequence[fts.Term]) -> Any:
        t = _tantivy()
        clauses = []
        for term in found:
            analyzed = self.analyzed(term.text)
            if not analyzed:
                continue
            if not term.phrase or len(analyzed) == 1:  # a CJK run: its words OR-ed; one word either way
                clauses += [t.Query.term_query(self._schema, TEXT, w) for w in dict.fromkeys(analyzed)]
            else:
                clauses.append(t.Query.phrase_query(self._schema, TEXT, analyzed))
        if not clauses:
            return None
        return t.Query.boolean_query([(t.Occur.Should, c) for c in clauses])

    def _filter(self, prefixes: Sequence[str], exts: Sequence[str], where: Sequence[Where]) -> list[Any]:
        t, s = _tantivy(), self._schema
        should = t.Occur.Should

        def any_of(field: str, values: Iterable[str]) -> Any:
            return t.Query.boolean_query(
                [(should, t.Query.term_query(s, field, v)) for v in dict.fromkeys(values)]
            )

        out = []
        if prefixes:
            out.append(any_of(DIRS, (_dir_term(p) for p in prefixes)))
        if exts:
            out.append(any_of(EXT, exts))
        for w in where:
            term = w.term()
            out.append(t.Query.regex_query(s, META, _regex_literal(term) + ".*") if w.prefix
                       else t.Query.term_query(s, META, term))  # fmt: skip
        return out

    def search(
        self,
        found: Sequence[fts.Term],
        k: int,
        *,
        prefixes: Sequence[str] = (),
        exts: Sequence[str] = (),
        where: Sequence[Where] = (),
    ) -> list[tuple[str, float]]:
        """The best `k` chunks for the terms `found` (OR-ed, phrases kept whole) as (zvec id, BM25 score)."""
        t = _tantivy()
        query = self._term_query(found)
        if query is None:
            return []
        filters = self._filter(prefixes, exts, where)
        if filters:
            query = t.Query.boolean_query(
                [(t.Occur.Must, query), *((t.Occur.Must, t.Query.const_score_query(f, 0.0)) for f in filters)]
            )
        searcher = self._index.searcher()
        result = searcher.search(query, k, count=False)
        return [(str(searcher.doc(addr)[ID][0]), float(score)) for score, addr in result.hits]

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(ValueError):
                self._writer.commit()
                self._writer.wait_merging_threads()  # the writer is spent after this
            self._writer = None
        self._index = None


def open_keywords(collection: Path, *, read_only: bool) -> KeywordIndex:
    """The keyword index of the collection at `collection`. For writing, one that cannot be opened (damaged) is
    deleted and made again, empty: the caller refills it from the collection (zvec/backend.py, `_repair_keywords`)."""
    try:
        return KeywordIndex(place(collection), read_only)
    except IndexError_ as err:
        if read_only:
            raise
        log.warning("%s; making it again from the index", err.message)
        destroy(collection)
        return KeywordIndex(place(collection), read_only)


def destroy(collection: Path) -> None:
    shutil.rmtree(place(collection), ignore_errors=True)
