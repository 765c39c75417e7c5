"""Tests of the split stage (ragd.pipeline.split): invariants over many random texts, plus the specific rules."""

from __future__ import annotations

import logging
import random
import re
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path

import pytest

from ragd.errors import ConfigError
from ragd.model import Chunk, Document, PageSpan, SplitterSettings
from ragd.pipeline.split import context_header, split

ZH_PUNCT = "。！？；，、："
ZH_CHARS = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面"
)
EN_WORDS = "the of and to in is you that it was for on with they at".split()  # noqa: SIM905


def doc_of(text: str, *, markdown: bool = True, title: str | None = None, pages: tuple = ()) -> Document:
    return Document(Path("/kb/notes.md"), text, "text", title=title, is_markdown=markdown, pages=pages)


def zh_sentence(rnd: random.Random, n: int = 20) -> str:
    body = "".join(rnd.choice(ZH_CHARS) for _ in range(rnd.randint(4, n)))
    if rnd.random() < 0.3:
        body = body[: len(body) // 2] + rnd.choice("，、：") + body[len(body) // 2 :]
    return body + rnd.choice("。。！？；")


def en_sentence(rnd: random.Random, n: int = 12) -> str:
    words = [rnd.choice(EN_WORDS) for _ in range(rnd.randint(3, n))]
    return " ".join(words).capitalize() + rnd.choice("..?!")


def fence(rnd: random.Random, lines: int) -> str:
    marker = rnd.choice(["```", "~~~", "````"])
    body = "\n".join(
        rnd.choice(["x = 1  # set", "# not a heading", "", "print('a. b。c')"]) for _ in range(lines)
    )
    return f"{marker}python\n{body}\n{marker}"


def random_markdown(rnd: random.Random, blocks: int) -> tuple[str, list[tuple[int, int]]]:
    """A random mixed text and the [start, end) of each fenced block in it."""
    out: list[str] = []
    fences: list[tuple[int, int]] = []
    pos = 0
    for _ in range(blocks):
        r = rnd.random()
        if r < 0.15:
            block = "#" * rnd.randint(1, 4) + " " + rnd.choice(["安装", "Install", "规格 Specs", "FAQ"])
        elif r < 0.27:
            block = fence(rnd, rnd.randint(0, 40))
            fences.append((pos, pos + len(block)))
        elif r < 0.55:
            block = "".join(zh_sentence(rnd) for _ in range(rnd.randint(1, 6)))
        elif r < 0.85:
            block = " ".join(en_sentence(rnd) for _ in range(rnd.randint(1, 6)))
        elif r < 0.92:
            block = "".join(rnd.choice("abc中文") for _ in range(rnd.randint(50, 400)))  # no separators
        else:
            block = "- item one\n- item two 第二项\n  - nested"
        sep = rnd.choice(["\n", "\n\n", "\n\n\n", "\n  \n"])
        out.append(block + sep)
        pos += len(block) + len(sep)
    if rnd.random() < 0.2:  # an unclosed fence runs to the end
        tail = "```\nopen fence\n\n# still code\n" + "y = 2\n" * rnd.randint(0, 30)
        fences.append((pos, pos + len(tail.rstrip())))
        out.append(tail)
    return "".join(out), fences


def check_invariants(doc: Document, settings: SplitterSettings, chunks: list[Chunk]) -> None:
    text = doc.text
    prev: Chunk | None = None
    for c in chunks:
        assert text[c.start_index : c.end_index] == c.content
        assert c.content == c.content.strip() and re.search(r"[^\W_]", c.content), c.content
        assert c.start_line == text.count("\n", 0, c.start_index) + 1
        assert c.end_line == text.count("\n", 0, c.end_index - 1) + 1
        assert c.header == context_header(doc.path.name, doc.title, c.heading_path)
        if prev is None:
            assert c.overlap_size == 0
        else:
            assert c.start_index >= prev.start_index and c.end_index > prev.end_index
            assert c.overlap_size == max(0, prev.end_index - c.start_index)
            assert c.overlap_size <= settings.chunk_overlap
        prev = c
    covered = bytearray(len(text))
    for c in chunks:
        covered[c.start_index : c.end_index] = b"\x01" * (c.end_index - c.start_index)
    # every letter, digit and ideograph is in a chunk (what is left out is whitespace, or markup alone)
    missing = [i for i, ch in enumerate(text) if not covered[i] and re.match(r"[^\W_]", ch)]
    assert not missing, f"text not covered at {missing[:5]}"


def check_fences(chunks: list[Chunk], fences: list[tuple[int, int]], chunk_size: int) -> None:
    for c in chunks:
        for a, b in fences:
            assert not a < c.start_index < b, f"chunk starts inside fence {a}:{b}"
            assert not a < c.end_index < b, f"chunk ends inside fence {a}:{b}"
        if len(c.content) > chunk_size:  # only a whole fence, or a run of headings, is kept oversized
            has_fence = any(c.start_index <= a and b <= c.end_index for a, b in fences)
            assert has_fence or all(line.startswith("#") for line in c.content.split("\n") if line.strip()), (
                c.content
            )


@pytest.mark.parametrize("seed", range(120))
def test_invariants_on_random_texts(seed: int) -> None:
    rnd = random.Random(seed)
    text, fences = random_markdown(rnd, rnd.randint(1, 60))
    size = rnd.choice([30, 80, 200, 500, 1000])
    settings = SplitterSettings(rnd.choice(["recursive", "markdown"]), size, rnd.randint(0, size // 2))
    markdown = rnd.random() < 0.8
    doc = doc_of(text, markdown=markdown, title=rnd.choice([None, "安装", "Guide"]))
    chunks = split(doc, settings)
    check_invariants(doc, settings, chunks)
    if markdown:
        check_fences(chunks, fences, size)


@pytest.mark.parametrize(
    "unit", ["ab ", "x\n", "同一句话。", "Same. ", "a\n\n", "# H\nbody\n", "```\nc\n```\n"]
)
def test_invariants_on_repetitive_texts(unit: str) -> None:
    """Chunks that occur many times near their place are still located consistently (no gap, no reversal)."""
    rnd = random.Random(unit)
    for _ in range(12):
        text = unit * rnd.randint(1, 300) + rnd.choice(["", "tail", "\n"])
        size = rnd.choice([5, 10, 30, 80])
        settings = SplitterSettings(rnd.choice(["recursive", "markdown"]), size, rnd.randint(0, size - 1))
        doc = doc_of(text)
        chunks = split(doc, settings)
        check_invariants(doc, settings, chunks)
        check_fences(chunks, [(m.start(), m.end()) for m in re.finditer("```\nc\n```", text)], size)


def test_empty_and_whitespace_documents_give_no_chunks() -> None:
    for text in ["", " ", "\n\n\t  \n", "\u3000\n"]:
        for kind in ("recursive", "markdown"):
            assert split(doc_of(text), SplitterSettings(kind, 100, 10)) == []


def test_a_piece_of_markup_alone_is_no_chunk() -> None:
    """A layout table's empty cells, converted from HTML, or a rule of dashes: no chunk (its vector came first for
    unrelated questions); the text around it is chunked as before."""
    empty_table = "\n".join(
        ["|  |  |  |  |  |  |"] + ["| --- | --- | --- | --- | --- | --- |"] + ["|  |  |  |  |  |  |"] * 3
    )
    text = f"# Files\n\nThe list of files.\n\n{empty_table}\n\n---\n\n_ * _ 🍄\n\n## 文件\n\n文件列表。"
    for kind in ("recursive", "markdown"):
        settings = SplitterSettings(kind, 60, 0)
        chunks = split(doc_of(text), settings)
        check_invariants(doc_of(text), settings, chunks)
        assert [c.content for c in chunks] == ["# Files\n\nThe list of files.", "## 文件\n\n文件列表。"]
    assert split(doc_of(empty_table), SplitterSettings("recursive", 1000, 100)) == []


def test_chinese_punctuation_stays_at_the_end_of_its_sentence() -> None:
    rnd = random.Random(7)
    text = "\n\n".join("".join(zh_sentence(rnd, 30) for _ in range(8)) for _ in range(20))
    settings = SplitterSettings("recursive", 120, 30)
    chunks = split(doc_of(text, markdown=False), settings)
    assert len(chunks) > 10
    check_invariants(doc_of(text, markdown=False), settings, chunks)
    for c in chunks:
        assert c.content[0] not in ZH_PUNCT, c.content
        assert len(c.content) <= 120
    assert sum(c.content[-1] in "。！？；" for c in chunks) >= len(chunks) * 0.9


def test_english_chunks_end_at_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} says something about the weather." for i in range(200))
    settings = SplitterSettings("recursive", 200, 60)
    chunks = split(doc_of(text), settings)
    check_invariants(doc_of(text), settings, chunks)
    assert len(chunks) > 20
    for c in chunks:
        assert c.content.startswith("Sentence number ") and c.content.endswith("weather.")
    assert any(c.overlap_size > 0 for c in chunks[1:])


def test_mixed_chinese_and_english() -> None:
    rnd = random.Random(3)
    paragraphs = []
    for _ in range(30):
        parts = [zh_sentence(rnd) if rnd.random() < 0.5 else en_sentence(rnd) + " " for _ in range(6)]
        paragraphs.append("".join(parts).strip())
    text = "\n\n".join(paragraphs)
    for kind in ("recursive", "markdown"):
        settings = SplitterSettings(kind, 150, 40)
        chunks = split(doc_of(text), settings)
        check_invariants(doc_of(text), settings, chunks)
        assert all(len(c.content) <= 150 and c.content[0] not in ZH_PUNCT + ".!?" for c in chunks)


def test_long_code_fence_is_never_cut_and_stays_with_its_heading() -> None:
    code = "\n".join(f"line_{i} = {i}  # comment\n" for i in range(200))  # blank lines inside too
    text = f"# Guide\n\nIntro text here.\n\n## Code\n\n```python\n{code}\n```\n\nAfter the code. 之后。\n"
    fence_start = text.index("```python")
    fence_end = text.index("```\n\nAfter") + 3
    for kind in ("recursive", "markdown"):
        settings = SplitterSettings(kind, 300, 50)
        chunks = split(doc_of(text), settings)
        check_invariants(doc_of(text), settings, chunks)
        check_fences(chunks, [(fence_start, fence_end)], 300)
        [big] = [c for c in chunks if "line_0 = 0" in c.content]
        assert big.content.startswith("## Code\n\n```python") and big.content.endswith("```")
        assert big.heading_path == ("Guide", "Code")
        assert "After the code." not in big.content


def test_small_fence_merges_with_text_and_unclosed_fence_runs_to_the_end() -> None:
    text = "Before.\n\n~~~\ncode # x\n~~~\n\nAfter.\n\n```\nopen\n\n# not a heading\nmore\n"
    chunks = split(doc_of(text), SplitterSettings("recursive", 1000, 0))
    assert [c.content for c in chunks] == [text.strip()]
    assert chunks[0].heading_path == ()
    chunks = split(doc_of(text), SplitterSettings("recursive", 12, 0))
    unclosed = text.index("```")
    assert chunks[-1].start_index == unclosed and chunks[-1].content == text[unclosed:].strip()


MD = """# Guide

Welcome to the guide.

## Install

### Linux

Run the installer. Then reboot.

```sh
# this is a shell comment, not a heading
./install.sh
```

### macOS
Drag the app.

## Usage ##
Use it daily. 每天使用。
"""


def test_heading_paths_and_line_ranges() -> None:
    doc = doc_of(MD)
    chunks = split(doc, SplitterSettings("markdown", 1000, 0))
    check_invariants(doc, SplitterSettings("markdown", 1000, 0), chunks)
    got = [(c.heading_path, c.start_line, c.end_line, c.content.splitlines()[0]) for c in chunks]
    assert got == [
        (("Guide",), 1, 3, "# Guide"),
        (("Guide", "Install", "Linux"), 5, 14, "## Install"),
        (("Guide", "Install", "macOS"), 16, 17, "### macOS"),
        (("Guide", "Usage"), 19, 20, "## Usage ##"),
    ]
    recursive = split(doc, SplitterSettings("recursive", 1000, 0))
    assert [c.content for c in recursive] == [MD.strip()]
    assert recursive[0].heading_path == ("Guide",)


def test_markdown_kind_never_spans_two_sections() -> None:
    rnd = random.Random(11)
    for _ in range(20):
        text, _fences = random_markdown(rnd, 40)
        doc = doc_of(text)
        for c in split(doc, SplitterSettings("markdown", 400, 80)):
            lines = c.content.split("\n")
            heading_rows = [
                i for i, line in enumerate(lines) if re.match(r"#{1,4} (安装|Install|规格|FAQ)", line)
            ]
            body_rows = [i for i, line in enumerate(lines) if line.strip() and i not in heading_rows]
            if heading_rows and body_rows:
                assert max(heading_rows) < min(body_rows), c.content


def test_no_chunk_ends_with_a_stranded_heading() -> None:
    rnd = random.Random(5)
    sections = [f"## Section {i}\n\n" + " ".join(en_sentence(rnd) for _ in range(8)) for i in range(40)]
    text = "# Top\n\n" + "\n\n".join(sections)
    for kind in ("recursive", "markdown"):
        for c in split(doc_of(text), SplitterSettings(kind, 250, 50)):
            assert not c.content.split("\n")[-1].startswith("#"), c.content
            if c.content.startswith("## Section"):
                assert c.heading_path == ("Top", c.content.split("\n")[0][3:])


def test_plain_text_has_no_headings_or_fences() -> None:
    text = "# not a heading\n\n```\n" + "code line\n" * 50 + "```\n"
    chunks = split(doc_of(text, markdown=False), SplitterSettings("markdown", 100, 0))
    assert all(c.heading_path == () for c in chunks)
    assert len(chunks) > 3  # the fence is cut like any text


def test_pages() -> None:
    text = "".join(f"Page {n} text. Some more words on page {n}.\n\n" for n in range(1, 11))
    bounds = [*(m.start() for m in re.finditer("Page ", text)), len(text)]
    pages = tuple(PageSpan(i + 1, s, e) for i, (s, e) in enumerate(pairwise(bounds)))
    doc = doc_of(text, pages=pages)
    chunks = split(doc, SplitterSettings("recursive", 60, 20))
    assert {c.page for c in chunks} == set(range(1, 11))
    for c in chunks:
        assert c.page == doc.page_at(c.start_index)
        assert f"Page {c.page} " in c.content or c.content.endswith(f"page {c.page}.")
    assert all(c.page is None for c in split(doc_of(text), SplitterSettings("recursive", 60, 20)))


def test_chunks_end_at_page_breaks() -> None:
    """Short pages that would fit in one chunk are one chunk each: a chunk's page is the page of all its words,
    in both kinds, also where a page break falls inside a section or a page holds several chunks."""
    pages_text = ["Cover sheet.", "The wombat burrows.", "# Part\n\n" + "Long words here. " * 20, "End."]
    text = "\n\n".join(pages_text)
    starts = [text.index(p) for p in pages_text]
    doc = doc_of(text, markdown=True, pages=tuple(PageSpan(i + 1, s, s + len(p))
                                                  for i, (s, p) in enumerate(zip(starts, pages_text, strict=True))))  # fmt: skip
    for kind in ("recursive", "markdown"):
        settings = SplitterSettings(kind, 200, 50)
        chunks = split(doc, settings)
        check_invariants(doc, settings, chunks)
        assert [c.content for c in chunks[:2]] == ["Cover sheet.", "The wombat burrows."]
        assert [c.page for c in chunks[:2]] == [1, 2]
        assert {c.page for c in chunks} == {1, 2, 3, 4} and chunks[-1].content == "End."
        for c in chunks:
            span = doc.pages[c.page - 1]  # type: ignore[operator]
            assert span.start <= c.start_index and c.end_index <= span.end, (kind, c)
    whole = split(doc_of(text), SplitterSettings("recursive", 200, 50))  # no pages: one text
    assert whole[0].content.startswith("Cover sheet.\n\nThe wombat burrows.")


def test_overlap_size_is_the_shared_prefix() -> None:
    text = " ".join(f"w{i:03d}" for i in range(400))
    chunks = split(doc_of(text), SplitterSettings("recursive", 100, 30))
    assert chunks[0].overlap_size == 0
    for prev, c in pairwise(chunks):
        assert 0 < c.overlap_size <= 30
        assert prev.content.endswith(c.content[: c.overlap_size])
    no_overlap = split(doc_of(text), SplitterSettings("recursive", 100, 0))
    assert all(c.overlap_size == 0 for c in no_overlap)


def test_one_long_line_without_separators_is_hard_cut() -> None:
    for text in ["x" * 5000, "中" * 3333, "ab" * 2000 + "\n"]:
        settings = SplitterSettings("recursive", 1000, 100)
        chunks = split(doc_of(text), settings)
        check_invariants(doc_of(text), settings, chunks)
        assert len(chunks) >= len(text) // 1000 and all(len(c.content) <= 1000 for c in chunks)


def test_private_use_characters_fall_back_without_masking(caplog: pytest.LogCaptureFixture) -> None:
    text = "Odd \U000f0001 char.\n\n```\n" + "code\n" * 100 + "```\n"
    settings = SplitterSettings("recursive", 100, 10)
    with caplog.at_level(logging.WARNING, logger="ragd.pipeline.split"):
        chunks = split(doc_of(text), settings)
    check_invariants(doc_of(text), settings, chunks)
    assert "private-use" in caplog.text


def test_invalid_settings_raise_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown splitter kind"):
        split(doc_of("text"), SplitterSettings("semantic", 100, 10))
    with pytest.raises(ConfigError, match="invalid splitter settings"):
        split(doc_of("text"), SplitterSettings("recursive", 100, 200))


def test_concurrent_splits_in_threads_match_sequential_ones() -> None:
    rnd = random.Random(9)
    docs = [doc_of(random_markdown(rnd, 50)[0]) for _ in range(8)]
    settings = SplitterSettings("recursive", 300, 60)
    expected = [split(d, settings) for d in docs]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda d: split(d, settings), docs * 3)) == expected * 3


def test_context_header() -> None:
    assert context_header("notes.md", "小米 15 Pro", ("Specs", "Battery")) == (
        "File: notes.md | Title: 小米 15 Pro | Section: Specs > Battery"
    )
    assert context_header("notes.md", "小米 15 Pro", ("小米 15 Pro", "Specs")) == (
        "File: notes.md | Title: 小米 15 Pro | Section: Specs"
    )
    assert context_header("notes.md", None, ()) == "File: notes.md"
    assert context_header("a.txt", "  ", ("A\nB",)) == "File: a.txt | Section: A B"
    assert "\n" not in context_header("x.md", "t\nitle", ("h" * 500,))
    chunk = split(doc_of(MD, title="Guide"), SplitterSettings("markdown", 1000, 0))[1]
    assert chunk.header == "File: notes.md | Title: Guide | Section: Install > Linux"
    assert chunk.embed_text == f"{chunk.header}\n\n{chunk.content}"
