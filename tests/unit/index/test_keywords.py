"""The keyword index beside a zvec collection (index/keyword/keywords.py, index/keyword/words.py), on real collections: how text is
cut, filters on awkward paths and metadata, and how the keyword index is brought level with the collection after a
crash or a loss."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexError_
from ragd.index import SourceWrite, collection_dir, open_index
from ragd.index.keyword import keywords as K
from ragd.index.keyword import words
from ragd.index.keyword.fts import normalize, terms
from ragd.index.keyword.words import MAX_WORD, cut
from ragd.index.where import parse_where
from ragd.index.zvec.backend import ZvecIndex
from ragd.model import md5_hex
from tests.unit.index.test_index_zvec import IDENTITY, make_chunks, rel_paths


# -- cutting text into words ---------------------------------------------------------------------------------------
def test_chinese_is_cut_in_search_mode_and_other_text_into_letters_and_digits() -> None:
    assert cut("中华人民共和国") == ["中华", "华人", "人民", "共和", "共和国", "中华人民共和国"]
    assert cut("配置文件") == [
        "配置",
        "文件",
    ]  # 配置文件 is rarer than ragd's dictionary keeps (words.MIN_FREQ)
    assert "rjieba" not in sys.modules  # its default dictionary (33 MiB) never built
    assert cut("parse_config() E1042 os.path --delete v2.3") == [
        "parse", "config", "E1042", "os", "path", "delete", "v2", "3",
    ]  # fmt: skip
    assert cut("ＡＢＣ１２３ café") == ["ABC123", "cafe"]  # NFKC, accents off Latin letters
    assert cut("launch 🚀 now!") == ["launch", "🚀", "now"]
    assert cut("路由器router设置") == ["路由", "路由器", "router", "设置"]
    assert cut("  \n\t ") == [] and cut("") == []
    long = "a" * (2 * MAX_WORD + 5)
    assert cut(long) == ["a" * MAX_WORD, "a" * MAX_WORD, "aaaaa"]
    # text that is not ASCII and not CJK: letters of any script, symbols, and punctuation that is not a word
    assert cut("Grüße — “quoted” naïve… ½") == ["Gruße", "quoted", "naive", "1", "2"]
    assert cut("Привет, мир ✓ " + "я" * (MAX_WORD + 1)) == ["Привет", "мир", "✓", "я" * MAX_WORD, "я"]
    assert cut("안녕하세요。E42，设置") == [
        "안",
        "녕",
        "하",
        "세",
        "요",
        "E42",
        "设置",
    ]  # hangul: jieba, by syllable


# -- the keyword index through the collection -----------------------------------------------------------------------
AWKWARD = [
    'it\'s "q".md',
    "100% done.md",
    "a_b.md",
    "back\\slash.md",
    "new\nline.md",
    "emoji 🍄.md",
    "中文 名.md",
]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ZvecIndex]:
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    assert isinstance(ix, ZvecIndex)
    yield ix
    ix.close()


def _write(index: ZvecIndex, path: str, texts: list[str], root: str, **meta: list[str]) -> None:
    index.write_sources(
        [SourceWrite(path, md5_hex("".join(texts)), root, make_chunks(path, texts), metadata=meta)]
    )


def test_a_stored_full_text_field_is_cut_without_normalising_it_again() -> None:
    for text in (
        "ＡＢＣ１２３ café 路由器router设置",
        "Grüße — “quoted” naïve… ½",
        "Привет ✓ 🚀",
        "plain ascii_text",
    ):
        assert cut(normalize(text), normalized=True) == cut(text)
        assert words.joined(normalize(text), normalized=True) == " ".join(cut(text))


def test_the_dictionary_is_built_once_however_many_threads_ask_at_once() -> None:
    """`ragd run --once` builds it in a thread while documents are embedded; an index sync that starts meanwhile
    waits for that one, not a second."""
    import threading

    words._load_jieba.cache_clear()
    results: list[list[str]] = []
    threads = [threading.Thread(target=words.warm)] + [
        threading.Thread(target=lambda: results.append(cut("中华人民共和国 配置"))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert words._load_jieba.cache_info().misses == 1
    assert results == [cut("中华人民共和国 配置")] * 3 and "中华" in results[0]


def test_the_dictionary_is_read_a_line_at_a_time_into_the_cutter() -> None:
    """Read as one list, jieba's ~250,000 words were 16.5 MiB of Python objects in the agent while it built its
    cutter (a big folder renamed: the agent's first Chinese text to cut; docs/benchmarks/history.md)."""
    import tracemalloc

    words._load_jieba.cache_clear()
    tracemalloc.start()
    try:
        words.warm()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB traced while the cutter was built"
    assert (
        "中华" in cut("中华人民共和国 配置") and "rjieba" not in sys.modules
    )  # ragd's dictionary, not the default
    assert sum(1 for _ in words.dictionary()) > 100_000


def test_filters_match_exactly_whatever_a_path_or_a_value_holds(index: ZvecIndex, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    for i, name in enumerate(AWKWARD):
        for folder in ("d", "d_x", "d%", "dz"):
            _write(index, str(root / folder / name), [f"zebra {i} text"], str(root), tags=[f"T_{i}%"])
    for folder in ("d", "d_x", "d%", "dz"):
        hits = index.query(vector=None, text="zebra", k=100, path_prefixes=[str(root / folder)])
        assert {h.source_path for h in hits} == {str(root / folder / n) for n in AWKWARD}, folder
    one = str(root / "d_x" / AWKWARD[3])
    assert [h.source_path for h in index.query(vector=None, text="zebra", k=100, path_prefixes=[one])] == [
        one
    ]
    hits = index.query(vector=None, text="zebra", k=100, where=[parse_where("tag=t_4%")])
    assert sorted(rel_paths(hits, root)) == sorted(f"{f}/{AWKWARD[4]}" for f in ("d", "d_x", "d%", "dz"))
    hits = index.query(vector=None, text="zebra", k=100, where=[parse_where("tag^=t_")])
    assert len(hits) == 4 * len(AWKWARD)
    assert index.query(vector=None, text="zebra", k=100, where=[parse_where("tag^=t%")]) == []
    hits = index.query(vector=None, text="zebra", k=100, extensions=[".md"], path_prefixes=[str(root / "dz")])
    assert len(hits) == len(AWKWARD)
    assert index.delete_subtree(str(root / "d")) == len(AWKWARD)  # not d_x, d% nor dz
    assert index.delete_source(str(root / "dz" / AWKWARD[3])) == 1
    assert len(index.query(vector=None, text="zebra", k=100)) == 3 * len(AWKWARD) - 1
    assert K.open_keywords(index.path, read_only=True).documents() == index.count()


def test_a_common_word_does_not_change_the_top_k(index: ZvecIndex, tmp_path: Path) -> None:
    """tantivy skips documents that cannot enter the top k (block-max WAND): the first k are still the best k."""
    root = tmp_path / "kb"
    writes = []
    for i in range(300):
        text = f"common word {'rare ' * (i % 7)} filler{i} " + ("other " * (i % 5))
        writes.append(
            SourceWrite(
                str(root / f"f{i}.md"), md5_hex(text), str(root), make_chunks(str(root / f"f{i}.md"), [text])
            )
        )
    index.write_sources(writes)
    for text in ("common", "common rare", "rare other", "word filler17"):
        top = index.query(vector=None, text=text, k=100)
        for k in (1, 5, 10):
            assert [h.score for h in index.query(vector=None, text=text, k=k)] == [
                h.score for h in top[:k]
            ], text


def test_a_crash_between_the_collection_and_the_keyword_index_is_repaired_at_the_next_open(
    tmp_path: Path,
) -> None:
    root, data = tmp_path / "kb", tmp_path / "data"
    index = open_index(data, IDENTITY, IndexConfig())
    assert isinstance(index, ZvecIndex)
    a, b = str(root / "a.md"), str(root / "sub" / "b.md")
    _write(index, a, ["apple orchard"], str(root))
    _write(index, b, ["banana plantation", "banana split"], str(root))
    kw = index._kw
    assert kw is not None
    kw.write(sources=[a, b])  # the keyword index loses both sources ...
    kw.begin([a, str(root / "sub")])  # ... in a write the journal names, cut short by a crash
    assert index.query(vector=None, text="apple", k=5) == []
    index.close()
    assert json.loads((K.place(index.path) / K.JOURNAL).read_text().splitlines()[0]) == a

    index = open_index(data, IDENTITY, IndexConfig())
    assert rel_paths(index.query(vector=None, text="apple", k=5), root) == ["a.md"]
    assert [h.chunk_index for h in index.query(vector=None, text="banana", k=5)] in ([0, 1], [1, 0])
    assert not (K.place(index.path) / K.JOURNAL).exists()
    index.close()


def test_a_lost_keyword_index_is_rebuilt_from_the_collection(tmp_path: Path) -> None:
    root, data = tmp_path / "kb", tmp_path / "data"
    index = open_index(data, IDENTITY, IndexConfig())
    for i in range(30):
        _write(index, str(root / f"n{i}.md"), [f"note number{i} about kiwis"], str(root), tags=["fruit"])
    index.close()
    shutil.rmtree(K.place(collection_dir(data, IDENTITY)))
    index = open_index(data, IDENTITY, IndexConfig())
    assert len(index.query(vector=None, text="kiwis", k=100, where=[parse_where("tag=fruit")])) == 30
    assert rel_paths(index.query(vector=None, text="number7", k=3), root) == ["n7.md"]
    index.close()


def test_a_damaged_keyword_index_is_made_again_from_the_collection(tmp_path: Path) -> None:
    root, data = tmp_path / "kb", tmp_path / "data"
    index = open_index(data, IDENTITY, IndexConfig())
    _write(index, str(root / "w.md"), ["wombat burrow"], str(root))
    index.close()
    place = K.place(collection_dir(data, IDENTITY))
    (place / "meta.json").write_text("{ not json")
    with pytest.raises(IndexError_, match="keyword index"):
        open_index(data, IDENTITY, IndexConfig(), read_only=True).close()
    index = open_index(data, IDENTITY, IndexConfig())
    assert rel_paths(index.query(vector=None, text="wombat", k=3), root) == ["w.md"]
    index.close()


def test_a_read_only_handle_sees_what_the_writer_committed(tmp_path: Path) -> None:
    root, data = tmp_path / "kb", tmp_path / "data"
    index = open_index(data, IDENTITY, IndexConfig())
    _write(index, str(root / "x.md"), ["quokka island"], str(root))
    index.close()
    reader = open_index(data, IDENTITY, IndexConfig(), read_only=True)
    assert rel_paths(reader.query(vector=None, text="quokka", k=3), root) == ["x.md"]
    reader.close()


def test_every_term_kind_is_searchable() -> None:
    """What `fts.terms` makes of a question, the index can look up: a phrase, a bare word, a CJK run."""
    found = terms('"release plan" 数据库 ERR_CONN_RESET tomato')
    assert [t.phrase for t in found] == [True, False, True, True]


def test_a_commit_cut_short_by_a_crash_is_made_again_at_the_next_open(tmp_path: Path) -> None:
    """A SIGKILL during a commit can leave the commit's `.del` file written and meta.json not: the next open makes
    the same commit again, which failed with FileAlreadyExists (the agent could not start, found by the model
    test). The writer clears the files no commit refers to when it opens."""
    from ragd.index.keyword.keywords import KeywordDoc, KeywordIndex

    live, before = tmp_path / "kw", tmp_path / "kw-before"
    docs = [
        KeywordDoc(id=f"i{i}", text=f"hello world {i}", path=f"/r/f{i}.md", ext="md", meta_terms="")
        for i in range(5)
    ]
    k = KeywordIndex(live, read_only=False)
    k.add(docs)
    k.commit()
    k.close()
    shutil.copytree(live, before)
    k = KeywordIndex(live, read_only=False)
    k.write(sources=["/r/f1.md"])
    k.close()
    written = {
        p.name: p.read_bytes() for p in live.iterdir() if p.name.endswith(".del") or p.name == ".managed.json"
    }
    assert any(name.endswith(".del") for name in written)
    shutil.rmtree(live)
    shutil.copytree(before, live)  # the crash: the commit's files on disk, meta.json as before it
    for name, data in written.items():
        (live / name).write_bytes(data)
    k = KeywordIndex(live, read_only=False)
    k.write(sources=["/r/f1.md"])
    assert k.documents() == 4
    k.close()
