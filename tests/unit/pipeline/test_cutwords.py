"""The words the parse workers cut, kept by (content md5, header) until the index writer takes them, and bounded."""

from __future__ import annotations

from ragd.model import Chunk
from ragd.pipeline.cutwords import CutWords


def chunk(content: str, header: str = "File: a.md") -> Chunk:
    return Chunk(content, 0, len(content), 1, 1, header=header)


def test_words_are_taken_once_by_their_chunks_content_and_header() -> None:
    kept = CutWords()
    a, b = chunk("alpha text"), chunk("beta text")
    kept.keep([a, b], [("alpha text", "alpha text words"), ("beta text", "beta text words")])
    assert kept.take(a.content_hash, "File: other.md") is None  # another header: other words
    assert kept.take(a.content_hash, a.header) == ("alpha text", "alpha text words")
    assert kept.take(a.content_hash, a.header) is None  # taken
    assert kept.take(b.content_hash, b.header) == ("beta text", "beta text words")
    assert len(kept) == 0 and kept.chars == 0


def test_words_that_do_not_match_the_chunks_count_are_not_kept() -> None:
    kept = CutWords()
    kept.keep([chunk("one"), chunk("two")], [("one", "one")])
    assert len(kept) == 0


def test_past_the_bound_the_oldest_words_go_first() -> None:
    kept = CutWords(max_chars=10)
    first, second, third = chunk("1"), chunk("2"), chunk("3")
    kept.keep([first], [("aa", "aa")])
    kept.keep([second], [("bb", "bb")])
    kept.keep([third], [("cc", "cc")])  # 12 characters: the first goes
    assert kept.chars == 8 and len(kept) == 2
    assert kept.take(first.content_hash, first.header) is None
    assert kept.take(third.content_hash, third.header) == ("cc", "cc")


def test_the_same_chunk_kept_again_counts_once() -> None:
    kept = CutWords()
    c = chunk("same")
    kept.keep([c], [("same", "old words")])
    kept.keep([c], [("same", "new")])
    assert kept.chars == 7 and kept.take(c.content_hash, c.header) == ("same", "new")
