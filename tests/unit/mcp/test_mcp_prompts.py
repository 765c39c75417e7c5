"""The text of the prompt `summarise_changes` (mcp/prompts.py), from a `recent_changes` answer."""

from __future__ import annotations

from typing import Any

from ragd.mcp.prompts import changes_prompt


def _change(path: str, change: str, reason: str = "", old_path: str | None = None) -> dict[str, Any]:
    return {"path": path, "change": change, "reason": reason, "old_path": old_path}


def test_documents_are_listed_and_skipped_files_only_counted() -> None:
    found = {"agent_started": "2026-12-01T09:00:00Z", "truncated": True,
             "changes": [_change("/kb/a.md", "changed"), _change("/kb/b.md", "moved", old_path="/kb/old/b.md"),
                         _change("/kb/x.gz", "skipped", "unsupported file type"),
                         _change("/kb/y.gz", "skipped", "unsupported file type"),
                         _change("/kb/scan.pdf", "failed", "no text")]}  # fmt: skip
    text = changes_prompt(found, 1)
    assert "in the last hour." in text
    assert (
        "- changed: /kb/a.md\n- moved: /kb/b.md (was /kb/old/b.md)\n- failed: /kb/scan.pdf (no text)\n"
        "- and 2 files skipped" in text
    )
    assert "x.gz" not in text and "call `recent_changes` for the rest" in text


def test_no_change_says_so() -> None:
    text = changes_prompt({"agent_started": "2026-12-01T09:00:00Z", "truncated": False, "changes": []}, 48)
    assert "no change to my documents in the last 48 hours" in text
