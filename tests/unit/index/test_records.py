"""What the index holds per source, summed from its chunks' rows (`records.summaries`): whole or not, and what
summing a big listing holds while it runs."""

from __future__ import annotations

from ragd.index.backend import SourceSummary
from ragd.index.records import summaries
from tests.support.held import held_meanwhile


def test_a_source_whose_chunks_agree_and_run_from_zero_is_whole_in_any_order() -> None:
    rows = [("/kb/a.md", "m1", 2), ("/kb/b.md", "m2", 0), ("/kb/a.md", "m1", 0), ("/kb/a.md", "m1", 1)]
    assert summaries(rows) == {
        "/kb/a.md": SourceSummary("/kb/a.md", "m1", 3),
        "/kb/b.md": SourceSummary("/kb/b.md", "m2", 1),
    }


def test_a_source_left_half_written_never_matches_its_sidecar() -> None:
    """Chunks of two versions (a crash between batches), a gap, or no chunk 0: its md5 is ""."""
    mixed = [("/kb/a.md", "old", 0), ("/kb/a.md", "new", 1)]
    gap = [("/kb/b.md", "m", 0), ("/kb/b.md", "m", 2)]
    no_first = [("/kb/c.md", "m", 1), ("/kb/c.md", "m", 2)]
    late_change = [("/kb/d.md", "m", 0), ("/kb/d.md", "m", 1), ("/kb/d.md", "x", 2), ("/kb/d.md", "m", 3)]
    got = summaries(mixed + gap + no_first + late_change)
    assert {p: (s.source_md5, s.chunk_count) for p, s in got.items()} == {
        "/kb/a.md": ("", 2), "/kb/b.md": ("", 2), "/kb/c.md": ("", 2), "/kb/d.md": ("", 4),
    }  # fmt: skip
    assert summaries([]) == {}


def test_summing_a_big_listing_holds_little_beside_what_it_returns() -> None:
    """Rows are summed as they come: what is held meanwhile for each source is a few fields, not a set of md5s and
    one of indices (~470 bytes a source on the sets' code, ~110 now: 20,000 sources of two chunks each)."""
    n = 20_000
    rows = [(f"/kb/folder/note-{i:06d}.md", f"{i:032x}", j) for i in range(n) for j in (1, 0)]
    result, meanwhile = held_meanwhile(lambda: summaries(iter(rows)))
    assert len(result) == n and result["/kb/folder/note-000007.md"] == SourceSummary(
        "/kb/folder/note-000007.md", f"{7:032x}", 2
    )
    assert meanwhile / n < 200, f"{meanwhile / n:.0f} bytes a source held while summing"
