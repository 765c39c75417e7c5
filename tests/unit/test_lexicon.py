"""Chinese questions to English search words (index/lexicon.py), with the shipped CC-CEDICT and with small tables."""

from __future__ import annotations

import logging
import marshal
from pathlib import Path

import pytest

from ragd.index.lexicon import MAX_WORDS, PER_WORD, Lexicon, load, parse

LINES = [
    "# CC-CEDICT-like header",
    "磁盤 磁盘 [ci2 pan2] /(computer) disk/",
    "空間 空间 [kong1 jian1] /space/room/(fig.) scope/",
    "磁盤空間 磁盘空间 [ci2 pan2 kong1 jian1] /disk space/",
    "個 个 [ge4] /individual/this/that/",
    "查看 查看 [cha2 kan4] /to look over/to examine/to check up/to ferret out/",
    "怎麼 怎么 [zen3 me5] /how?/what?/why?/",
    "多個 多个 [duo1 ge4] /CL:個|个[ge4]/",
    "文件 文件 [wen2 jian4] /document/file/CL:份[fen4]/",
    "文件 文件 [wen2 jian4] /(computing) file/records/",
    "not a dictionary line",
]


def test_parse_keeps_both_forms_the_words_of_the_first_senses_and_no_single_characters() -> None:
    table = parse(LINES)
    assert table["磁盘"] == table["磁盤"] == "disk"
    assert table["空间"] == "space room scope"  # the parenthesised note goes, its word stays
    assert table["查看"] == "look examine check"  # "to", "up", "over" say nothing; the 4th sense is not read
    assert table["文件"] == "document file records"  # a headword's entries merge, classifier senses go
    assert "个" not in table and "多个" not in table  # single characters; a sense that is only a classifier
    assert "怎么" not in table  # how, what, why: stopwords only


def test_a_question_is_cut_into_the_longest_known_words() -> None:
    lex = Lexicon(parse(LINES))
    assert lex.segment("查看磁盘空间") == ["查看", "磁盘空间"]
    assert lex.segment("查看个磁盘") == ["查看", "个", "磁盘"]
    assert lex.english("怎么查看磁盘空间？") == ["look", "examine", "check", "disk", "space"]
    assert lex.english("查看 文件") == ["look", "examine", "check", "document", "file", "records"]
    assert lex.query_string("磁盤空間") == "disk space"  # traditional characters too
    assert (
        Lexicon({"光线": "x-ray or light"}).query_string("光线") == '"x-ray" "or" light'
    )  # operators quoted


@pytest.mark.parametrize("text", ["", "   ", "how much disk space is left", "du -sh", "个", "怎么", "😀 🚀"])
def test_text_without_known_chinese_words_has_no_translation(text: str) -> None:
    lex = Lexicon(parse(LINES))
    assert lex.english(text) == [] and lex.query_string(text) is None


def test_the_shipped_dictionary_translates_technical_questions() -> None:
    lex = Lexicon()
    assert lex.available
    words = lex.english("怎么查看一个目录占用了多少磁盘空间")
    assert {"directory", "disk", "space"} <= set(words) and "how" not in words
    assert "uppercase" in lex.english("把小写字母转换成大写")
    assert "disk" in lex.english("磁碟空間")  # traditional
    assert all(w == w.lower() and " " not in w for w in words)
    per_word = {w for w in lex.english("压缩") if w}
    assert 1 <= len(per_word) <= PER_WORD
    long = lex.english(
        "网络" * 200 + "".join(chr(0x4E00 + i) for i in range(0, 2000, 7)) + "磁盘空间压缩文件"
    )
    assert 0 < len(long) <= MAX_WORDS


def test_without_the_dictionary_questions_are_not_translated(caplog: pytest.LogCaptureFixture) -> None:
    lex = Lexicon(package="ragd_no_such_dictionary_package")
    with caplog.at_level(logging.WARNING, logger="ragd.index.lexicon"):
        assert lex.english("磁盘空间") == [] and lex.query_string("磁盘空间") is None
        assert not lex.available
    assert sum("not translated" in r.getMessage() for r in caplog.records) == 1  # said once


def test_the_parsed_dictionary_is_kept_and_read_back_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cedict.cache"
    table = load(cache=cache)
    assert table == parse() and cache.is_file()  # the first reader parses and keeps the table
    key, kept = marshal.loads(cache.read_bytes())
    assert kept == table
    cache.write_bytes(marshal.dumps((key, {"磁盘": "marked"})))
    assert load(cache=cache) == {"磁盘": "marked"}  # read back, not parsed again
    lex = Lexicon(cache=cache)
    assert lex.english("磁盘") == ["marked"]
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "content",
    [b"", b"not marshal data", marshal.dumps(("another key", {"磁盘": "stale"})), marshal.dumps([1, 2, 3])],
)
def test_a_damaged_or_stale_cache_is_rebuilt(tmp_path: Path, content: bytes) -> None:
    cache = tmp_path / "cedict.cache"
    cache.write_bytes(content)
    table = load(cache=cache)
    assert table == parse() and "disk" in table["磁盘"]
    assert marshal.loads(cache.read_bytes())[1] == table


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    cache = tmp_path / "missing" / "cedict.cache"  # its folder does not exist
    assert load(cache=cache) == parse() and not cache.exists()
