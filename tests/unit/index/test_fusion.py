from __future__ import annotations

import math
from dataclasses import replace

from ragd.index import Hit
from ragd.index.keyword.fts import Term, identifier_like
from ragd.index.ranking.fusion import (
    DOC_RANK_CONSTANT,
    KEYWORD_FLOOR,
    KEYWORD_WEIGHT,
    LEAD_DEPTH,
    LEAD_WEIGHT,
    LOOKUP_WEIGHT,
    PASSAGE_DECAY,
    Explanation,
    fuse,
    fuse_documents,
    keyword_evidence,
    keyword_weight,
    near_empty,
    rare,
)

TEXT = "A passage of a document's own text, not a stub's."  # (a near-empty document ranks lower: near_empty)


def _hit(name: str, score: float, chunk: int = 0) -> Hit:
    return Hit(f"/kb/{name}", chunk, score, TEXT, (), None, 1, 1)


def test_weak_keyword_matches_are_not_evidence() -> None:
    noise = [_hit(n, KEYWORD_FLOOR * 0.75) for n in "abcde"]
    assert keyword_evidence(noise) == []
    strong = [_hit("x", 16.0), _hit("y", 13.8), _hit("z", 4.5), _hit("w", 2.2)]
    assert [h.source_path for h in keyword_evidence(strong)] == ["/kb/x", "/kb/y", "/kb/z"]


def test_fuse_ranks_by_reciprocal_rank_and_keeps_vector_only_hits() -> None:
    dense = [_hit("answer", 0.1), _hit("b", 0.2), _hit("c", 0.3)]
    keyword = [_hit("c", 9.0), _hit("b", 8.0)]
    fused = fuse(dense, keyword, 3)
    assert [h.source_path for h in fused] == ["/kb/c", "/kb/b", "/kb/answer"]
    assert fused[0].score == 1 / 63 + 1 / 61 and fused[1].score == 1 / 62 + 1 / 62
    # with keyword noise dropped, the vector side's first answer stays first
    assert fuse(dense, keyword_evidence([_hit("b", 1.0)]), 1)[0].source_path == "/kb/answer"
    # chunks of one file are distinct results
    assert len(fuse([_hit("a", 0.1, 0), _hit("a", 0.2, 1)], [], 5)) == 2


def _sized(name: str, score: float, chunk: int = 0, chunks: int = 1) -> Hit:
    return Hit(f"/kb/{name}", chunk, score, TEXT, (), None, 1, 1, source_chunks=chunks)


def test_documents_are_fused_so_a_long_document_does_not_win_on_its_number_of_chunks() -> None:
    """Per chunk, the long manual's three so-so chunks take three of the best places; per document it is one
    candidate among others, and its size counts against it a little."""
    dense = [_sized("manual", 0.62, 0, 300), _sized("answer", 0.61), _sized("manual", 0.60, 7, 300),
             _sized("other", 0.50), _sized("manual", 0.49, 9, 300)]  # fmt: skip
    keyword = [_sized("manual", 9.0, 3, 300), _sized("answer", 8.5)]
    chunked = [h.source_path for h in fuse(dense, keyword, 3)]
    assert chunked.count("/kb/manual") >= 2
    fused = fuse_documents(dense, keyword, 5)
    assert [h.source_path for h in fused][:2] == ["/kb/answer", "/kb/manual"]
    assert len({(h.source_path, h.chunk_index) for h in fused}) == len(fused)  # every passage once


def test_a_documents_passages_follow_each_other_by_their_chunk_rank_and_decay() -> None:
    dense = [_sized("a", 0.9, 2, 3), _sized("a", 0.8, 0, 3), _sized("b", 0.7), _sized("a", 0.6, 1, 3)]
    fused = fuse_documents(dense, [], 10)
    assert (fused[0].source_path, fused[0].chunk_index) == ("/kb/a", 2)
    a = [h for h in fused if h.source_path == "/kb/a"]
    assert [h.chunk_index for h in a] == [2, 0, 1]
    assert [h.score for h in a] == [a[0].score, a[0].score * PASSAGE_DECAY, a[0].score * PASSAGE_DECAY**2]
    b = next(h for h in fused if h.source_path == "/kb/b")
    assert fused.index(b) == 1  # the next document comes before a's second passage: a is not far ahead


def test_the_keyword_side_counts_in_full_only_for_identifiers() -> None:
    dense = [
        _sized("zh-other", 0.75),
        _sized("zh-answer", 0.70),
    ]  # a cross-lingual answer: no keyword can match
    keyword = [_sized("en-near", 12.0), _sized("en-other", 10.0)]

    def order(weight: float) -> list[str]:
        return [h.source_path for h in fuse_documents(dense, keyword, 4, weight)]

    assert order(KEYWORD_WEIGHT).index("/kb/zh-answer") < order(KEYWORD_WEIGHT).index("/kb/en-near")
    assert order(1.0).index("/kb/zh-answer") > order(1.0).index("/kb/en-near")
    assert identifier_like("what does rsync --delete-excluded do") and identifier_like("错误码 E1042")
    assert identifier_like("parse_config 的参数") and identifier_like("look up DNS records")
    assert not identifier_like("delete a directory and everything in it") and not identifier_like(
        "怎么查看磁盘空间"
    )


def test_a_lookup_of_a_word_or_two_goes_by_its_keyword_matches() -> None:
    """`LLMNR` alone: the sentence model's nearest chunk was `ln`'s page; BM25 names the resolver's pages. A lookup
    (at most two words, no CJK) lets the keyword side lead; a question, or a Chinese term (whose answer may be an
    English page no keyword reaches), keeps the weights it had."""
    dense = [_sized("ln", 0.41), _sized("hostname", 0.40)]  # the answer is not among the nearest chunks
    keyword = [_sized("zh/resolved", 9.0), _sized("nss-resolve", 8.5), _sized("resolved", 8.0)]

    def answer_before_ln(text: str) -> bool:
        order = [h.source_path for h in fuse_documents(dense, keyword, 5, keyword_weight(text))]
        return order.index("/kb/resolved") < order.index("/kb/ln")

    assert answer_before_ln("LLMNR") and answer_before_ln("git stash")
    assert not answer_before_ln("which service answers LLMNR queries")  # identifiers: 1, as before
    for text in ("ETIMEDOUT", "Pin-Priority", "ls --time-style", "  tar   -x  "):
        assert keyword_weight(text) == LOOKUP_WEIGHT, text
    assert keyword_weight("磁盘配额") == KEYWORD_WEIGHT and keyword_weight("DNS 解析") == 1.0
    assert keyword_weight("delete a directory") == KEYWORD_WEIGHT
    assert keyword_weight("look up DNS records") == 1.0


def test_the_english_glosses_of_a_chinese_question_bring_the_english_answer_up() -> None:
    """The vector side ranks the English answer third, behind two Chinese pages; the keyword hits of the question's
    English glosses name it: fused, it comes first, with its passages; without them it stays third."""
    dense = [_sized("zh-near", 0.71), _sized("zh-other", 0.70), _sized("en-answer", 0.69, 0, 4)]
    translated = [_sized("en-answer", 8.0, 2, 4), _sized("en-answer", 6.0, 0, 4), _sized("en-noise", 5.0)]
    without = [h.source_path for h in fuse_documents(dense, [], 5)]
    fused = fuse_documents(dense, [], 5, translated=translated)
    assert without.index("/kb/en-answer") == 2 and fused[0].source_path == "/kb/en-answer"
    assert {h.chunk_index for h in fused if h.source_path == "/kb/en-answer"} == {0, 2}
    assert "/kb/en-noise" in [
        h.source_path for h in fused
    ]  # a document only the glosses found is a candidate
    assert fuse_documents(dense, [], 5, translated=[]) == fuse_documents(dense, [], 5)


def test_the_leads_of_the_documents_found_rank_them_once_more() -> None:
    """The vector side ranks a long reference first and the answer second; the answer's lead (what the whole
    document is about) is the nearest to the question, the reference's below the first LEAD_DEPTH: fused with the
    leads, the answer comes first. A lead takes part only for a document some list found (`elsewhere` has the
    best lead but was not found)."""
    others = [_sized(f"other{i}", 0.5 - i / 100, 0, 30) for i in range(LEAD_DEPTH)]
    dense = [_sized("reference", 0.62, 7, 30), _sized("answer", 0.61, 0, 30), *others]
    leads = {h.source_path: 0.5 - i / 100 for i, h in enumerate(others)}
    leads |= {"/kb/reference": 0.1, "/kb/answer": 0.8, "/kb/elsewhere": 0.9}
    assert [h.source_path for h in fuse_documents(dense, [], 2)] == ["/kb/reference", "/kb/answer"]
    assert fuse_documents(dense, [], 2, leads=leads)[0].source_path == "/kb/answer"
    assert "/kb/elsewhere" not in {h.source_path for h in fuse_documents(dense, [], 20, leads=leads)}
    assert fuse_documents(dense, [], 2, leads={}) == fuse_documents(dense, [], 2)
    # the lift is LEAD_WEIGHT / (DOC_RANK_CONSTANT + rank) for the first LEAD_DEPTH documents by lead only
    many = [_sized(f"d{i:02}", 0.5 - i / 1000) for i in range(LEAD_DEPTH + 2)]
    by_lead = {h.source_path: i / 1000 for i, h in enumerate(many)}  # the last found has the best lead
    scores = {h.source_path: h.score for h in fuse_documents(many, [], len(many), leads=by_lead)}
    plain = {h.source_path: h.score for h in fuse_documents(many, [], len(many))}
    lifted = sorted((p for p in scores if scores[p] > plain[p]), key=lambda p: -by_lead[p])
    assert lifted == sorted(by_lead, key=lambda p: -by_lead[p])[:LEAD_DEPTH]
    best = lifted[0]
    assert abs(scores[best] - plain[best] - LEAD_WEIGHT / (DOC_RANK_CONSTANT + 1)) < 1e-12


def test_the_explanation_is_what_the_ranking_was_made_of() -> None:
    """Every side's rank and share as fusion used them: the shares add up to each document's fused score, the
    passages' scores are that × the decay, the results come in the order of those scores, a keyword hit under
    the floor says so, and collecting changes nothing of the ranking."""
    dense = [_hit("a", 0.9), _hit("b", 0.8), _hit("a", 0.7, 1), _hit("c", 0.6)]
    raw = [_hit("c", 12.0), _hit("d", 6.0), _hit("b", 1.5)]
    glossed = [_hit("b", 5.0)]
    leads = {"/kb/a": 0.2, "/kb/c": 0.5}
    why = Explanation()
    found = keyword_evidence(raw, why)
    assert [h.source_path for h in found] == ["/kb/c", "/kb/d"]
    ranked = fuse_documents(
        dense, found, 10, KEYWORD_WEIGHT, keyword_evidence(glossed, why, "glosses"), leads, why
    )
    assert ranked == fuse_documents(dense, found, 10, KEYWORD_WEIGHT, glossed, leads)
    explained = [why.of(h.source_path, h.chunk_index, h.score) for h in ranked]
    assert [e["fused"] for e in explained] == sorted((e["fused"] for e in explained), reverse=True)
    for hit, e in zip(ranked, explained, strict=True):
        parts = [e[s]["share"] for s in ("vector", "keyword", "glosses", "lead") if e[s]]
        assert math.isclose(sum(parts), e["document"]["score"])
        assert math.isclose(e["document"]["score"] * e["passage"]["decay"], hit.score)
    by_path = {h.source_path: e for h, e in zip(ranked, explained, strict=True)}
    assert by_path["/kb/d"]["vector"] is None and by_path["/kb/d"]["keyword"]["rank"] == 2
    assert by_path["/kb/b"]["keyword"] == {"rank": None, "score": 1.5, "share": 0.0, "dropped": "floor"}
    assert by_path["/kb/b"]["glosses"]["rank"] == 1 and by_path["/kb/b"]["vector"]["rank"] == 2
    assert by_path["/kb/c"]["lead"]["rank"] == 1 and by_path["/kb/c"]["lead"]["share"] == LEAD_WEIGHT / 11
    assert by_path["/kb/a"]["lead"]["rank"] == 2 and by_path["/kb/a"]["keyword"] is None
    assert [
        e["passage"]["index"] for h, e in zip(ranked, explained, strict=True) if h.source_path == "/kb/a"
    ] == [0, 1]
    assert (
        why.query()["weights"]["keyword"] == KEYWORD_WEIGHT and why.query()["keyword_cut"]["keyword"] == 3.0
    )


def test_a_near_empty_document_is_a_stub_of_front_matter_or_a_line_of_a_draft() -> None:
    def empty(content: str, chunks: int = 1) -> bool:
        return near_empty(Hit("/kb/n.md", 0, 1.0, content, (), None, 1, 1, source_chunks=chunks))

    assert empty("---\ntitle: hidden files\ntags: [linux, files, list]\n---")
    assert empty("+++\ntitle = 'x'\n+++\n# Heading\n\n## Two")
    assert empty("---\n---\n# Draft\nTODO")
    assert not empty("# To do\n\n- [ ] renew passport (expires in August)")
    assert not empty("# Add local dictionary sources")  # a page of one title line: its heading is its text
    assert not empty("---\ntitle: x\n---\nThe note's own text, a sentence or more.")
    assert not empty("每晚备份数据目录；索引可以从旁路文件重建。")  # Chinese text: letters are characters
    assert not empty("# Draft", chunks=2)  # the first chunk of a longer document


def test_a_near_empty_document_ranks_below_the_documents_with_text() -> None:
    stub = Hit("/kb/stub", 0, 0.9, "---\ntitle: hidden files\n---", (), None, 1, 1)
    dense = [stub, _hit("ls", 0.8), _hit("find", 0.7)]
    keyword = [replace(stub, score=15.0), _hit("ls", 6.0)]
    why = Explanation()
    fused = fuse_documents(dense, keyword, 5, KEYWORD_WEIGHT, explain=why)
    order = [h.source_path for h in fused]
    assert order[0] == "/kb/ls" and "/kb/stub" in order  # (first on both sides, it came first)
    assert why.of("/kb/stub", 0, 0.0)["document"]["near_empty"] is True
    assert "near_empty" not in why.of("/kb/ls", 0, fused[0].score)["document"]


def test_rare_words_are_a_lookup_and_their_hits_evidence_whatever_their_score() -> None:
    terms = [Term("侧吸式", phrase=False)]
    note = Hit("/kb/kitchen.md", 0, 1.7, "油烟机选侧吸式，师傅说顶吸的不合适。", (), None, 1, 1)
    assert rare([note], 40, terms)
    assert keyword_evidence([note]) == []  # under KEYWORD_FLOOR: a match on common words, as far as BM25 says
    assert keyword_evidence([note], exact=True) == [note]
    assert not rare([note], 1, terms)  # as many hits as asked for: there may be more
    assert not rare(
        [note, *(_hit(n, 1.6) for n in "abc")], 40, terms
    )  # in more than RARE_DOCUMENTS documents
    assert not rare([note], 40, [*terms, Term("refrigerator", phrase=True)])  # the first hit lacks a word
    assert not rare([], 40, terms)
