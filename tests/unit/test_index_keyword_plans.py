"""Keyword queries on common words (issue 14): the max-score plans give the full query's answer on real collections.

One module-scoped collection of 2,400 chunks in which some words are in every chunk, some in most, some in a few:
each test compares what ragd answers (or a plan's narrow query) with the plain OR of all the terms run on the same
collection, and checks which query strings were run.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import zvec

from ragd.config import IndexConfig
from ragd.index import Hit, SourceWrite, fts, keyword, open_index, termstats
from ragd.index.fusion import keyword_evidence
from ragd.index.zvec_backend import ZvecIndex
from ragd.index.zvec_schema import CONTENT_HASH, FTS_TEXT
from ragd.model import md5_hex
from tests.unit.test_index_zvec import IDENTITY, make_chunks

SOURCES, PER = 480, 5  # 2,400 chunks
COMMON = ["battery", "电池"]  # in every chunk
FREQUENT = ["charger", "network"]  # in about 60%
RARE = [f"zq{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40)]  # each in under 1% of the chunks


def _text(rng: random.Random, s: int, c: int) -> str:
    words = [*COMMON, *(w for w in FREQUENT if rng.random() < 0.6)]
    words += [rng.choice(RARE) for _ in range(rng.random() < 0.25)]
    words += [f"filler{rng.randrange(300)}" for _ in range(rng.randrange(10, 40))]
    words += ["battery"] * rng.randrange(3) + [f"item{s}x{c}"]
    rng.shuffle(words)
    return " ".join(words)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZvecIndex]:
    base = tmp_path_factory.mktemp("plans")
    ix = open_index(base / "data", IDENTITY, IndexConfig())
    assert isinstance(ix, ZvecIndex)
    rng, writes = random.Random(14), []
    for s in range(SOURCES):
        path = str(base / "kb" / f"d{s % 9}" / f"f{s}.md")
        texts = [_text(rng, s, c) for c in range(PER)]
        writes.append(
            SourceWrite(path, md5_hex("".join(texts)), str(base / "kb"), make_chunks(path, texts), 0)
        )
    for start in range(0, SOURCES, 100):
        ix.write_sources(writes[start : start + 100])
    ix.flush()
    yield ix
    ix.close()


class Recorder:
    """Runs query strings on the collection (as ZvecIndex does) and remembers them."""

    def __init__(self, ix: ZvecIndex) -> None:
        self.ix, self.ran = ix, list[str]()

    def __call__(self, query_string: str, k: int) -> list[Hit]:
        self.ran.append(query_string)
        return self.ix._run(zvec.Query(FTS_TEXT, fts=zvec.Fts(query_string=query_string)), k, None, ())


def full(ix: ZvecIndex, text: str, k: int) -> list[Hit]:
    qs = fts.query_string(text)
    assert qs is not None
    return Recorder(ix)(qs, k)


def ranking(hits: list[Hit]) -> list[tuple[float, str]]:
    """Scores with the chunks that hold them, ties in a fixed order (equal scores may come in any order)."""
    return sorted((-round(h.score, 4), f"{h.source_path}#{h.chunk_index}") for h in hits)


def stats(ix: ZvecIndex) -> termstats.TermStats:
    found = ix._term_stats()
    assert found is not None
    return found


def test_the_sample_is_spread_over_the_collection(index: ZvecIndex) -> None:
    s = stats(index)
    assert s.documents == SOURCES * PER
    assert 0.7 * termstats.SAMPLE <= s.size <= 2 * termstats.SAMPLE  # ~SAMPLE chunks chosen by content hash
    # chunks of the first and of the last sources written: not the first SAMPLE in storage order
    written = sorted(int(n) for n in re.findall(r"item(\d+)x", s._joined))
    assert written[0] < SOURCES // 10 and written[-1] > SOURCES - SOURCES // 10


@pytest.mark.parametrize("word", [*COMMON, *FREQUENT, "filler7", RARE[3], "item5x2"])
def test_a_terms_bound_is_never_below_what_zvec_scores(index: ZvecIndex, word: str) -> None:
    term = fts.terms(word)[0]
    best = full(index, word, 1)
    assert best, word
    assert best[0].score <= stats(index).bound(term)


def test_bounds_follow_document_frequency(index: ZvecIndex) -> None:
    s = stats(index)
    bound = {w: s.bound(fts.terms(w)[0]) for w in ("battery", "电池", "charger", RARE[0])}
    assert bound["battery"] < 0.1 and bound["charger"] < bound[RARE[0]]
    assert bound["电池"] < 2 * 2.2 * math.log(2)  # two characters, each counted as a token at most
    assert s.share(fts.terms("battery")[0]) == 1.0 and s.share(fts.terms(RARE[0])[0]) < keyword.RARE_SHARE


@pytest.mark.parametrize(
    "text",
    [
        f"{RARE[1]} battery",
        f"battery {RARE[2]} charger",
        f"{RARE[4]} 电池 network",
        f"item3x1 {RARE[5]} battery",
    ],
)
def test_a_rare_word_beside_common_ones_walks_only_its_documents(index: ZvecIndex, text: str) -> None:
    for evidence in (False, True):
        rec = Recorder(index)
        got = keyword.search(rec, fts.terms(text), 10, stats(index), evidence=evidence)
        assert rec.ran[0].startswith("+(")
        want = full(index, text, 10)
        if not evidence:
            assert ranking(got) == ranking(want)
        else:  # the hybrid search keeps only the evidence: that must not change
            assert ranking(keyword_evidence(got)) == ranking(keyword_evidence(want))


def test_a_narrow_answer_that_cannot_be_proven_is_widened(index: ZvecIndex) -> None:
    # two hits for the rare word, while documents with only `charger` score above the weakest of the top 10
    text = "item3x1 charger"
    rec = Recorder(index)
    got = keyword.search(rec, fts.terms(text), 10, stats(index), evidence=False)
    assert len(rec.ran) == 2 and rec.ran[0].startswith("+(") and not rec.ran[1].startswith("+(")
    assert ranking(got) == ranking(full(index, text, 10))


def test_common_words_alone_are_no_keyword_evidence(index: ZvecIndex) -> None:
    rec = Recorder(index)
    assert keyword.search(rec, fts.terms("battery 电池"), 20, stats(index), evidence=True) == []
    assert rec.ran == [] and keyword_evidence(full(index, "battery 电池", 20)) == []
    # a keyword search (not the hybrid one's evidence) still ranks them
    assert ranking(keyword.search(rec, fts.terms("battery"), 5, stats(index), evidence=False)) == ranking(
        full(index, "battery", 5)
    )


def test_proven() -> None:
    hit = Hit("/a", 0, 9.0, "", (), None, 1, 1)
    weak = Hit("/a", 1, 1.0, "", (), None, 1, 1)
    assert keyword.proven([hit, hit], 2, 9.0, evidence=False)  # the k-th hit beats anything left out
    assert not keyword.proven([hit, weak], 2, 1.5, evidence=False)
    assert not keyword.proven([hit], 2, 0.1, evidence=False)  # fewer than k: what is left out would come next
    assert keyword.proven([hit], 2, 2.0, evidence=True)  # below the evidence cut (max(2.0, 9 / 4) = 2.25)
    assert not keyword.proven([hit], 2, 2.3, evidence=True)
    assert keyword.proven([], 2, 1.9, evidence=True)


def test_zvec_index_query_answers_as_the_full_query(index: ZvecIndex) -> None:
    for text in [f"{RARE[6]} battery 电池", f"charger {RARE[7]}", "battery", "filler3 battery"]:
        assert ranking(index.query(vector=None, text=text, k=10)) == ranking(full(index, text, 10)), text


def test_without_a_sample_queries_run_as_written(tmp_path: Path) -> None:
    ix = open_index(tmp_path / "small", IDENTITY, IndexConfig())
    assert isinstance(ix, ZvecIndex)
    try:
        path = str(tmp_path / "a.md")
        ix.replace_source(path, "m", str(tmp_path), make_chunks(path, ["battery charger", "battery"]))
        assert ix._term_stats() is None  # fewer than MIN_SAMPLE chunks
        assert [h.chunk_index for h in ix.query(vector=None, text="charger battery", k=5)] == [0, 1]
        assert termstats.sample(ix._live(), 2, CONTENT_HASH, FTS_TEXT) is None
    finally:
        ix.close()
