"""Hybrid ranking in a small knowledge base: a few short notes among a few hundred other documents (issue 38,
bench/notesset), over a real zvec collection with the suite's deterministic hashed-token embedder."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragctl import render
from ragd.config import IndexConfig
from ragd.index import IndexBackend, open_index
from ragd.index.ranking.hybrid import explaining
from tests.unit.index.test_index_zvec import IDENTITY, embed, load_corpus, rel_paths

# Words the filler pages are made of: common English and Chinese words, among them ones that share characters
# with the notes' rare words (侧面, 呼吸, 方式 with 侧吸式), as real pages do.
_EN = tuple(
    re.split(r"\s+", "directory option command output the a of to and is shows prints when with by default entries "
             "size time user group mode print format line read write copy move remove")
)  # fmt: skip
_ZH = tuple(
    re.split(
        r"\s+",
        "文件 目录 选项 命令 输出 显示 列出 默认 用户 时间 大小 格式 侧面 呼吸 方式 复制 移动 删除 读取 写入",
    )
)

NOTES = {
    "notes/kitchen.md": [
        "# 厨房装修\n\n- 橱柜：定了白色哑光面板，台面用石英石，宽度 3.2 米。\n- 水槽下面要留净水器的位置和插座。\n"
        "- 油烟机选侧吸式，师傅说顶吸的在我们这个层高不合适。\n- 瓷砖工人姓赵，周二和周四上午可以来。\n"
        "- 总预算控制在四万五以内，灯具和五金另算，电器等年底打折的时候再买。"
    ],
    "notes/hidden.md": ["---\ntitle: list hidden files\ntags: [linux, files, list, hidden]\n---"],
    "notes/draft.md": ["# Draft"],
}


def _filler(count: int) -> dict[str, list[str]]:
    rng = random.Random(38)
    pages = {}
    for i in range(count):
        words = _EN if i % 2 else _ZH
        sep = " " if i % 2 else ""
        pages[f"man/page{i:03d}.md"] = [sep.join(rng.choice(words) for _ in range(40)) for _ in range(2)]
    pages["man/ls.md"] = [
        "ls - list directory contents. List information about the files. -a, --all: do not ignore entries "
        "starting with a dot, the hidden files. -l: use a long listing format."
    ]
    return pages


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexBackend, Path]]:
    base = tmp_path_factory.mktemp("notes")
    root = base / "kb"
    index = open_index(base / "data", IDENTITY, IndexConfig())
    load_corpus(index, root, {**_filler(200), **NOTES})
    yield index, root
    index.close()


def _search(tree: tuple[IndexBackend, Path], text: str, k: int = 10) -> list[str]:
    index, root = tree
    return list(dict.fromkeys(rel_paths(index.query(vector=embed(text), text=text, k=k), root)))


def test_a_word_that_one_note_holds_finds_that_note_first(tree: tuple[IndexBackend, Path]) -> None:
    """侧吸式 is in one note only; keyword search has it first, and the vector side's neighbours (pages that say
    侧面, 呼吸, 方式) filled the first places of the hybrid ranking above it: a lookup of a rare word weighs as one."""
    index, root = tree
    assert rel_paths(index.query(vector=None, text="侧吸式", k=10), root) == ["notes/kitchen.md"]
    assert _search(tree, "侧吸式")[0] == "notes/kitchen.md"
    with explaining() as why:
        _search(tree, "侧吸式")
    assert why.params["rare"] is True


def test_a_rare_word_the_first_hit_does_not_hold_whole_is_not_a_lookup(
    tree: tuple[IndexBackend, Path],
) -> None:
    with explaining() as why:
        _search(tree, "侧吸式 refrigerator")
    assert why.params["rare"] is False
    with explaining() as why:
        _search(tree, "list hidden files")  # words found in many documents
    assert why.params["rare"] is False


def test_a_stub_of_front_matter_only_is_not_ranked_above_a_real_page(tree: tuple[IndexBackend, Path]) -> None:
    """The stub's title and tags are the question's words, and its one short chunk scores high on both sides."""
    found = _search(tree, "how to list hidden files")
    assert found.index("man/ls.md") < found.index("notes/hidden.md")
    with explaining() as why:
        _search(tree, "how to list hidden files")
    assert str(tree[1] / "notes/hidden.md") in why.empty and str(tree[1] / "man/ls.md") not in why.empty


def test_explain_says_a_question_was_a_lookup_and_a_document_near_empty() -> None:
    query = {"method": "hybrid", "weights": {"vector": 1.0, "keyword": 2.0}, "rare": True}
    assert "rare words: a lookup" in render.explained({"explain": query})
    assert "rare words" not in render.explained({"explain": {**query, "rare": False}})
    hit = {"explain": {"vector": None, "fused": 0.05, "passage": {"index": 0},
                       "document": {"rank": 5, "score": 0.05, "near_empty": True}}}  # fmt: skip
    assert "near-empty" in render.why(hit)
    del hit["explain"]["document"]["near_empty"]
    assert "near-empty" not in render.why(hit)
