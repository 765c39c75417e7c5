"""read_document's text: rebuilt from chunks at their offsets; line windows with a size limit."""

from __future__ import annotations

import pytest

from ragd.errors import RagdError
from ragd.model import md5_hex
from ragd.pipeline.sidecar import StoredChunk
from ragd.verbs.document_text import MAX_DOCUMENT_CHARS, assemble, select_lines


def chunk(text: str, start: int, end: int, **meta: object) -> StoredChunk:
    line = text.count("\n", 0, start) + 1
    return StoredChunk(text[start:end], md5_hex(text[start:end]), meta={"start_index": start, "end_index": end,
                                                                     "start_line": line, **meta})  # fmt: skip


def test_overlapping_chunks_are_not_repeated() -> None:
    text = "alpha beta\ngamma delta\nepsilon"
    assert assemble([chunk(text, 0, 16), chunk(text, 11, 28), chunk(text, 23, 30)]) == text


def test_gaps_the_splitter_dropped_keep_line_numbers() -> None:
    text = "# One\n\n\nfirst part.\n  \n\n# Two\nsecond part."
    first, second = text.index("first"), text.index("# Two")
    rebuilt = assemble([chunk(text, 0, 5), chunk(text, first, first + 11), chunk(text, second, len(text))])
    assert len(rebuilt) == len(text)
    lines = rebuilt.split("\n")
    assert lines[3].rstrip() == "first part." and lines[6] == "# Two"  # spaces trail, never indent
    assert rebuilt.count("\n") == text.count("\n")


def test_ragjson_tool_chunks_are_joined_without_their_overlap() -> None:
    a = StoredChunk("one two three", md5_hex("one two three"))
    b = StoredChunk("three four", md5_hex("three four"), overlap_size=5)
    assert assemble([a, b]) == "one two three four"


def test_line_windows() -> None:
    text = "l1\nl2\nl3\nl4\n"
    assert select_lines(text, None, None) == {"text": "l1\nl2\nl3\nl4", "start_line": 1, "end_line": 4,
                                              "total_lines": 4, "truncated": False, "next_start_line": None}  # fmt: skip
    assert select_lines(text, 2, 3)["text"] == "l2\nl3"
    assert select_lines(text, 4, 99)["end_line"] == 4
    assert select_lines("", None, None)["total_lines"] == 1
    for start, end, why in ((0, None, "out of range"), (5, None, "has 4 line"), (3, 2, "before start_line")):
        with pytest.raises(RagdError, match=why):
            select_lines(text, start, end)


def test_long_documents_are_read_in_windows() -> None:
    line = "x" * 999
    text = "\n".join([line] * 300)
    first = select_lines(text, None, None)
    assert first["truncated"] and first["end_line"] == MAX_DOCUMENT_CHARS // 1000
    assert len(first["text"]) <= MAX_DOCUMENT_CHARS
    rest = select_lines(text, first["next_start_line"], None)
    assert rest["start_line"] == first["end_line"] + 1
    huge = select_lines("y" * (MAX_DOCUMENT_CHARS + 10), None, None)
    assert huge["truncated"] and len(huge["text"]) == MAX_DOCUMENT_CHARS and huge["next_start_line"] is None
