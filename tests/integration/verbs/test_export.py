"""`export`: the live `.ragjson` entries under a root or a folder, named for the archive."""

from __future__ import annotations

from ragctl import protocol as p
from tests.integration.verbs.conftest import DOCS, Running


def test_export_of_every_root_recursively(running: Running) -> None:
    res = running.ctl("export", {"recursive": True})
    assert res["base"] == str(running.root.parent)
    names = sorted(f["arcname"] for f in res["files"])
    expect = sorted(f"kb/{rel.rpartition('/')[0] + '/' if '/' in rel else ''}.rag/{rel.rpartition('/')[2]}.ragjson"
                    for rel in DOCS)  # fmt: skip
    expect += ["kb/.rag/sub.ragjson", "kb/sub/.rag/deep.ragjson"]  # a folder's entry is in its parent's .rag/
    assert names == sorted(expect)


def test_export_of_one_folder_alone(running: Running) -> None:
    sub = running.root / "sub"
    res = running.ctl("export", {"path": str(sub)})
    assert res["base"] == str(sub)
    assert sorted(f["arcname"] for f in res["files"]) == [".rag/deep.ragjson", ".rag/gamma.md.ragjson"]


def test_export_outside_the_roots_is_refused(running: Running) -> None:
    assert running.refused("export", {"path": "/usr"}).code == p.NOT_FOUND
    assert running.refused("export", {"recursive": 1}).code == p.BAD_REQUEST
