from __future__ import annotations

from ragd.index import Hit
from ragd.index.fusion import KEYWORD_FLOOR, fuse, keyword_evidence


def _hit(name: str, score: float, chunk: int = 0) -> Hit:
    return Hit(f"/kb/{name}", chunk, score, "text", (), None, 1, 1)


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
