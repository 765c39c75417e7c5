"""The keyword index's dictionary: jieba's without its rarest words, made once, and what zvec cuts with."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragd.config import IndexConfig
from ragd.index import jiebadict, open_index
from tests.unit.test_index_zvec import IDENTITY, load_corpus, rel_paths


def source_words() -> dict[str, int]:
    words = {}
    for line in jiebadict.source().read_text(encoding="utf-8").splitlines():
        parts = line.split()
        words[parts[0]] = int(parts[1])
    return words


def test_it_keeps_the_words_seen_often_enough_and_the_whole_hmm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = jiebadict._make(jiebadict.source())
    assert made.parent == tmp_path / "cache" / "ragd"
    kept = [line.split() for line in (made / jiebadict.DICT_NAME).read_text(encoding="utf-8").splitlines()]
    src = source_words()
    assert len(kept) == sum(1 for f in src.values() if f >= jiebadict.MIN_FREQ)
    assert 100_000 < len(kept) < 150_000 < len(src)
    assert all(int(freq) >= jiebadict.MIN_FREQ and int(freq) == src[word] for word, freq, *_ in kept)
    assert {"磁盘", "文件", "目录", "网络"} <= {w for w, *_ in kept}
    rows = [
        r
        for r in (made / jiebadict.HMM_NAME).read_text(encoding="utf-8").splitlines()
        if not r.startswith("#")
    ]
    assert len(rows) == 1 + 4 + 4  # start, the 4x4 transitions, the emissions of B, E, M, S
    assert all(len(r.split()) == 4 for r in rows[:5])
    assert all(r.count(":") > 5000 for r in rows[5:])
    assert jiebadict._make(jiebadict.source()) == made  # made once
    assert sorted(p.name for p in made.parent.iterdir()) == [made.name]  # no temporary left


def test_an_unwritable_cache_falls_back_to_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    made = jiebadict._make(jiebadict.source())
    assert made.parent == tmp_path / "tmp" / f"ragd-cache-{os.getuid()}"
    assert (made / jiebadict.DICT_NAME).is_file() and (made / jiebadict.HMM_NAME).is_file()


def test_the_index_cuts_with_it_and_a_word_it_lacks_still_matches_itself(tmp_path: Path) -> None:
    src = source_words()
    rare = next(
        w for w, f in src.items() if f < jiebadict.MIN_FREQ and len(w) == 4 and "\u4e00" <= w[0] <= "\u9fff"
    )
    common = "磁盘空间"
    ix = open_index(tmp_path / "data", IDENTITY, IndexConfig())
    try:
        assert os.environ[jiebadict.ENV] == str(jiebadict.use())
        load_corpus(ix, tmp_path / "kb", {"rare.md": [f"这里写着{rare}这个词"], "disk.md": [f"检查{common}的使用"],
                                          "other.md": ["网络配置和路由表"]})  # fmt: skip
        assert rel_paths(ix.query(vector=None, text=rare, k=3), tmp_path / "kb") == ["rare.md"]
        assert rel_paths(ix.query(vector=None, text="磁盘", k=3), tmp_path / "kb") == ["disk.md"]
    finally:
        ix.close()


def test_without_the_jieba_package_the_index_says_so(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "jieba"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # a jieba without its dictionary
    code = textwrap.dedent("""
        from ragd.index import jiebadict
        from ragd.errors import IndexError_
        try:
            jiebadict.use()
        except IndexError_ as err:
            print(err.message)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "the `jieba` package" in out.stdout and "missing" in out.stdout, out.stderr
