"""The IndexBackend contract: the same tests against every backend (zvec, Milvus Lite), then Milvus's own
promises (agents sharing one collection, an unreachable server).

Each test that writes opens a fresh index in its tmp_path (`ix`); tests that only read share one index per
backend and module (`tree`: odd paths, `corpus`: a few documents to search). Vectors are 8-dimensional and
exact, so expected cosine similarities are known.
"""

from __future__ import annotations

import importlib.util
import math
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexError_, IndexUnavailable
from ragd.index import (
    MAX_K,
    Hit,
    IndexBackend,
    IndexChunk,
    SourceSummary,
    SourceWrite,
    destroy_index,
    open_index,
)
from ragd.model import md5_hex
from tests.contract.conftest import (
    BACKENDS,
    DIM,
    IDENTITY,
    Opener,
    basis,
    chunk,
    chunks_of,
    config,
    unit,
    write,
)


def stored(h: Hit) -> tuple[object, ...]:
    return (h.source_path, h.chunk_index, h.content, h.heading_path, h.page, h.start_line, h.end_line, h.root)


def expected(c: IndexChunk, root: str) -> tuple[object, ...]:
    return (c.source_path, c.chunk_index, c.content, c.heading_path, c.page, c.start_line, c.end_line, root)


def paths_of(hits: list[Hit]) -> list[str]:
    return [h.source_path for h in hits]


# -- 1. writes: what sources() and chunks() read back --------------------------------------------------------
def test_write_sources_then_sources_and_chunks_read_back_exactly(ix: IndexBackend) -> None:
    a, b = "/r/docs/guide.md", "/r/docs/report.pdf"
    a_chunks = [
        chunk(a, 0, "alpha one", heading_path=("Guide", "Intro")),
        chunk(a, 1, "alpha two", heading_path=("Guide", "Setup", "Linux")),
        chunk(a, 2, "alpha three"),  # no heading: ()
    ]
    b_chunks = [chunk(b, 0, "page one text", page=1), chunk(b, 1, "page two text", page=7)]
    ix.write_sources(
        [SourceWrite(a, "md5-a-1", "/r", a_chunks), SourceWrite(b, "md5-b", "/r/docs", b_chunks)]
    )

    assert ix.sources() == {a: SourceSummary(a, "md5-a-1", 3), b: SourceSummary(b, "md5-b", 2)}
    assert ix.count() == 5
    got = ix.chunks(a)
    assert [stored(h) for h in got] == [expected(c, "/r") for c in a_chunks]
    assert all(h.score == 0.0 and h.source_chunks == 3 for h in got)
    assert all(type(h.heading_path) is tuple for h in got)
    pages = ix.chunks(b)
    assert [stored(h) for h in pages] == [expected(c, "/r/docs") for c in b_chunks]
    assert [type(h.page) for h in pages] == [int, int]
    assert ix.chunks("/r/docs/missing.md") == []


# every first character the listing's parts divide at, each side of it, and md5s no hash makes
ODD_MD5S = [
    "0",
    "1",
    "9z",
    "a",
    "efff",
    "f",
    "ff",
    "g",
    "ABC",
    "~",
    "é",
    "md5-x",
    *(f"{c}{'0' * 31}" for c in "123456789bcde"),
]


@pytest.mark.parametrize("parts", [False, True], ids=["one query", "in parts"])
def test_sources_lists_every_source_whatever_its_md5(
    backend: str, reopen: Opener, parts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long listing is made in parts by the md5's first character (zvec; `parts`: past 5 chunks, not 4,096):
    none is missed or listed twice, by a writer or a read-only handle."""
    if parts and backend != "zvec":
        pytest.skip("listed in parts by zvec only")
    if parts:
        from ragd.index.zvec import reads as zvec_reads

        monkeypatch.setattr(zvec_reads, "ONE_QUERY", 5)
    writer = reopen()
    want = {}
    for n, md5 in enumerate(ODD_MD5S):
        path = f"/m/{n:02d}.md"
        write(writer, path, ["one", "two"][: 1 + n % 2], md5=md5)
        want[path] = SourceSummary(path, md5, 1 + n % 2)
    assert writer.sources() == want
    assert writer.sources("/m") == want
    writer.flush()
    writer.close()
    ro = reopen(read_only=True)
    assert ro.sources() == want


def test_rewriting_a_source_with_fewer_chunks_removes_the_extra_ones(ix: IndexBackend) -> None:
    a, b = "/r/a.md", "/r/b.md"
    ix.replace_source(a, "v1", "/r", chunks_of(a, ["one", "two", "three", "four"]))
    ix.replace_source(b, "vb", "/r", chunks_of(b, ["bee"]))
    assert ix.sources()[a] == SourceSummary(a, "v1", 4)

    new = [chunk(a, 0, "uno", heading_path=("H",)), chunk(a, 1, "dos", page=3)]
    ix.replace_source(a, "v2", "/r2", new)
    assert ix.sources() == {a: SourceSummary(a, "v2", 2), b: SourceSummary(b, "vb", 1)}
    assert [stored(h) for h in ix.chunks(a)] == [expected(c, "/r2") for c in new]
    assert ix.count() == 3

    # write_sources: one source shrinks (the caller says how many it holds), one grows, one is emptied
    ix.write_sources(
        [
            SourceWrite(a, "v3", "/r", chunks_of(a, ["solo"]), held=2),
            SourceWrite(b, "vb2", "/r", chunks_of(b, ["b0", "b1", "b2"])),
        ]
    )
    assert ix.sources() == {a: SourceSummary(a, "v3", 1), b: SourceSummary(b, "vb2", 3)}
    assert [h.content for h in ix.chunks(a)] == ["solo"]
    assert [h.content for h in ix.chunks(b)] == ["b0", "b1", "b2"]
    ix.write_sources([SourceWrite(b, "gone", "/r", [])])  # no chunks: the source is removed
    assert ix.sources() == {a: SourceSummary(a, "v3", 1)}
    assert ix.chunks(b) == []
    assert ix.count() == 1


# -- 2. path prefixes: exact, whatever the characters --------------------------------------------------------
ODD_DIRS = [
    'q"uote',
    "it's",
    "back\\slash",
    "trail\\",
    "\\",
    "bs\\'q",
    'bs\\"q',
    "new\nline",
    "tab\tcr\r",
    "emoji🚀",
    "中文目录",
    "50%_mixed",
    "%",
    "_",
    "star*[x]?",
    "sp ace",
    "e\u0301",  # a decomposed é: matches only itself, not its composed twin
]
TREE: dict[str, int] = {  # source path: how many chunks
    "/r/a": 1,  # a file named like the directory prefix: matches it
    "/r/a/x.md": 2,
    "/r/a/sub/y.md": 1,
    "/r/ab/x.md": 1,
    "/r/a_b/x.md": 1,
    "/r/a%b/x.md": 1,
    "/r/a-b/x.md": 1,  # "-", "." and " " sort before "/", "0" right after it
    "/r/a.b/x.md": 1,
    "/r/a b/x.md": 1,
    "/r/a0/x.md": 1,
    "/r/A/x.md": 1,  # filters are case-sensitive
    "/r/50%": 1,
    "/r/500": 1,
    "/r/50%x": 1,
    "/r/back/x.md": 1,  # what precedes the backslash of back\slash
    "/r/bs/x.md": 1,
    "/r/new/x.md": 1,
    "/r/q/x.md": 1,
    "/r/it/x.md": 1,
    "/r/\u00e9/x.md": 1,  # the composed é
    "/rr/x.md": 1,
    **{f"/r/{name}/f.md": 2 for name in ODD_DIRS},
    **{f"/r/{name}x/f.md": 1 for name in ODD_DIRS},  # a sibling that starts with the same name
}
PREFIXES = [
    "/r/a",
    "/r/a/",
    "/r/a/x.md",
    "/r/a//",
    "/r/a/sub",
    "/r/A",
    "/r/ab",
    "/r/a_b",
    "/r/a%b",
    "/r/50%",
    "/r/back",
    *(f"/r/{name}" for name in ODD_DIRS),
    "/r/nothing",
    "/r",
    "/",
]


def under(prefix: str, paths: list[str] | dict[str, int] = TREE) -> set[str]:
    base = prefix.rstrip("/")
    return {p for p in paths if p == base or p.startswith(base + "/")}


def write_tree(index: IndexBackend) -> None:
    index.write_sources(
        [
            SourceWrite(path, md5_hex(path), "/r", [chunk(path, i, f"marker text {i}") for i in range(n)])
            for path, n in TREE.items()
        ]
    )
    index.flush()


def shared_index(
    request: pytest.FixtureRequest, factory: pytest.TempPathFactory, fill: Callable[[IndexBackend], None]
) -> Iterator[IndexBackend]:
    """A module's index of the backend `request.param`, filled once and then only read."""
    if request.param == "milvus":
        pytest.importorskip("pymilvus")
        pytest.importorskip("milvus_lite")
    base = factory.mktemp(f"shared-{request.param}")
    index = open_index(base / "data", IDENTITY, config(request.param, base))
    fill(index)
    index.flush()
    yield index
    index.close()


@pytest.fixture(scope="module", params=BACKENDS)
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexBackend]:
    """One index per backend holding TREE."""
    yield from shared_index(request, tmp_path_factory, write_tree)


def test_the_tree_is_what_was_written(tree: IndexBackend) -> None:
    assert {p: s.chunk_count for p, s in tree.sources().items()} == TREE
    assert tree.count() == sum(TREE.values()) < MAX_K  # one query can return the whole tree


@pytest.mark.parametrize(
    "path", [p for p in TREE if p.startswith(("/r/a", "/r/50%")) or "/f.md" in p], ids=repr
)
def test_chunks_of_an_odd_path_are_its_own(tree: IndexBackend, path: str) -> None:
    got = tree.chunks(path)
    assert [(h.source_path, h.chunk_index, h.content) for h in got] == [
        (path, i, f"marker text {i}") for i in range(TREE[path])
    ]


@pytest.mark.parametrize("prefix", PREFIXES, ids=repr)
def test_sources_under_a_prefix_are_exactly_those_at_or_below_it(tree: IndexBackend, prefix: str) -> None:
    want = under(prefix)
    assert set(tree.sources(prefix)) == want
    if prefix in ("/r/a", "/r/a/"):
        assert want == {"/r/a", "/r/a/x.md", "/r/a/sub/y.md"}  # never /r/ab, /r/a_b, /r/a%b
    if prefix == "/r/50%":
        assert want == {"/r/50%"}


@pytest.mark.parametrize("prefix", PREFIXES, ids=repr)
def test_queries_under_a_prefix_find_exactly_those_at_or_below_it(tree: IndexBackend, prefix: str) -> None:
    want = under(prefix)
    dense = tree.query(vector=basis(0), text=None, k=MAX_K, path_prefixes=[prefix])
    assert set(paths_of(dense)) == want
    assert len(dense) == sum(TREE[p] for p in want)  # every chunk of them (fewer than MAX_K in all)
    words = tree.query(vector=None, text="marker", k=MAX_K, path_prefixes=[prefix])
    assert set(paths_of(words)) == want


def test_queries_under_several_prefixes_find_their_union(tree: IndexBackend) -> None:
    prefixes = ["/r/a", "/r/50%", "/r/back\\slash", '/r/q"uote']
    want = set().union(*(under(p) for p in prefixes))
    assert set(paths_of(tree.query(vector=basis(0), text=None, k=MAX_K, path_prefixes=prefixes))) == want
    assert set(paths_of(tree.query(vector=None, text="marker", k=MAX_K, path_prefixes=prefixes))) == want
    both = tree.query(vector=basis(0), text="marker", k=MAX_K, path_prefixes=prefixes)
    assert set(paths_of(both)) == want


def test_delete_subtree_removes_exactly_the_subtree(ix: IndexBackend) -> None:
    write_tree(ix)
    for relative in ("", "r/a", "./r"):
        with pytest.raises((ValueError, IndexError_), match="absolute path"):
            ix.delete_subtree(relative)
    assert ix.count() == sum(TREE.values())
    left = dict(TREE)
    for prefix in ["/r/a", "/r/50%", *(f"/r/{name}" for name in ODD_DIRS), "/r/nothing"]:
        # a source at the prefix is a file of that name, not in the folder
        gone = under(prefix, left) - {prefix}
        removed = ix.delete_subtree(prefix)
        for path in gone:
            del left[path]
        assert {p: s.chunk_count for p, s in ix.sources().items()} == left, prefix
        assert removed == sum(TREE[p] for p in gone), prefix
    assert ix.count() == sum(left.values())
    assert "/r/ab/x.md" in left and "/r/a%b/x.md" in left and "/r/500" in left and "/r/a" in left
    # ... and the keyword index agrees: the file `/r/a` is still found by its words, nothing below `/r/a/` is
    assert set(paths_of(ix.query(vector=None, text="marker", k=MAX_K))) == set(left)


BACKSLASH_QUOTE = '/r/bs\\"q/f.md'


def test_delete_source_removes_exactly_one_source(ix: IndexBackend) -> None:
    write_tree(ix)
    left = dict(TREE)
    for path in ["/r/a", "/r/50%", *(f"/r/{name}/f.md" for name in ODD_DIRS)]:
        if path == BACKSLASH_QUOTE:
            continue  # below
        assert ix.delete_source(path) == left.pop(path), path
        assert {p: s.chunk_count for p, s in ix.sources().items()} == left, path
        assert ix.chunks(path) == [], path
        assert ix.delete_source(path) == 0, path
    assert ix.count() == sum(left.values())


def test_delete_source_of_a_path_with_a_backslash_and_a_quote(backend: str, ix: IndexBackend) -> None:
    write_tree(ix)
    assert ix.delete_source(BACKSLASH_QUOTE) == TREE[BACKSLASH_QUOTE]
    assert set(ix.sources()) == set(TREE) - {BACKSLASH_QUOTE}


def test_a_backslash_prefix_finds_its_chunks_among_many_that_share_its_start(
    backend: str, ix: IndexBackend
) -> None:
    target = "/r/b\\s/f.md"
    writes = [SourceWrite(f"/r/b{i:03}.md", "m", "/r", [chunk(f"/r/b{i:03}.md", 0, "marker marker")])
              for i in range(MAX_K + 20)]  # fmt: skip
    writes.append(SourceWrite(target, "m", "/r", [chunk(target, 0, "marker among words", vector=basis(1))]))
    ix.write_sources(writes)
    assert set(ix.sources("/r/b\\s")) == {target}
    assert paths_of(ix.query(vector=basis(0), text=None, k=5, path_prefixes=["/r/b\\s"])) == [target]
    assert paths_of(ix.query(vector=None, text="marker", k=5, path_prefixes=["/r/b\\s"])) == [target]


@pytest.mark.parametrize("prefix", ["", "r/a", "./r", "~/r"], ids=repr)
def test_a_path_filter_needs_an_absolute_path(tree: IndexBackend, prefix: str) -> None:
    for call in (
        lambda: tree.sources(prefix),
        lambda: tree.query(vector=basis(0), text=None, k=3, path_prefixes=[prefix]),
        lambda: tree.query(vector=None, text="marker", k=3, path_prefixes=["/r/a", prefix]),
    ):
        with pytest.raises((ValueError, IndexError_), match="absolute path"):
            call()
    assert tree.count() == sum(TREE.values())


def test_a_path_that_is_not_utf8_is_refused_with_index_error(ix: IndexBackend) -> None:
    bad = "/r/\udcff"  # how Python spells a file name holding the byte 0xff
    write(ix, "/r/ok.md", ["text"])
    calls = {
        "write_sources": lambda: write(ix, bad + "/f.md", ["text"]),
        "replace_source": lambda: ix.replace_source("/r/ok.md", "m", bad, chunks_of("/r/ok.md", ["x"])),
        "sources": lambda: ix.sources(bad),
        "chunks": lambda: ix.chunks(bad + "/f.md"),
        "query": lambda: ix.query(vector=basis(0), text=None, k=3, path_prefixes=[bad]),
        "delete_source": lambda: ix.delete_source(bad + "/f.md"),
        "delete_subtree": lambda: ix.delete_subtree(bad),
    }
    for name, call in calls.items():
        with pytest.raises(IndexError_):
            call()
        assert ix.count() == 1, name
    assert [h.content for h in ix.chunks("/r/ok.md")] == ["text"]


# -- 3. query modes ------------------------------------------------------------------------------------------
def test_a_vector_query_ranks_by_cosine_similarity(ix: IndexBackend) -> None:
    cosines = {  # path: (vector, its cosine similarity with basis(0))
        "/q/same.md": (basis(0), 1.0),
        "/q/near.md": (unit(1, 1), math.sqrt(0.5)),
        "/q/far.md": (unit(1, 1, 1), math.sqrt(1 / 3)),
        "/q/orthogonal.md": (basis(1), 0.0),
        "/q/opposite.md": (-basis(0), -1.0),
    }
    for order, (path, (vec, _)) in enumerate(reversed(cosines.items())):  # written in another order
        ix.replace_source(path, f"m{order}", "/q", [chunk(path, 0, f"text {order}", vector=vec)])
    hits = ix.query(vector=basis(0), text=None, k=5)
    assert paths_of(hits) == list(cosines)
    # zvec keeps the vectors in half precision (11 significant bits): a cosine within 1e-3
    assert [h.score for h in hits] == pytest.approx([c for _, c in cosines.values()], abs=1e-3)
    assert paths_of(ix.query(vector=basis(0) * 7.5, text=None, k=2)) == ["/q/same.md", "/q/near.md"]
    assert hits[0].content == "text 4" and hits[0].root == "/q"


CORPUS = {
    "/k/music.md": "The xylophone solo was loud and bright.",
    "/k/disk.md": "服务器磁盘空间不足，请清理日志文件。",
    "/k/garden.md": "Plain notes about the garden and the roses.",
    "/k/kitchen.md": "Plain notes about the kitchen and the oven.",
    "/k/travel.md": "Plain notes about trains and the station.",
    "/k/phrase.md": "the release plan is ready for review",
    "/k/words.md": "plan to release the album in spring; reset the conn after an err",
    "/k/code.md": "the client sees ERR_CONN_RESET from the proxy",
}


def write_corpus(index: IndexBackend) -> None:
    for path, text in CORPUS.items():
        write(index, path, [text], root="/k")


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IndexBackend]:
    """One index per backend holding CORPUS, one chunk a document."""
    yield from shared_index(request, tmp_path_factory, write_corpus)


def test_a_keyword_query_finds_rare_english_and_chinese_words(corpus: IndexBackend) -> None:
    ix = corpus
    hits = ix.query(vector=None, text="xylophone", k=5)
    assert paths_of(hits) == ["/k/music.md"]
    assert hits[0].score > 0 and "xylophone" in hits[0].content
    assert paths_of(ix.query(vector=None, text="XYLOPHONE", k=5)) == ["/k/music.md"]
    assert paths_of(ix.query(vector=None, text="磁盘空间", k=5)) == ["/k/disk.md"]
    assert ix.query(vector=None, text="zeppelin", k=5) == []


RAW_TEXTS = ['"xylophone', "xylophone\\", "(xylophone", "+xylophone", "xylophone*", "AND xylophone OR",
             "Xylophone!", "ｘｙｌｏｐｈｏｎｅ", "xylóphone", "NOT xylophone", "field:x xylophone"]  # fmt: skip


@pytest.mark.parametrize("text", RAW_TEXTS, ids=repr)
def test_raw_user_text_is_never_query_syntax(corpus: IndexBackend, text: str) -> None:
    assert paths_of(corpus.query(vector=None, text=text, k=5)) == ["/k/music.md"]
    assert paths_of(corpus.query(vector=basis(0), text=text, k=5))[0] == "/k/music.md"


@pytest.mark.parametrize(
    "text",
    ["", " ", "\t\n", '"', "\\", "()", "*", "\x00", "\ud800", "a" * 2000, "的"],
    ids=lambda t: repr(t)[:12],
)
def test_text_without_searchable_words_finds_nothing_and_never_fails(corpus: IndexBackend, text: str) -> None:
    assert corpus.query(vector=None, text=text, k=5) == []
    assert len(corpus.query(vector=basis(0), text=text, k=5)) == 5


@pytest.mark.parametrize(
    ("text", "want"),
    [('"release plan"', "/k/phrase.md"), ("ERR_CONN_RESET", "/k/code.md")],
)
def test_phrases_and_identifiers_match_as_sequences(corpus: IndexBackend, text: str, want: str) -> None:
    assert paths_of(corpus.query(vector=None, text=text, k=5)) == [want]  # never /k/words.md


FILLERS = [
    "apples oranges pears",
    "rivers lakes oceans",
    "trains buses trams",
    "violins cellos harps",
    "granite marble basalt",
    "sparrows eagles owls",
    "copper silver gold",
    "tulips daisies lilies",
    "hammers saws drills",
    "comets asteroids moons",
]


def test_a_hybrid_query_ranks_the_document_matching_both_first(ix: IndexBackend) -> None:
    docs = {  # path: (content, vector); the query: basis(0) and "xylophone quasar"
        "/h/vector_only.md": ("nothing of the kind here at all", basis(0)),  # the vector side's first
        "/h/both.md": ("a xylophone under a quasar sky", unit(0.8, 0.6)),  # second there, first by keywords
        "/h/words_only.md": ("one xylophone alone on a shelf", basis(1)),
    }
    for i, text in enumerate(FILLERS):
        docs[f"/h/filler{i}.md"] = (text, unit(0, 0.2, 1, 0.1 * i))
    for path, (text, vec) in docs.items():
        ix.replace_source(path, md5_hex(text), "/h", [chunk(path, 0, text, vector=vec)])
    assert paths_of(ix.query(vector=basis(0), text=None, k=3))[:2] == ["/h/vector_only.md", "/h/both.md"]
    assert paths_of(ix.query(vector=None, text="xylophone quasar", k=3))[0] == "/h/both.md"
    hybrid = ix.query(vector=basis(0), text="xylophone quasar", k=3)
    assert paths_of(hybrid)[0] == "/h/both.md"
    assert set(paths_of(hybrid)) == {"/h/both.md", "/h/vector_only.md", "/h/words_only.md"}
    assert hybrid[0].score > hybrid[1].score


def test_extensions_filter_by_file_extension(ix: IndexBackend) -> None:
    for path in ["/e/a.md", "/e/B.MD", "/e/c.txt", "/e/d.markdown", "/e/md", "/e/x.md.txt", "/e/md.d/y.pdf"]:
        write(ix, path, ["shared words"], root="/e")
    for exts, want in (
        (["md"], {"/e/a.md", "/e/B.MD"}),
        ([".TXT"], {"/e/c.txt", "/e/x.md.txt"}),
        (["md", "pdf"], {"/e/a.md", "/e/B.MD", "/e/md.d/y.pdf"}),
        (["doc"], set()),
    ):
        assert set(paths_of(ix.query(vector=basis(0), text=None, k=20, extensions=exts))) == want, exts
        assert set(paths_of(ix.query(vector=None, text="shared", k=20, extensions=exts))) == want, exts
    assert paths_of(
        ix.query(vector=basis(0), text=None, k=20, extensions=["md"], path_prefixes=["/e/B.MD"])
    ) == ["/e/B.MD"]


def test_k_must_be_between_1_and_max_k(corpus: IndexBackend) -> None:
    for k in (0, -1, MAX_K + 1):
        for vector, text in ((basis(0), None), (None, "xylophone"), (basis(0), "xylophone")):
            with pytest.raises(ValueError):
                corpus.query(vector=vector, text=text, k=k)
    assert len(corpus.query(vector=basis(0), text=None, k=1)) == 1
    assert len(corpus.query(vector=basis(0), text=None, k=MAX_K)) == len(CORPUS)
    assert len(corpus.query(vector=basis(0), text="xylophone", k=MAX_K)) == len(CORPUS)


# -- 4. invalid input fails before anything is written -------------------------------------------------------
def _bad(kind: str) -> list[IndexChunk]:
    p = "/v/keep.md"
    if kind == "zero vector":
        return [chunk(p, 0, "x", vector=np.zeros(DIM, dtype=np.float32))]
    if kind == "nan vector":
        return [chunk(p, 0, "x", vector=np.array([1.0, math.nan, *[0.0] * (DIM - 2)], dtype=np.float32))]
    if kind == "infinite vector":
        return [chunk(p, 0, "x", vector=np.array([math.inf, *[0.0] * (DIM - 1)], dtype=np.float32))]
    if kind == "dimension 7":
        return [chunk(p, 0, "x", vector=np.ones(DIM - 1, dtype=np.float32))]
    if kind == "dimension 9":
        return [chunk(p, 0, "x", vector=np.ones(DIM + 1, dtype=np.float32))]
    if kind == "chunk indices 0, 2":
        return [chunk(p, 0, "x"), chunk(p, 2, "y")]
    if kind == "chunk indices 1, 0":
        return [chunk(p, 1, "x"), chunk(p, 0, "y")]
    if kind == "another source's chunk":
        return [chunk(p, 0, "x"), chunk("/v/other.md", 1, "y")]
    if kind == "a valid chunk, then a zero vector":
        return [chunk(p, 0, "x"), chunk(p, 1, "y", vector=np.zeros(DIM, dtype=np.float32))]
    raise AssertionError(kind)


BAD = [
    "zero vector",
    "nan vector",
    "infinite vector",
    "dimension 7",
    "dimension 9",
    "chunk indices 0, 2",
    "chunk indices 1, 0",
    "another source's chunk",
    "a valid chunk, then a zero vector",
]


def test_invalid_input_fails_before_anything_is_written(ix: IndexBackend) -> None:
    write(ix, "/v/keep.md", ["k0", "k1", "k2"], md5="keep")
    held = {"/v/keep.md": SourceSummary("/v/keep.md", "keep", 3)}
    assert ix.sources() == held
    fresh = SourceWrite("/v/new.md", "new", "/v", chunks_of("/v/new.md", ["n0"]))
    for kind in BAD:
        # the bad write would shrink keep.md from 3 chunks to 1 or 2: none of it may happen, nor the good one
        with pytest.raises((IndexError_, ValueError)):
            ix.write_sources([fresh, SourceWrite("/v/keep.md", "bad", "/v", _bad(kind))])
        with pytest.raises((IndexError_, ValueError)):
            ix.replace_source("/v/keep.md", "bad", "/v", _bad(kind))
        assert ix.count() == 3, kind
        assert ix.sources() == held, kind
        assert [h.content for h in ix.chunks("/v/keep.md")] == ["k0", "k1", "k2"], kind


def test_an_invalid_query_vector_is_refused(corpus: IndexBackend) -> None:
    for vector in (np.zeros(DIM), np.full(DIM, math.nan), np.ones(DIM - 1), np.ones(DIM + 1)):
        for text in (None, "xylophone"):
            with pytest.raises((IndexError_, ValueError)):
                corpus.query(vector=vector, text=text, k=3)


# -- 5. persistence ------------------------------------------------------------------------------------------
def test_written_and_flushed_sources_survive_close_and_reopen(reopen: Opener) -> None:
    ix = reopen()
    write(ix, "/p/a.md", ["alpha", "beta", "gamma"], md5="ma")
    write(ix, "/p/中文.md", ["磁盘空间不足"], md5="mz")
    ix.delete_source("/p/never.md")
    sources, count, chunks = ix.sources(), ix.count(), ix.chunks("/p/a.md")
    assert count == 4
    ix.flush()
    ix.close()
    for read_only in (False, True):
        again = reopen(read_only=read_only)
        assert again.sources() == sources
        assert again.count() == count
        assert [stored(h) for h in again.chunks("/p/a.md")] == [stored(h) for h in chunks]
        assert paths_of(again.query(vector=None, text="磁盘空间", k=3)) == ["/p/中文.md"]
        again.close()


# -- 6. count, and read-only handles -------------------------------------------------------------------------
def test_count_is_the_number_of_chunks_held(ix: IndexBackend) -> None:
    assert ix.count() == 0
    write(ix, "/c/a.md", ["1", "2", "3"])
    write(ix, "/c/b.md", ["1", "2"])
    assert ix.count() == 5
    write(ix, "/c/a.md", ["1"])
    assert ix.count() == 3
    assert ix.delete_source("/c/b.md") == 2
    assert ix.count() == 1
    assert ix.delete_subtree("/c") == 1
    assert ix.count() == 0


def test_a_read_only_handle_queries_but_never_writes(reopen: Opener) -> None:
    writer = reopen()
    write(writer, "/ro/a.md", ["the xylophone", "second"], md5="ma")
    writer.flush()
    writer.close()
    ro = reopen(read_only=True)
    assert ro.count() == 2
    assert ro.sources() == {"/ro/a.md": SourceSummary("/ro/a.md", "ma", 2)}
    assert paths_of(ro.query(vector=None, text="xylophone", k=3)) == ["/ro/a.md"]
    assert len(ro.query(vector=basis(0), text=None, k=3)) == 2
    attempts = {
        "replace_source": lambda: ro.replace_source("/ro/b.md", "m", "/ro", chunks_of("/ro/b.md", ["b"])),
        "write_sources": lambda: ro.write_sources([SourceWrite("/ro/a.md", "m", "/ro", [])]),
        "delete_source": lambda: ro.delete_source("/ro/a.md"),
        "delete_subtree": lambda: ro.delete_subtree("/ro"),
    }
    for name, attempt in attempts.items():
        with pytest.raises(IndexError_, match="read-only"):
            attempt()
        assert ro.count() == 2, name
    assert ro.sources() == {"/ro/a.md": SourceSummary("/ro/a.md", "ma", 2)}


def test_a_closed_handle_refuses_every_call(backend: str, reopen: Opener) -> None:
    ix = reopen()
    write(ix, "/c/a.md", ["text"])
    ix.close()
    for call in (
        ix.count,
        ix.sources,
        lambda: ix.query(vector=basis(0), text=None, k=1),
        lambda: write(ix, "/c/b.md", ["more"]),
    ):
        with pytest.raises(IndexError_):
            call()
    again = reopen()
    assert set(again.sources()) == {"/c/a.md"}


def test_a_read_only_open_needs_an_existing_index(reopen: Opener) -> None:
    with pytest.raises(IndexError_):
        reopen(read_only=True)


# -- 7. Milvus: agents sharing one collection ----------------------------------------------------------------
pytest_milvus = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("pymilvus", "milvus_lite")),
    reason="the milvus extra is not installed",
)


@pytest_milvus
class TestMilvusSharedCollection:
    SHARED = "/home/u/notes/a.md"

    @pytest.fixture
    def agents(self, tmp_path: Path) -> Iterator[tuple[Opener, Opener]]:
        uri = str(tmp_path / "kb.db")
        alice = Opener(tmp_path / "alice", IndexConfig(backend="milvus", uri=uri, agent_id="alice"))
        bob = Opener(tmp_path / "bob", IndexConfig(backend="milvus", uri=uri, agent_id="bob"))
        yield alice, bob
        alice.close_all()
        bob.close_all()

    def test_each_agent_sees_and_deletes_only_its_own_chunks(self, agents: tuple[Opener, Opener]) -> None:
        alice, bob = agents[0](), agents[1]()
        a_chunks = [chunk(self.SHARED, 0, "alice wrote about the xylophone", vector=basis(0))]
        b_chunks = [
            chunk(self.SHARED, i, f"bob wrote about the xylophone, part {i}", vector=unit(1, 0.1 * i))
            for i in range(3)
        ]
        alice.write_sources(
            [
                SourceWrite(self.SHARED, "md5-alice", "/home/u", a_chunks),
                SourceWrite("/home/u/other/b.md", "md5-b", "/home/u", chunks_of("/home/u/other/b.md", ["b"])),
            ]
        )
        bob.write_sources([SourceWrite(self.SHARED, "md5-bob", "/home/u", b_chunks)])

        assert alice.sources() == {
            self.SHARED: SourceSummary(self.SHARED, "md5-alice", 1),
            "/home/u/other/b.md": SourceSummary("/home/u/other/b.md", "md5-b", 1),
        }
        assert bob.sources() == {self.SHARED: SourceSummary(self.SHARED, "md5-bob", 3)}
        assert bob.sources("/home/u/notes") == {self.SHARED: SourceSummary(self.SHARED, "md5-bob", 3)}
        assert (alice.count(), bob.count()) == (2, 3)
        assert [h.content for h in alice.chunks(self.SHARED)] == ["alice wrote about the xylophone"]
        assert [h.content for h in bob.chunks(self.SHARED)] == [c.content for c in b_chunks]

        for vector, text in ((basis(0), None), (None, "xylophone"), (basis(0), "xylophone")):
            own = alice.query(vector=vector, text=text, k=10, scope="agent")
            assert own and {h.agent for h in own} == {"alice"}, (vector, text)
            assert all(h.content.startswith("alice") or h.content == "b" for h in own)
            every = alice.query(vector=vector, text=text, k=10, scope="all")
            assert {h.agent for h in every} == {"alice", "bob"}, (vector, text)
            assert all(h.content.startswith(h.agent) for h in every if h.source_path == self.SHARED)
            assert {h.agent for h in bob.query(vector=vector, text=text, k=10)} == {"bob"}

        assert alice.delete_source(self.SHARED) == 1
        assert bob.sources() == {self.SHARED: SourceSummary(self.SHARED, "md5-bob", 3)}
        assert alice.delete_subtree("/home/u") == 1
        assert alice.sources() == {} and alice.count() == 0
        assert bob.count() == 3 and [h.content for h in bob.chunks(self.SHARED)] == [
            c.content for c in b_chunks
        ]
        assert bob.delete_subtree("/home/u") == 3 and bob.count() == 0

    def test_listings_page_past_the_query_limit(
        self, agents: tuple[Opener, Opener], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from ragd.index.milvus import reads as milvus_reads

        monkeypatch.setattr(milvus_reads, "PAGE_ROWS", 3)  # one query per 3 rows, at most 5 rows a query
        monkeypatch.setattr(milvus_reads, "QUERY_LIMIT", 5)
        alice, bob = agents[0](), agents[1]()
        writes = [SourceWrite(f"/p/s{i}.md", f"m{i}", "/p", chunks_of(f"/p/s{i}.md", ["c"] * (i % 7 + 1)))
                  for i in range(30)]  # fmt: skip
        alice.write_sources(writes)
        bob.write_sources(writes[:3])
        assert alice.sources() == {w.source_path: SourceSummary(w.source_path, w.source_md5, len(w.chunks))
                                   for w in writes}  # fmt: skip
        assert [h.chunk_index for h in alice.chunks("/p/s6.md")] == list(range(7))
        total = sum(len(w.chunks) for w in writes)
        assert alice.count() == total
        assert alice.delete_subtree("/p") == total and alice.count() == 0
        assert bob.count() == 1 + 2 + 3

    def test_destroy_index_removes_only_the_agents_own_chunks(self, agents: tuple[Opener, Opener]) -> None:
        alice_at, bob_at = agents
        alice, bob = alice_at(), bob_at()
        write(alice, self.SHARED, ["alice one", "alice two"], md5="ma")
        write(bob, self.SHARED, ["bob one"], md5="mb")
        alice.close()
        assert destroy_index(alice_at.data_dir, IDENTITY, alice_at.cfg)
        assert bob.count() == 1 and bob.sources() == {self.SHARED: SourceSummary(self.SHARED, "mb", 1)}
        again = alice_at()
        assert again.count() == 0 and again.sources() == {}
        assert {h.agent for h in again.query(vector=basis(0), text=None, k=5, scope="all")} == {"bob"}
        again.close()
        assert not destroy_index(alice_at.data_dir, IDENTITY, alice_at.cfg)  # nothing of alice's left
        assert bob.count() == 1


# -- 8. Milvus: an unreachable server is a state, not a crash ------------------------------------------------
@pytest.fixture(params=["refused", "silent"])
def dead_uri(request: pytest.FixtureRequest) -> Iterator[str]:
    """A port with nothing listening (refused at once), or one that accepts and never answers (a timeout)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if request.param == "silent":
        sock.listen(8)
    else:
        sock.close()
    yield f"http://127.0.0.1:{port}"
    sock.close()


@pytest_milvus
def test_an_unreachable_milvus_server_raises_index_unavailable(tmp_path: Path, dead_uri: str) -> None:
    timeout = 0.5
    started = time.monotonic()
    ix = open_index(tmp_path, IDENTITY, IndexConfig(backend="milvus", uri=dead_uri, timeout=timeout))
    from ragd.index.milvus.backend import MilvusIndex

    assert isinstance(ix, MilvusIndex)
    try:
        assert time.monotonic() - started < timeout + 3
        health = ix.health()
        assert health["reachable"] is False and health["uri"] == dead_uri and health["last_error"]
        calls: dict[str, Callable[[], object]] = {
            "count": ix.count,
            "sources": ix.sources,
            "query": lambda: ix.query(vector=basis(0), text="words", k=3),
            "write_sources": lambda: ix.write_sources(
                [SourceWrite("/u/a.md", "m", "/u", chunks_of("/u/a.md", ["text"]))]
            ),
            "delete_subtree": lambda: ix.delete_subtree("/u"),
        }
        for name, call in calls.items():  # within the back-off: refused at once, the server is not asked
            began = time.monotonic()
            with pytest.raises(IndexUnavailable) as err:
                call()
            assert dead_uri in err.value.message, name
            assert time.monotonic() - began < 0.8 * timeout, name  # no new attempt, no timeout waited
        assert ix.stats()["documents"] is None
        time.sleep(max(0.0, health["retry_in_s"]) + 0.1)  # the back-off over: tried again, failed again
        with pytest.raises(IndexUnavailable, match=dead_uri.replace(".", r"\.")):
            ix.count()
        assert ix.health()["retry_in_s"] > health["retry_in_s"]  # doubled
        with pytest.raises(IndexUnavailable):
            ix.count()
    finally:
        ix.close()


def test_a_documents_lead_is_held_by_each_chunk_and_ranks_the_documents_found(ix: IndexBackend) -> None:
    """Every chunk of a source carries its document's lead vector (a rewrite without one clears it). A hybrid
    query ranks the documents found by their leads once more: the answer, second by its chunks, whose lead is the
    question's own, comes first; the reference, first by its chunks, has a lead below the first LEAD_DEPTH."""
    from ragd.index.ranking.fusion import LEAD_DEPTH
    from ragd.index.records import decode_lead

    def put(path: str, vec: np.ndarray, lead: np.ndarray | None, texts: int = 1) -> None:
        chunks = [chunk(path, i, f"passage {i} of {path}", vector=vec) for i in range(texts)]
        ix.write_sources([SourceWrite(path, md5_hex(path), "/l", chunks, lead=lead)])

    fillers = [f"/l/filler{i}.md" for i in range(LEAD_DEPTH + 1)]
    for n, path in enumerate(fillers):
        put(path, unit(1.0, 0.3 + 0.02 * n), unit(0.5, 1.0 + 0.1 * n))
    put("/l/answer.md", unit(1.0, 0.15), basis(0), texts=3)
    put("/l/reference.md", unit(1.0, 0.1), basis(3))
    held = ix.chunks("/l/answer.md")
    assert len(held) == 3
    for hit in held:
        lead = decode_lead(hit.lead, DIM)
        assert lead is not None and abs(float(lead @ basis(0)) - 1.0) < 1e-3
    assert paths_of(ix.query(vector=basis(0), text=None, k=2)) == ["/l/reference.md", "/l/answer.md"]
    assert paths_of(ix.query(vector=basis(0), text="zebra", k=1)) == ["/l/answer.md"]

    put("/l/answer.md", unit(1.0, 0.15), None, texts=3)  # written again without a lead: none held
    assert [h.lead for h in ix.chunks("/l/answer.md")] == ["", "", ""]
    assert paths_of(ix.query(vector=basis(0), text="zebra", k=1)) != ["/l/answer.md"]
