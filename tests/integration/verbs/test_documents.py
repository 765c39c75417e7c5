"""Reading a document, a chunk, a document's sidecar facts and chunks, browsing a folder, and the recent changes:
the verbs themselves (verbs/documents.py, browse.py, changes.py), called on the running agent as MCP's tools and
resources and the web page call them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragctl import protocol as p
from ragd import access
from ragd.errors import RagdError
from ragd.verbs import browse, changes, documents
from ragd.verbs.paths import PathRefused
from tests.integration.verbs.conftest import DOCS, Running


def test_read_document_gives_the_text_and_a_line_window(running: Running) -> None:
    rt = running.life.agent
    doc = documents.read_document(rt, documents.ReadDocumentArgs(path="alpha.md"))  # relative to a root
    assert doc["path"] == str(running.root / "alpha.md") and doc["root"] == str(running.root)
    assert doc["text"] == DOCS["alpha.md"].rstrip("\n") and doc["source"] == "file" and not doc["truncated"]
    window = documents.read_document(
        rt, documents.ReadDocumentArgs(path="alpha.md", start_line=3, end_line=3)
    )
    assert window["text"] == "The wombat digs burrows at night. Token: zyxalpha."
    assert (window["start_line"], window["end_line"], window["total_lines"]) == (3, 3, 3)
    with pytest.raises(RagdError) as beyond:
        documents.read_document(rt, documents.ReadDocumentArgs(path="alpha.md", start_line=9))
    assert beyond.value.code == p.BAD_REQUEST and "out of range" in beyond.value.message


def test_read_chunk_gives_the_chunk_and_its_neighbours(running: Running) -> None:
    rt = running.life.agent
    chunk = documents.read_chunk(
        rt, documents.ReadChunkArgs(path=str(running.root / "sub/gamma.md"), chunk_index=0)
    )
    assert chunk["chunk_index"] == 0 and chunk["chunk_count"] >= 1
    assert "Quokkas smile" in chunk["chunks"][0]["content"]
    with pytest.raises(RagdError) as missing:
        documents.read_chunk(rt, documents.ReadChunkArgs(path="sub/gamma.md", chunk_index=99))
    assert missing.value.code == p.NOT_FOUND
    with pytest.raises(RagdError) as wide:
        documents.read_chunk(rt, documents.ReadChunkArgs(path="sub/gamma.md", chunk_index=0, neighbors=21))
    assert wide.value.code == p.BAD_REQUEST


def test_file_info_and_chunks_come_from_the_sidecar(running: Running) -> None:
    rt = running.life.agent
    raw = str(running.root / "beta.txt").lstrip("/")  # as a resource URI names it: no leading slash
    info = documents.file_info(rt, documents.FileArgs(path=raw))
    assert info["path"] == str(running.root / "beta.txt") and info["state"] == "EMBEDDED" and info["exists"]
    assert info["chunks_uri"] == "ragd://chunks" + str(running.root / "beta.txt")
    found = documents.file_chunks(rt, documents.FileArgs(path=info["path"]))
    assert len(found["chunks"]) == info["chunks"] and "numbats" in found["chunks"][0]["content"]


def test_browse_lists_the_roots_and_a_folder(running: Running) -> None:
    rt = running.life.agent
    roots = browse.browse(rt)["roots"]
    assert [r["path"] for r in roots] == [str(running.root)]
    listing = browse.browse(rt, browse.BrowseArgs(path=str(running.root / "sub")))
    assert [(e["name"], e["type"]) for e in listing["entries"]] == [("deep", "dir"), ("gamma.md", "file")]
    assert listing["entries"][1]["state"] == "EMBEDDED"
    with pytest.raises(RagdError) as not_a_folder:
        browse.browse(rt, browse.BrowseArgs(path=str(running.root / "alpha.md")))
    assert not_a_folder.value.code == p.NOT_FOUND


def test_every_path_is_checked(running: Running) -> None:
    rt = running.life.agent
    for read in (
        lambda: documents.read_document(rt, documents.ReadDocumentArgs(path="/etc/passwd")),
        lambda: documents.read_chunk(rt, documents.ReadChunkArgs(path="../kb/alpha.md", chunk_index=0)),
        lambda: documents.file_info(rt, documents.FileArgs(path="etc/passwd")),
        lambda: browse.browse(rt, browse.BrowseArgs(path=str(running.root / ".rag"))),
    ):
        with pytest.raises(PathRefused):
            read()
    with pytest.raises(ValidationError):  # strict arguments, as every verb's
        documents.ReadChunkArgs.model_validate({"path": "alpha.md", "chunk_index": "0"})


def test_a_scoped_caller_reads_only_what_it_may(running: Running) -> None:
    """The test's temporary directory is its owner's alone: what every local user may read holds none of it."""
    rt = running.life.agent
    with access.acting_as(access.PUBLIC):
        with pytest.raises(access.NotReadable):
            documents.read_document(rt, documents.ReadDocumentArgs(path="alpha.md"))
        with pytest.raises(access.NotReadable):
            documents.file_info(rt, documents.FileArgs(path=str(running.root / "alpha.md")))
        with pytest.raises(access.NotReadable):
            browse.browse(rt, browse.BrowseArgs(path=str(running.root)))
        assert browse.browse(rt)["roots"] == []
        assert changes.recent_changes(rt)["changes"] == []


def test_recent_changes_lists_each_document_once(running: Running) -> None:
    rt = running.life.agent
    (running.root / "beta.txt").write_text("Beta, edited: numbats. Token: zyxbeta2.\n")
    running.wait()
    found = changes.recent_changes(rt, changes.RecentArgs(since_hours=1.0))
    paths = [c["path"] for c in found["changes"]]
    assert sorted(paths) == sorted(str(running.root / rel) for rel in DOCS) and len(set(paths)) == len(paths)
    assert paths[0] == str(running.root / "beta.txt") and found["changes"][0]["change"] == "changed"
    under = changes.recent_changes(rt, changes.RecentArgs(path_prefix="sub", limit=1))
    assert len(under["changes"]) == 1 and under["truncated"]
    assert under["changes"][0]["path"].startswith(str(running.root / "sub") + "/")
