"""The zvec index backend on real collections in temporary directories.

Also home of the helpers other index/search tests import: a deterministic bag-of-hashed-tokens embedder (English
words and CJK characters hashed into 512 dimensions, so texts sharing words are close) and a small bilingual corpus.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexBusy, IndexError_
from ragd.index import (
    IndexBackend,
    IndexChunk,
    SourceSummary,
    SourceWrite,
    collection_dir,
    collection_name,
    destroy_index,
    open_index,
    open_or_rebuild,
)
from ragd.index.zvec.backend import ZvecIndex
from ragd.model import EmbeddingIdentity, SplitterSettings, md5_hex
from tests.support.held import held_meanwhile
from tests.support.poll import poll

DIM = 512
IDENTITY = EmbeddingIdentity("test-hashed-tokens", DIM)
_TOKEN = re.compile(r"[a-z0-9_]+|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

CORPUS: dict[str, list[str]] = {
    "docs/network.md": [
        "Troubleshooting network errors: when the client sees ERR_CONN_RESET the server closed the connection. "
        "Check the proxy and the firewall settings.",
        "Retry with exponential backoff; the retry limit is set in settings.toml.",
    ],
    "docs/config.md": [
        "Call parse_config() to load the settings from config.toml. It returns a Config object.",
        "Unknown keys raise ConfigError naming the key.",
    ],
    "docs/install.md": ["Install the package with pip install ragd. Python 3.11 or newer is required."],
    "docs/search.md": [
        "Hybrid search fuses vector similarity and BM25 keyword scores with reciprocal rank fusion."
    ],
    "docs/watcher.md": ["The watcher uses inotify; when the event queue overflows the root is rescanned."],
    "docs/mcp.md": ["MCP clients connect over streamable HTTP on loopback, or over stdio with ragctl mcp."],
    "docs/security.md": ["API keys are redacted in logs and in error messages."],
    "docs/backup.md": ["Back up the data directory nightly; the index can be rebuilt from the sidecars."],
    "docs/quotes.md": ['It\'s a "quoted" string with (parentheses), colons: and the words AND OR NOT.'],
    "docs/unicode.md": ["Ünïcödé text: a naïve café résumé."],
    "docs/report.pdf": [
        "The quarterly report shows revenue growth of 12 percent.",
        "Costs fell in the north.",
    ],
    "notes/cooking.md": ["A recipe for tomato soup: tomatoes, onion, garlic, olive oil and basil."],
    "notes/garden.txt": ["Watering the garden in the morning helps the tomatoes and the roses grow."],
    "notes/manual.md": ["How to parse a config file by hand, line by line."],
    "notes/travel.md": ["Travel plans: Tokyo in spring, the temples of Kyoto, and a ride on the shinkansen."],
    "notes/music.md": ["Practice the piano every evening: scales, arpeggios and a Bach prelude."],
    "notes/sleep.md": ["Sleep eight hours and avoid coffee after noon."],
    "notes/rocket.md": ["Rocket launch 🚀 scheduled for Friday."],
    "中文/代理.md": ["配置代理服务器的方法：在环境变量中设置 HTTP_PROXY，然后重启服务。"],
    "中文/数据库.md": ["如何安装数据库并初始化：先下载安装包，再运行初始化脚本。"],
    "中文/天气.md": ["今天天气很好，我们去公园散步。"],
    "中文/旅行.md": ["旅行计划：春天去东京，参观京都的寺庙。"],
    "中文/烹饪.md": ["番茄汤的做法：番茄、洋葱、大蒜和橄榄油。"],
    "中文/音乐.md": ["每天晚上练习钢琴：音阶、琶音和巴赫前奏曲。"],
    "中文/备份.md": ["每晚备份数据目录；索引可以从旁路文件重建。"],
    "mixed/api.md": ["使用 parse_config() 函数读取配置文件 config.toml，出错时返回 ConfigError。"],
    "mixed/errors.md": ["网络错误 ERR_CONN_RESET 表示连接被重置 (connection reset by peer)。"],
    "mixed/notes.md": ["会议记录 meeting notes: 讨论了 release plan 和测试计划。"],
    "code/server.py": [
        "def handle(request):\n    # parse the request headers\n    return Response(status=200)"
    ],
    "code/client.js": ["fetch(url).then(r => r.json()).catch(err => console.error(err))"],
}


def embed(text: str) -> np.ndarray:
    """Deterministic bag of hashed tokens: lower-case words and single CJK characters, L2-normalised."""
    vec = np.zeros(DIM, dtype=np.float32)
    for token in _TOKEN.findall(text.lower()):
        h = hashlib.md5(token.encode("utf-8"), usedforsecurity=False).digest()
        vec[int.from_bytes(h[:4], "little") % DIM] += 1.0 if h[4] & 1 else -1.0
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return vec / norm


def make_chunks(path: str, texts: list[str], *, heading: tuple[str, ...] = ()) -> list[IndexChunk]:
    name = Path(path).name
    return [
        IndexChunk(
            source_path=path,
            chunk_index=i,
            content=t,
            content_hash=md5_hex(t),
            header=f"File: {name}",
            vector=embed(f"File: {name}\n\n{t}"),
            heading_path=heading or (name,),
            page=i + 1 if path.endswith(".pdf") else None,
            start_line=i * 10 + 1,
            end_line=i * 10 + 9,
        )
        for i, t in enumerate(texts)
    ]


def load_corpus(index: IndexBackend, root: Path, corpus: dict[str, list[str]] = CORPUS) -> None:
    for rel, texts in corpus.items():
        path = str(root / rel)
        index.replace_source(path, md5_hex("".join(texts)), str(root), make_chunks(path, texts))
    index.flush()


def rel_paths(hits: list, root: Path) -> list[str]:
    return [str(Path(h.source_path).relative_to(root)) for h in hits]


@pytest.fixture(scope="module")
def corpus_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexBackend, Path]]:
    """One collection with CORPUS, shared by read-only tests (creating a collection costs ~0.5 s)."""
    base = tmp_path_factory.mktemp("corpus")
    root = base / "kb"
    index = open_index(base / "data", IDENTITY, IndexConfig())
    load_corpus(index, root)
    yield index, root
    index.close()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexBackend]:
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    yield ix
    ix.close()


# -- layout ---------------------------------------------------------------------------------------------------
def test_one_collection_per_fingerprint(tmp_path: Path) -> None:
    other = EmbeddingIdentity("test-hashed-tokens", DIM, SplitterSettings("markdown", 800, 100))
    assert collection_name(IDENTITY) != collection_name(other)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", collection_name(EmbeddingIdentity("a/b c:d", 3)))
    assert collection_dir(tmp_path, IDENTITY).parent == tmp_path / "index"


# -- queries ------------------------------------------------------------------------------------------------------
def test_vector_query_finds_similar_text(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    hits = index.query(vector=embed("tomato soup recipe with garlic"), text=None, k=3)
    assert rel_paths(hits, root)[0] == "notes/cooking.md"
    assert hits[0].score > hits[-1].score and 0.0 < hits[0].score <= 1.0  # cosine similarity
    hits = index.query(vector=embed("番茄汤的做法"), text=None, k=1)
    assert rel_paths(hits, root) == ["中文/烹饪.md"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ERR_CONN_RESET", {"docs/network.md", "mixed/errors.md"}),
        ("ＥＲＲ_ＣＯＮＮ_ＲＥＳＥＴ", {"docs/network.md", "mixed/errors.md"}),  # full-width forms (NFKC)
        ("parse_config()", {"docs/config.md", "mixed/api.md"}),
        ("cafe", {"docs/unicode.md"}),  # ascii folding
        ("🚀", {"notes/rocket.md"}),
        ('"release plan"', {"mixed/notes.md"}),
    ],
)
def test_keyword_query_finds_exact_terms(
    corpus_index: tuple[IndexBackend, Path], text: str, expected: set[str]
) -> None:
    index, root = corpus_index
    assert set(rel_paths(index.query(vector=None, text=text, k=10), root)) == expected


def test_keyword_query_ranks_matching_chinese_first(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    for text, best in (
        ("数据库", "中文/数据库.md"),
        ("代理服务器", "中文/代理.md"),
        ("如何配置代理", "中文/代理.md"),
        ("钢琴", "中文/音乐.md"),
        ("旅行 东京", "中文/旅行.md"),
    ):
        assert rel_paths(index.query(vector=None, text=text, k=5), root)[0] == best, text
    assert rel_paths(index.query(vector=None, text="how do I fix ERR_CONN_RESET?", k=5), root)[:2] in (
        ["docs/network.md", "mixed/errors.md"],
        ["mixed/errors.md", "docs/network.md"],
    )


@pytest.mark.parametrize(
    "text",
    [
        "AND",
        "or NOT",
        "(",
        ")",
        '"',
        "'",
        "\\",
        "title:x",
        "x^2",
        "-x",
        "+",
        "*",
        '""',
        'a"b',
        ":",
        "NOT NOT",
        "((a))",
        "中文 AND english",
        'a\\"b',
        "{x} [y] ~z",
        "a && b || !c",
        "\x00",
        "\u200b",
        "…",
        "   \t ",
    ],
)
def test_keyword_query_accepts_any_text(corpus_index: tuple[IndexBackend, Path], text: str) -> None:
    index, _ = corpus_index
    index.query(vector=None, text=text, k=5)  # no syntax error, whatever it finds
    index.query(vector=embed(text), text=text, k=5)


def test_keyword_query_treats_operators_as_words(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    assert rel_paths(index.query(vector=None, text="NOT", k=5), root) == ["docs/quotes.md"]
    assert rel_paths(index.query(vector=None, text="(parentheses)", k=5), root) == ["docs/quotes.md"]


def test_hybrid_query_fuses_both(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    query = "connection reset ERR_CONN_RESET"
    hits = index.query(vector=embed(query), text=query, k=4)
    assert set(rel_paths(hits, root)[:2]) == {"docs/network.md", "mixed/errors.md"}
    assert all(0 < h.score < 1 for h in hits)  # reciprocal-rank-fusion scores
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_chinese_question_finds_english_documents_through_its_words_glosses(
    corpus_index: tuple[IndexBackend, Path],
) -> None:
    """防火墙 is in no document, and the hashed-token vectors of Chinese and English share nothing: only the
    question's English glosses (firewall) lead to the English page. Keyword mode stays literal."""
    index, root = corpus_index
    question = "怎么检查防火墙"
    assert index.query(vector=None, text=question, k=5) == []
    assert rel_paths(index.query(vector=embed(question), text=question, k=3), root)[0] == "docs/network.md"
    # mixed questions keep their English words, and gain the glosses (with "proxy" alone, network.md's literal
    # match scored BM25 2.01 with zvec's built-in dictionary and 1.99, under KEYWORD_FLOOR, with ragd's)
    mixed = "防火墙 的 proxy settings 怎么设置"
    assert rel_paths(index.query(vector=embed(mixed), text=mixed, k=3), root)[0] == "docs/network.md"
    piano = rel_paths(
        index.query(vector=embed("钢琴"), text="钢琴", k=3), root
    )  # piano: the page in each language
    assert set(piano[:2]) == {"中文/音乐.md", "notes/music.md"}


def test_query_filters_by_prefix_and_extension(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    hits = index.query(vector=embed("tomatoes"), text="tomatoes", k=10, path_prefixes=[str(root / "notes")])
    assert rel_paths(hits, root) and all(p.startswith("notes/") for p in rel_paths(hits, root))
    hits = index.query(vector=embed("tomatoes"), text=None, k=10, extensions=["TXT"])
    assert rel_paths(hits, root) == ["notes/garden.txt"]
    hits = index.query(vector=embed("code"), text=None, k=10, extensions=[".py", "js"])
    assert set(rel_paths(hits, root)) == {"code/server.py", "code/client.js"}
    hits = index.query(
        vector=embed("x"), text=None, k=10, path_prefixes=[str(root / "中文"), str(root / "mixed")]
    )
    assert len(hits) == 10 and all(p.split("/")[0] in ("中文", "mixed") for p in rel_paths(hits, root))


def test_query_validates(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, _ = corpus_index
    with pytest.raises(ValueError):
        index.query(vector=embed("x"), text=None, k=0)
    with pytest.raises(IndexError_, match="dimension"):
        index.query(vector=np.ones(3, dtype=np.float32), text=None, k=1)
    assert index.query(vector=None, text=None, k=3) == []
    assert index.query(vector=None, text="?!", k=3) == []


def test_chunks_round_trip_metadata(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    chunks = index.chunks(str(root / "docs/report.pdf"))
    assert [c.chunk_index for c in chunks] == [0, 1]
    assert chunks[1].content == CORPUS["docs/report.pdf"][1]
    assert (chunks[1].page, chunks[1].start_line, chunks[1].end_line) == (2, 11, 19)
    assert chunks[0].heading_path == ("report.pdf",) and chunks[0].root == str(root)
    assert index.chunks(str(root / "notes/cooking.md"))[0].page is None


def test_sources_summarise_each_file(corpus_index: tuple[IndexBackend, Path]) -> None:
    index, root = corpus_index
    everything = index.sources()
    assert len(everything) == len(CORPUS)
    net = everything[str(root / "docs/network.md")]
    assert (net.source_md5, net.chunk_count) == (md5_hex("".join(CORPUS["docs/network.md"])), 2)
    assert set(index.sources(str(root / "中文"))) == {str(root / p) for p in CORPUS if p.startswith("中文/")}
    assert set(index.sources(str(root / "docs/network.md"))) == {str(root / "docs/network.md")}
    assert index.sources(str(root / "doc")) == {}
    assert index.count() == sum(len(t) for t in CORPUS.values())


@pytest.mark.slow
def test_a_big_listing_is_summed_a_part_at_a_time(index: IndexBackend) -> None:
    """10,000 sources of two chunks each: listing them holds one part of the rows at a time beside the summaries
    (~120 bytes a source), not a row for every chunk and two sets for every source (~970 bytes a source on that
    code)."""
    n = 10_000
    paths = [f"/kb/folder/note-{i:05d}.md" for i in range(n)]
    index.write_sources(
        [SourceWrite(p, md5_hex(p), "/kb", make_chunks(p, ["one text", "two text"])) for p in paths]
    )
    index.flush()
    listed, meanwhile = held_meanwhile(index.sources)
    assert len(listed) == n and listed[paths[7]] == SourceSummary(paths[7], md5_hex(paths[7]), 2)
    assert meanwhile / n < 400, f"{meanwhile / n:.0f} bytes a source held while listing"


# -- writes -------------------------------------------------------------------------------------------------------
def test_replace_source_drops_chunks_beyond_the_new_count(index: IndexBackend, tmp_path: Path) -> None:
    path = str(tmp_path / "kb/a.md")
    index.replace_source(path, "v1", str(tmp_path / "kb"), make_chunks(path, ["one", "two", "three"]))
    index.replace_source(path, "v2", str(tmp_path / "kb"), make_chunks(path, ["uno"]))
    assert [c.content for c in index.chunks(path)] == ["uno"]
    assert index.sources()[path].source_md5 == "v2" and index.count() == 1
    assert index.query(vector=None, text="three", k=5) == []
    index.replace_source(path, "v3", str(tmp_path / "kb"), [])
    assert index.sources() == {} and index.count() == 0


def test_replace_source_writes_in_batches(index: IndexBackend, tmp_path: Path) -> None:
    path = str(tmp_path / "big.md")
    index.replace_source(
        path, "big", str(tmp_path), make_chunks(path, [f"chunk number {i}" for i in range(1100)])
    )
    assert index.count() == 1100 and index.sources()[path].chunk_count == 1100
    index.replace_source(path, "small", str(tmp_path), make_chunks(path, ["a", "b"]))
    assert index.count() == 2


def test_replace_source_rejects_bad_input(index: IndexBackend, tmp_path: Path) -> None:
    path = str(tmp_path / "a.md")
    bad_vec = [IndexChunk(path, 0, "x", md5_hex("x"), "", np.full(DIM, np.nan, dtype=np.float32))]
    with pytest.raises(IndexError_, match="not finite"):
        index.replace_source(path, "m", str(tmp_path), bad_vec)
    with pytest.raises(IndexError_, match="dimension"):
        index.replace_source(path, "m", str(tmp_path), [IndexChunk(path, 0, "x", "h", "", np.ones(8))])
    with pytest.raises(ValueError):
        index.replace_source(path, "m", str(tmp_path), make_chunks(str(tmp_path / "other.md"), ["x"]))
    bad_name = str(tmp_path) + "/bad\udcff.md"
    with pytest.raises(IndexError_, match="UTF-8"):
        index.replace_source(bad_name, "m", str(tmp_path), make_chunks(bad_name, ["x"]))
    assert index.count() == 0


def test_delete_source_and_subtree(index: IndexBackend, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    load_corpus(index, root, {"d/a.md": ["a1", "a2"], "d/sub/b.md": ["b"], "d_x/c.md": ["c"], "e.md": ["e"]})
    assert index.delete_source(str(root / "d/a.md")) == 2
    assert index.delete_source(str(root / "d/a.md")) == 0
    assert index.delete_subtree(str(root / "d")) == 1
    assert set(index.sources()) == {str(root / "d_x/c.md"), str(root / "e.md")}
    with pytest.raises(ValueError):
        index.delete_subtree("")


def test_sources_flags_a_half_written_source(index: IndexBackend, tmp_path: Path) -> None:
    """A crash between batches leaves chunks of two versions: the summary must not match either version."""
    path = str(tmp_path / "a.md")
    index.replace_source(path, "old", str(tmp_path), make_chunks(path, ["1", "2", "3"]))
    assert isinstance(index, ZvecIndex)
    from ragd.index.zvec.schema import to_doc  # simulate the crash with a raw write of one new-version chunk

    index._live().upsert([to_doc(path, "new", str(tmp_path), make_chunks(path, ["1 changed"])[0], DIM, 1)])
    summary = index.sources()[path]
    assert (summary.source_md5, summary.chunk_count) == ("", 3)


def test_persists_across_close_and_reopen(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    load_corpus(ix, root, {"a.md": ["alpha text"], "b.md": ["beta text"]})
    ix.close()
    with pytest.raises(IndexError_, match="closed"):
        ix.count()
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig(), read_only=True)
    try:
        assert ix.count() == 2
        assert rel_paths(ix.query(vector=None, text="beta", k=3), root) == ["b.md"]
        with pytest.raises(IndexError_, match="read-only"):
            ix.delete_source(str(root / "a.md"))
        assert not ix.needs_optimize
    finally:
        ix.close()


def test_read_only_open_needs_an_existing_index(tmp_path: Path) -> None:
    with pytest.raises(IndexError_, match="no index"):
        open_index(tmp_path, IDENTITY, IndexConfig(), read_only=True)


def test_incompatible_or_corrupt_collection_is_rebuilt(tmp_path: Path) -> None:
    path = collection_dir(tmp_path, IDENTITY)
    ZvecIndex.open(
        path, EmbeddingIdentity("other", 8), IndexConfig()
    ).close()  # same directory, wrong dimension
    with pytest.raises(IndexError_, match="dimension 8"):
        open_index(tmp_path, IDENTITY, IndexConfig())
    ix, rebuilt = open_or_rebuild(tmp_path, IDENTITY, IndexConfig())
    assert rebuilt and ix.count() == 0
    ix.close()
    for f in path.glob("manifest*"):
        f.write_bytes(b"garbage")
    with pytest.raises(IndexError_) as err:
        open_index(tmp_path, IDENTITY, IndexConfig())
    assert not isinstance(err.value, IndexBusy) and str(path) in err.value.message
    ix, rebuilt = open_or_rebuild(tmp_path, IDENTITY, IndexConfig())
    assert rebuilt
    ix.close()
    assert destroy_index(tmp_path, IDENTITY) and not path.exists()
    assert not destroy_index(tmp_path, IDENTITY)


def test_the_vectors_are_kept_in_half_precision_and_a_full_precision_collection_is_made_anew(
    tmp_path: Path,
) -> None:
    import zvec

    from ragd.index.zvec import schema

    ix = open_index(tmp_path, IDENTITY, IndexConfig())
    load_corpus(ix, tmp_path / "kb")
    assert ix.stats()["documents"] > 0
    ix.close()
    coll = zvec.open(str(collection_dir(tmp_path, IDENTITY)), zvec.CollectionOption(read_only=True))
    assert coll.schema.vector("embedding").data_type == zvec.DataType.VECTOR_FP16
    del coll
    other = tmp_path / "other"
    made = schema.build_schema(
        IDENTITY, IndexConfig()
    )  # as version 6 made it (FP32), under this version's name
    fp32 = zvec.VectorSchema("embedding", zvec.DataType.VECTOR_FP32, dimension=IDENTITY.dimension,
                             index_param=schema.vector_param(IndexConfig()))  # fmt: skip
    path = collection_dir(other, IDENTITY)
    path.parent.mkdir(parents=True)
    old = zvec.create_and_open(
        str(path), zvec.CollectionSchema(name="ragd", fields=made.fields, vectors=[fp32])
    )
    del old
    with pytest.raises(IndexError_, match="VECTOR_FP32, not VECTOR_FP16"):
        open_index(other, IDENTITY, IndexConfig())
    ix, rebuilt = open_or_rebuild(other, IDENTITY, IndexConfig())
    assert rebuilt and ix.count() == 0
    ix.close()


# -- locking ------------------------------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ragd.config import IndexConfig
    from ragd.index import open_index
    from ragd.model import EmbeddingIdentity
    ix = open_index(Path(sys.argv[1]), EmbeddingIdentity("test-hashed-tokens", 512), IndexConfig())
    print("ready", flush=True)
    sys.stdin.read()
    ix.close()
""")


def test_index_held_by_another_process_is_busy(tmp_path: Path) -> None:
    open_index(tmp_path, IDENTITY, IndexConfig()).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        for read_only in (False, True):
            with pytest.raises(IndexBusy) as err:
                open_index(tmp_path, IDENTITY, IndexConfig(), read_only=read_only)
            assert "held by another process (a running ragd agent?)" in err.value.message
            assert str(collection_dir(tmp_path, IDENTITY)) in err.value.message and err.value.hint
        with pytest.raises(IndexBusy):
            open_or_rebuild(tmp_path, IDENTITY, IndexConfig())
        with pytest.raises(IndexBusy):
            destroy_index(tmp_path, IDENTITY)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
    open_index(tmp_path, IDENTITY, IndexConfig()).close()  # free again once the holder exits


def test_second_writer_in_the_same_process_is_busy(index: IndexBackend, tmp_path: Path) -> None:
    with pytest.raises(IndexBusy):
        open_index(tmp_path / "data", IDENTITY, IndexConfig())


# -- optimize -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_needs_optimize_after_enough_writes_only_for_hnsw(tmp_path: Path, kind: str) -> None:
    """An optimize seals the segments (and BM25 statistics are per segment): flat, which gains nothing, never."""
    ix = open_index(tmp_path, IDENTITY, IndexConfig(type=kind, optimize_after=100))  # type: ignore[arg-type]
    try:
        path = str(tmp_path / "a.md")
        ix.replace_source(path, "m", str(tmp_path), make_chunks(path, [f"text {i}" for i in range(60)]))
        assert not ix.needs_optimize
        ix.replace_source(path, "m", str(tmp_path), make_chunks(path, [f"text {i}" for i in range(60)]))
        assert ix.needs_optimize == (kind == "hnsw") and ix.stats()["pending"] == 120
        ix.optimize()
        assert not ix.needs_optimize and ix.stats()["pending"] == 0
    finally:
        ix.close()


def test_hnsw_index_and_switching_type(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    ix = open_index(tmp_path, IDENTITY, IndexConfig())
    load_corpus(ix, root, {k: v for k, v in CORPUS.items() if k.startswith("notes/")})
    ix.close()
    ix = open_index(tmp_path, IDENTITY, IndexConfig(type="hnsw", hnsw_m=8, hnsw_ef_construction=32))
    try:  # switched by the next compaction, on a copy whose graph a child process builds
        assert ix.stats()["index_type"] == "flat" and ix.needs_compaction and not ix.needs_optimize
        ix.compact()
        assert ix.stats()["index_type"] == "hnsw" and not ix.needs_compaction and not ix.needs_optimize
        assert isinstance(ix, ZvecIndex) and ix._hnsw_ef() == 512  # hnsw_ef = 0: by size, 512 when small
        assert rel_paths(ix.query(vector=embed("tomato soup"), text=None, k=1), root) == ["notes/cooking.md"]
        assert rel_paths(ix.query(vector=None, text="tomatoes", k=5), root)[0] == "notes/cooking.md"
    finally:
        ix.close()


def test_auto_builds_an_hnsw_graph_past_a_size_while_searches_go_on(tmp_path: Path) -> None:
    """type = "auto": flat below `hnsw_after` chunks; past it the next compaction copies the collection and builds
    the copy's graph in a child process; searches answer the whole time, and exactly as before."""
    root = tmp_path / "kb"
    cfg = IndexConfig(type="auto", hnsw_after=1000, hnsw_ef=400)
    ix = open_index(tmp_path, IDENTITY, cfg)
    try:
        writes = [(str(root / f"d{i // 50}" / f"f{i}.md"),
                   [f"note {i} part{j} about topic{i % 37} and word{i} of section{j + i % 11}" for j in range(4)])
                  for i in range(260)]  # fmt: skip
        for path, texts in writes[:240]:
            ix.replace_source(path, md5_hex("".join(texts)), str(root), make_chunks(path, texts))
        assert ix.count() == 960 and not ix.needs_compaction and ix.stats()["wanted_type"] == "flat"
        for path, texts in writes[240:]:
            ix.replace_source(path, md5_hex("".join(texts)), str(root), make_chunks(path, texts))
        assert ix.needs_compaction and ix.stats()["wanted_type"] == "hnsw"
        questions = [embed(f"note {i} about topic{i % 37}") for i in range(0, 260, 13)]
        before = [[round(h.score, 4) for h in ix.query(vector=q, text=None, k=5)] for q in questions]
        # a first hybrid search loads the glosses' dictionary (seconds, once): not during the compaction, where it
        # left the thread below two searches some runs
        ix.query(vector=questions[0], text="word7", k=5)
        answered: list[int] = []
        stop = threading.Event()

        def search() -> None:
            while not stop.is_set():
                ix.query(vector=questions[len(answered) % len(questions)], text="word7", k=5)
                answered.append(1)

        t = threading.Thread(target=search)
        t.start()
        try:
            ix.compact()
        finally:
            stop.set()
            t.join()
        assert ix.stats()["index_type"] == "hnsw" and not ix.needs_compaction and len(answered) > 5
        after = [[round(h.score, 4) for h in ix.query(vector=q, text=None, k=5)] for q in questions]
        assert after == before  # the same similarities (equal ones may come in another order)
        assert rel_paths(ix.query(vector=None, text="word7", k=1), root) == ["d0/f7.md"]
    finally:
        ix.close()


def test_optimize_with_concurrent_queries_and_writes(tmp_path: Path) -> None:
    """zvec 0.8 deadlocked when optimize ran beside a writer and 2+ readers (and beside 2 readers once, under load,
    with one query thread): writes and queries wait for optimize here."""
    root = tmp_path / "kb"
    ix = open_index(tmp_path, IDENTITY, IndexConfig())
    load_corpus(ix, root, dict(list(CORPUS.items())[:10]))
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(fn: Callable[[], object]) -> None:
        try:
            while not stop.is_set():
                fn()
        except BaseException as err:  # reported by the assertion below
            errors.append(err)

    path = str(root / "w.md")
    writes = [0]

    def write() -> None:
        ix.replace_source(path, "m", str(root), make_chunks(path, ["write " * 20] * 3))
        writes[0] += 1

    def query() -> None:
        ix.query(vector=embed("network"), text="network", k=3)

    jobs = [query, query, write]
    threads = [threading.Thread(target=run, args=(j,), daemon=True) for j in jobs]
    for t in threads:
        t.start()
    try:
        for _ in range(3):

            def wrote(seen: int = writes[0]) -> bool:  # a write between optimizations
                return writes[0] > seen or bool(errors)

            poll(wrote, timeout=20, what="a write between optimizations")
            ix.optimize()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=20)
    assert not any(t.is_alive() for t in threads) and errors == []
    ix.close()


# -- the readers-writer lock ------------------------------------------------------------------------------------
def test_a_serial_lock_lets_one_reader_in_at_a_time() -> None:
    from ragd.index.zvec.rwlock import ReadWriteLock

    lock = ReadWriteLock()
    inside, most, guard = [0], [0], threading.Lock()

    def read() -> None:
        with lock.reading():
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with guard:
                inside[0] -= 1

    for serial, expected in ((False, 4), (True, 1)):
        lock.serial, most[0] = serial, 0
        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert most[0] == expected


def test_an_optimized_collection_answers_one_query_at_a_time(tmp_path: Path) -> None:
    ix = open_index(tmp_path, IDENTITY, IndexConfig())
    try:
        load_corpus(ix, tmp_path / "kb", dict(list(CORPUS.items())[:4]))
        assert not ix._rw.serial  # one segment: queries side by side
        ix.optimize()
        assert ix._rw.serial and ix.segments > 1
    finally:
        ix.close()
    again = open_index(tmp_path, IDENTITY, IndexConfig())
    try:
        assert again._rw.serial  # seen at open
    finally:
        again.close()


def test_read_write_lock_excludes_and_starves_no_one() -> None:
    from ragd.index.zvec.rwlock import ReadWriteLock

    lock, stop = ReadWriteLock(), threading.Event()
    state = {"readers": 0, "writers": 0, "reads": 0, "writes": 0, "bad": 0}
    guard = threading.Lock()

    def enter(kind: str, other: str, limit: int) -> None:
        with guard:
            state[kind] += 1
            state["bad"] += state[other] > 0 or state[kind] > limit

    def leave(kind: str, count: str) -> None:
        with guard:
            state[kind] -= 1
            state[count] += 1

    def reader() -> None:
        while not stop.is_set():
            with lock.reading():
                enter("readers", "writers", 99)
                time.sleep(0.001)  # hold the lock a little, so readers overlap
                leave("readers", "reads")

    def writer() -> None:
        while not stop.is_set():
            with lock.writing():
                enter("writers", "readers", 1)
                leave("writers", "writes")

    threads = [threading.Thread(target=f, daemon=True) for f in (reader, reader, reader, writer, writer)]
    for t in threads:
        t.start()
    try:
        poll(
            lambda: state["writes"] >= 50 and state["reads"] >= 50, timeout=20, what="50 reads and 50 writes"
        )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    assert state["bad"] == 0 and not any(t.is_alive() for t in threads)
