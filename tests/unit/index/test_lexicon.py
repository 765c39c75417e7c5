"""Chinese questions to English search words (index/keyword/lexicon.py), with the shipped CC-CEDICT and with small tables."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ragd.index.keyword.lexicon import (
    EN_MAX_WORDS,
    MAX_WORDS,
    PER_WORD,
    Lexicon,
    load,
    parse,
    prepare,
    prepare_apart,
    shared,
    use_cache,
)

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
    with caplog.at_level(logging.WARNING, logger="ragd.index.keyword.lexicon"):
        assert lex.english("磁盘空间") == [] and lex.query_string("磁盘空间") is None
        assert not lex.available
    assert sum("not translated" in r.getMessage() for r in caplog.records) == 1  # said once


def _make(path: Path, key: str, rows: dict[str, str]) -> None:
    """A table file as `prepare` writes one, with other contents."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT); CREATE TABLE words (head TEXT "
                         "PRIMARY KEY, glosses TEXT);")  # fmt: skip
        db.execute("INSERT INTO meta VALUES ('key', ?)", (key,))
        db.executemany("INSERT INTO words VALUES (?, ?)", rows.items())
        db.commit()


def _key_of(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return str(db.execute("SELECT value FROM meta").fetchone()[0])


def test_the_parsed_dictionary_is_kept_and_looked_up_in_its_table_file(tmp_path: Path) -> None:
    cache = tmp_path / "cedict.sqlite"
    table = load(cache=cache)
    assert table == parse() and cache.is_file()  # the first reader parses, and keeps the table for the next
    stored = load(cache=cache)
    assert not isinstance(stored, dict)  # looked up in the file, not read into memory
    assert (
        dict(stored) == table
        and len(stored) == len(table)
        and "磁盘" in stored
        and "没有这个词" not in stored
    )
    assert Lexicon(cache=cache).english("怎么查看磁盘空间") == Lexicon(table).english("怎么查看磁盘空间")
    key = _key_of(cache)
    cache.unlink()
    _make(cache, key, {"磁盘": "marked"})
    assert Lexicon(cache=cache).english("磁盘") == ["marked"]  # read from the file, not parsed again
    assert not prepare(cache)  # current: left as it is
    assert dict(load(cache=cache)) == {"磁盘": "marked"}
    assert not list(tmp_path.glob("*.tmp"))


def test_the_agent_prepares_the_table_file_before_the_first_question(tmp_path: Path) -> None:
    cache = tmp_path / "cedict.sqlite"
    assert prepare(cache) and dict(load(cache=cache)) == parse()
    assert not prepare(cache)
    cache.write_bytes(b"damaged")
    assert prepare(cache) and dict(load(cache=cache)) == parse()


def test_the_agent_parses_the_dictionary_in_a_child_process(tmp_path: Path) -> None:
    """Parsing left ~60 MiB in the agent's allocator (its RSS on an empty root: 215 MiB on a first start, 154 with
    the table there): the agent's table is parsed and written by a child process, which gives its memory back."""
    cache = tmp_path / "cedict.sqlite"
    assert prepare_apart(cache) and dict(load(cache=cache)) == parse()
    with contextlib.closing(sqlite3.connect(cache)) as db:
        (made_by,) = db.execute("SELECT value FROM meta WHERE name = 'made_by'").fetchone()
    assert made_by != str(os.getpid())
    assert not prepare_apart(cache)  # current: left as it is


@pytest.mark.parametrize("content", [b"", b"not a database", None])
def test_a_damaged_or_stale_table_file_is_made_again(tmp_path: Path, content: bytes | None) -> None:
    cache = tmp_path / "cedict.sqlite"
    if content is None:
        _make(cache, "another dictionary", {"磁盘": "stale"})
    else:
        cache.write_bytes(content)
    table = load(cache=cache)
    assert table == parse() and "disk" in table["磁盘"]
    assert dict(load(cache=cache)) == table


def test_a_table_file_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    cache = tmp_path / "missing" / "cedict.sqlite"  # its folder does not exist
    assert load(cache=cache) == parse() and not cache.exists()
    assert not prepare(cache) and not cache.exists()


def test_a_table_file_left_half_written_by_a_stopped_process_is_removed(tmp_path: Path) -> None:
    """An agent stopped while it wrote `cedict.sqlite` left `cedict.sqlite.<pid>.tmp` in its data directory for
    good; a live process's temporary file is its table being written and stays."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        dead_tmp = tmp_path / f"cedict.sqlite.{gone.pid}.tmp"
        live_tmp = tmp_path / f"cedict.sqlite.{live.pid}.tmp"
        other = tmp_path / "cedict.sqlite.notapid.tmp"
        for p in (dead_tmp, live_tmp, other):
            p.write_bytes(b"half a table")
        before = shared().cache
        try:
            assert use_cache(tmp_path) == tmp_path / "cedict.sqlite"
        finally:
            shared().cache = before  # the process's lexicon: as the other tests expect it
        assert not dead_tmp.exists()
        assert live_tmp.exists() and other.exists()
    finally:
        live.kill()
        live.wait()


EN_LINES = [
    "打印機 打印机 [da3 yin4 ji1] /printer/",
    "印刷所 印刷所 [yin4 shua1 suo3] /printing house/printer/",
    "印表機 印表机 [yin4 biao3 ji1] /printer/",
    "域名 域名 [yu4 ming2] /domain name/",
    "領域 领域 [ling3 yu4] /domain/sphere/field/",
    "密碼 密码 [mi4 ma3] /password/code/",
    "口令 口令 [kou3 ling4] /password/command/",
    "暗號 暗号 [an4 hao4] /secret signal/password/",
    "備份 备份 [bei4 fen4] /to back up/backup/",
    "某字 某字 [mou3 zi4] /see 某某[mou3 mou3]/",
    *(f"清{chr(0x4E00 + i)} 清{chr(0x4E00 + i)} [qing1] /clear/" for i in range(12)),
]
EN_COUNTS = {"打印机": 153, "印刷所": 27, "印表机": 3, "密码": 1022, "口令": 157, "暗号": 115, "领域": 9771}


def test_an_english_question_gets_the_chinese_words_of_which_its_words_are_a_whole_sense() -> None:
    lex = Lexicon(parse(EN_LINES, frequencies=EN_COUNTS))
    # the most frequent headwords first, at most EN_PER_WORD; a sense among the first EN_SENSES only
    assert lex.chinese("my printer prints nothing") == ["打印机", "印刷所"]
    assert lex.chinese("forgot the passwords") == [
        "密码",
        "口令",
    ]  # the singular, when the plural is no sense
    assert lex.chinese("the domain name of a site") == ["域名"]  # a pair before its words
    assert lex.chinese("the domain") == ["领域"]
    assert lex.chinese("back up my notes") == ["备份"]  # "to back up": the pair, "to" left out
    assert lex.chinese("clear it") == []  # the whole sense of more than EN_AMBIGUOUS headwords: too vague
    assert lex.chinese("打印机 password") == []  # a question with Chinese in it goes the other way
    assert lex.english("my printer") == []
    glosses = lex.glosses("printer password")
    assert [t.text for t in glosses.terms] == ["打印机", "印刷所", "密码", "口令"] and not any(
        t.phrase for t in glosses.terms
    )
    assert glosses.chinese and not lex.glosses("打印机").chinese  # the direction, said, not inferred
    assert lex.query_string("printer") is None  # the zvec query string of the Chinese direction only


def test_the_shipped_dictionary_glosses_english_questions_in_chinese() -> None:
    lex = Lexicon()
    assert {"打印机", "备份"} <= set(lex.chinese("printer backup"))
    assert "域名" in lex.chinese("look up the DNS records of a domain name")
    assert len(lex.chinese(" ".join(["network", "printer", "calendar", "backup"] * 50))) <= EN_MAX_WORDS


def test_an_english_question_does_not_wait_for_the_dictionary_the_agent_is_preparing() -> None:
    from ragd.index.keyword import lexicon

    lex = Lexicon(package="no_such_dictionary_package")  # its table would be read on first use
    lexicon.PREPARING.set()
    try:
        assert lex.chinese("printer password") == [] and lex._entries is None  # not read: glosses skipped
    finally:
        lexicon.PREPARING.clear()
    assert Lexicon(parse(EN_LINES, frequencies=EN_COUNTS)).chinese("printer") == ["打印机", "印刷所"]
