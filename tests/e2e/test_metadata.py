"""Document metadata through the real processes: front matter and folder defaults become fields that `ragctl
search --where`, the MCP search tool and `ragd search --where` filter on; editing a `.ragd-meta.toml` while the
agent runs relabels the files below it; the front matter's title is in the context header."""

from __future__ import annotations

import json
from pathlib import Path

from ragd.pipeline import sidecar
from tests.e2e.agent import AgentProcess, ragctl, ragctl_json, running_agent
from tests.e2e.conftest import ragd, ragd_json

FRONT = """---
title: "Guide: \\"X\\" edition"
tags: [invoice, 'q"uote', 中文标签]
version: 2.10
customer: ACME
owner: {name: nested}
---
# Battery

The battery marker holds 6100 mAh.
"""


def tree(root: Path) -> None:
    (root / "manuals" / "sub").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "manuals" / ".ragd-meta.toml").write_text('product = "X200"\ntags = ["manual"]\n')
    (root / "manuals" / "a.md").write_text(FRONT, encoding="utf-8")
    (root / "manuals" / "sub" / "b.md").write_text("# Charger\n\nThe charger marker gives 90 W.\n")
    (root / "other" / "c.md").write_text("---\ntags: invoice, paid\n---\nThe receipt marker.\n")


def where(*filters: str) -> set[str]:
    """The documents (paths relative to their root) `ragctl search marker --where F...` finds."""
    args = [a for f in filters for a in ("--where", f)]
    found = ragctl_json("search", "marker", "--mode", "keyword", "-k", "20", *args)
    return {r["rel_path"] for r in found["results"]}


def test_filters_follow_front_matter_and_folder_defaults(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "kb"
    tree(root)
    config.write_text(config.read_text() + '\n[metadata]\nkeys = ["customer"]\n')
    with running_agent(tmp_path / "agent.log", str(root)) as agent:
        agent.wait_idle()
        assert where("tag=invoice") == {"manuals/a.md", "other/c.md"}
        assert where("tag=MANUAL") == {"manuals/a.md", "manuals/sub/b.md"}  # folder tags add, case folded
        assert where("product=X200") == {"manuals/a.md", "manuals/sub/b.md"}
        assert where("product=X200", "tag=invoice") == {"manuals/a.md"}
        assert (
            where("version^=2.") == {"manuals/a.md"} and where("version=2.1") == set()
        )  # "2.10" kept as text
        assert where("customer=acme") == {"manuals/a.md"}
        assert where('tag=q"uote') == where("tag^=中文") == {"manuals/a.md"}
        _results_carry_metadata(agent, root)
        _title_in_the_header(root)

        toml = root / "manuals" / ".ragd-meta.toml"
        toml.write_text('product = "X300"\n')  # edited while the agent runs
        agent.wait_idle()
        assert where("product=X300") == {"manuals/a.md", "manuals/sub/b.md"}
        assert where("product=X200") == set() and where("tag=manual") == set()
        # the history tells the relabel, and what it changed
        told = ragctl_json("changes", str(root / "manuals"), "--kind", "relabeled")["changes"]
        relabeled = {c["path"]: c["detail"] for c in told}
        assert set(relabeled) == {str(root / "manuals" / "a.md"), str(root / "manuals" / "sub" / "b.md")}
        assert "product: X200 -> X300" in relabeled[str(root / "manuals" / "sub" / "b.md")]
        assert "tags: manual -> (none)" in relabeled[str(root / "manuals" / "sub" / "b.md")]

        (root / "manuals" / "sub" / ".ragd-meta.toml").write_text('product = "X300-mini"\n')  # nearer wins
        agent.wait_idle()
        assert where("product=X300") == {"manuals/a.md"}
        assert where("product^=x300") == {"manuals/a.md", "manuals/sub/b.md"}

        toml.write_text("product = \n")  # broken: a note, and labelled as if it were absent
        agent.wait_idle()
        assert where("product=X300") == set()
        notes = sidecar.read_entry(sidecar.entry_path(root / "manuals", "a.md")).metadata.notes  # type: ignore[union-attr]
        assert any("not valid TOML" in n and str(toml) in n for n in notes), notes

        toml.unlink()
        agent.wait_idle()
        assert where("product^=") == {"manuals/sub/b.md"}

        bad = ragctl("search", "marker", "--where", "no value", check=2)
        assert "not a metadata filter" in bad.stderr
    offline = ragd_json("search", "marker", "--mode", "keyword", "--where", "tag=paid")
    assert [r["rel_path"] for r in offline["results"]] == ["other/c.md"]
    assert "tags: invoice, paid" in ragd("search", "receipt", "--mode", "keyword").stdout


def _results_carry_metadata(agent: AgentProcess, root: Path) -> None:
    want = {"title": 'Guide: "X" edition', "tags": ["manual", "invoice", 'q"uote', "中文标签"], "product": "X200",
            "version": "2.10", "customer": "ACME"}  # fmt: skip
    hit = ragctl_json("search", "battery", "--mode", "keyword", "-k", "1")["results"][0]
    assert hit["path"] == str(root / "manuals" / "a.md") and hit["metadata"] == want
    plain = ragctl_json("search", "charger", "--mode", "keyword", "-k", "1", "--where", "type^=")["results"]
    assert plain == []  # no document has a type
    mcp = agent.call("mcp_call", {"name": "search", "arguments": {"query": "marker", "mode": "keyword",
                                                                   "top_k": 20, "where": ["tag=paid"]}})  # fmt: skip
    assert not mcp.get("isError"), mcp
    assert [(r["rel_path"], r["metadata"]) for r in mcp["structuredContent"]["results"]] == [
        ("other/c.md", {"tags": ["invoice", "paid"]})
    ]
    entry = sidecar.read_entry(sidecar.entry_path(root / "manuals", "a.md"))
    assert entry is not None and entry.metadata is not None
    assert any("'owner' holds a dict" in n for n in entry.metadata.notes), entry.metadata.notes
    raw = json.loads(sidecar.entry_path(root / "manuals", "a.md").read_text())
    assert raw["metadata"]["document"]["version"] == "2.10" and "product" not in raw["metadata"]["document"]


def _title_in_the_header(root: Path) -> None:
    entry = sidecar.read_entry(sidecar.entry_path(root / "manuals", "a.md"))
    assert entry is not None
    assert entry.chunks[0].meta["header"].startswith('File: a.md | Title: Guide: "X" edition')
