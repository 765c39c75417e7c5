from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from ragd.config import IgnoreConfig
from ragd.errors import FileSkipped
from ragd.model import EmbeddingIdentity, SplitterSettings
from ragd.pipeline import scan, sidecar
from ragd.pipeline.digest import Digest
from ragd.pipeline.filestat import FileStat
from ragd.pipeline.scan import (
    Change,
    Ignore,
    Shared,
    classify,
    files_of,
    list_dir,
    md5_file,
    outside_links,
    rejudge_link,
    shared_files,
    walk_dirs,
)
from ragd.pipeline.sidecar import FileEntry, SourceInfo
from ragd.vocabulary import FileState
from tests.support.held import held_by

IDENT = EmbeddingIdentity("m", 4, SplitterSettings())


def _entry(
    path: Path,
    *,
    status: str = FileState.EMBEDDED,
    recorded: float | None = None,
    ns: bool = True,
    md5: str | None = None,
    **kw: object,
) -> FileEntry:
    st = path.stat()
    src = SourceInfo(
        path.name,
        md5 if md5 is not None else md5_file(path),
        st.st_size,
        int(st.st_mtime),
        st.st_ino,
        st.st_mtime_ns if ns else None,
        st.st_ctime_ns if ns else None,
    )
    stamp = sidecar.utc_stamp(recorded if recorded is not None else time.time() + 5)
    return FileEntry(status, stamp, stamp, src, "m", 4, splitter="recursive:1000:200", **kw)  # type: ignore[arg-type]


def test_ignore_rules(tmp_path: Path) -> None:
    for name in (
        "a.md",
        ".hidden.md",
        "a.md~",
        ".a.md.swp",
        ".#a.md",
        "x.tmp",
        ".goutputstream-ABC",
        "4913",
        "~$report.docx",
        "keep.txt",
    ):
        (tmp_path / name).write_text("x")
    for d in ("sub", ".git", "node_modules", ".rag", "__pycache__"):
        (tmp_path / d).mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "nowhere")
    listing = list_dir(tmp_path, Ignore(IgnoreConfig(patterns=("keep.*",))))
    assert (
        set(listing.files)
        == {"a.md"}
        == {n for n, _ in files_of(tmp_path, Ignore(IgnoreConfig(patterns=("keep.*",))))}
    )
    assert listing.dirs == ("sub",)
    assert list(walk_dirs(tmp_path, Ignore(IgnoreConfig()))) == [tmp_path, tmp_path / "sub"]


def test_unchanged_by_stat_without_reading(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("hello")
    old = time.time() - 100
    os.utime(f, (old, old))
    e = _entry(f, md5="not-the-real-md5")  # if it hashed, it would call this CHANGED
    assert classify(e, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.UNCHANGED


def test_racy_stat_is_hashed(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("hello")
    racy = _entry(f, recorded=f.stat().st_mtime)  # recorded in the same second as the mtime
    assert classify(racy, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.TOUCHED
    lying = _entry(f, recorded=f.stat().st_mtime, md5="0" * 32)
    assert classify(lying, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.CHANGED


def test_touched_vs_changed(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("hello")
    e = _entry(f)
    os.utime(f, (time.time() - 50, time.time() - 50))
    assert classify(e, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.TOUCHED
    f.write_text("hello, world")
    assert classify(e, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.CHANGED
    assert classify(None, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.NEW


def test_ragjson_tool_entry_uses_second_mtime(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("hello")
    old = time.time() - 100
    os.utime(f, (old, old))
    e = _entry(f, ns=False, md5="x")
    assert classify(e, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.UNCHANGED


def test_identity_mismatch_and_failed_retry(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("hello")
    os.utime(f, (time.time() - 100, time.time() - 100))
    e = _entry(f)
    other = EmbeddingIdentity("m", 4, SplitterSettings(chunk_size=500, chunk_overlap=50))
    assert classify(e, f, f.stat(), other, "p", time.time()) == Change.RETRY
    now = time.time()
    due = _entry(f, status=FileState.FAILED, error={"retry_at": sidecar.utc_stamp(now - 1)})
    later = _entry(f, status=FileState.FAILED, error={"retry_at": sidecar.utc_stamp(now + 60)})
    never = _entry(f, status=FileState.FAILED, error={"retry_at": None})
    foreign = _entry(f, status=FileState.FAILED)
    assert classify(due, f, f.stat(), IDENT, lambda: "p", now) == Change.RETRY
    assert classify(later, f, f.stat(), IDENT, lambda: "p", now) == Change.UNCHANGED
    assert classify(never, f, f.stat(), IDENT, lambda: "p", now) == Change.UNCHANGED
    assert classify(foreign, f, f.stat(), IDENT, lambda: "p", now) == Change.RETRY


def test_skipped_reevaluated_when_policy_changes(tmp_path: Path) -> None:
    f = tmp_path / "a.bin"
    f.write_text("x")
    e = _entry(f, status=FileState.SKIPPED, md5="", error={"policy": "p1"})
    assert classify(e, f, f.stat(), IDENT, lambda: "p1", time.time()) == Change.UNCHANGED
    assert classify(e, f, f.stat(), IDENT, lambda: "p2", time.time()) == Change.RETRY


def _bytes_name(directory: Path, name: bytes) -> bytes:
    return os.fsencode(directory) + b"/" + name


def test_names_that_are_not_utf8_are_listed_as_undecodable_and_not_walked(tmp_path: Path) -> None:
    fd = os.open(_bytes_name(tmp_path, b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    os.mkdir(_bytes_name(tmp_path, b"d\xff"))
    os.close(
        os.open(_bytes_name(tmp_path, b".hidden\xe9"), os.O_CREAT | os.O_WRONLY, 0o644)
    )  # ignored: silent
    (tmp_path / "ok.md").write_text("x")
    listing = list_dir(tmp_path, Ignore(IgnoreConfig()))
    assert set(listing.files) == {"ok.md"} and listing.dirs == ()
    assert [n for n, _ in files_of(tmp_path, Ignore(IgnoreConfig()))] == ["ok.md"]
    assert listing.undecodable == {
        "caf\\xe9.txt": "file name is not valid UTF-8 (b'caf\\xe9.txt'); rename it to index it",
        "d\\xff": "directory name is not valid UTF-8 (b'd\\xff'); rename it to index its files",
    }
    assert list(walk_dirs(tmp_path, Ignore(IgnoreConfig()))) == [tmp_path]


def test_fifos_sockets_devices_and_broken_links_are_listed_with_the_reason(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock.md"))
        (tmp_path / "null.md").symlink_to("/dev/null")
        (tmp_path / "dangling.md").symlink_to(tmp_path / "nowhere.md")
        (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
        (tmp_path / "real.md").write_text("x")
        (tmp_path / "alias.md").symlink_to(tmp_path / "real.md")
        listing = list_dir(tmp_path, Ignore(IgnoreConfig()))
        streamed = dict(files_of(tmp_path, Ignore(IgnoreConfig())))
    assert set(listing.files) == {"real.md", "alias.md"} == set(streamed)
    assert (
        streamed["alias.md"].st_ino
        == listing.files["alias.md"].st_ino
        == (tmp_path / "real.md").stat().st_ino
    )
    assert listing.special == {
        "pipe.md": "not a regular file (FIFO)",
        "sock.md": "not a regular file (socket)",
        "null.md": "not a regular file (character device)",
        "dangling.md": f"dangling symbolic link to {tmp_path / 'nowhere.md'}",
        "loop.md": "symbolic link loop",
    }


def test_links_are_listed_with_their_real_targets_and_only_shared_files_are_kept(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "b").mkdir(parents=True)
    outside.mkdir()
    (root / "b" / "t.md").write_text("target")
    (root / "plain.md").write_text("one name only")
    (root / "hard.md").write_text("two names")
    os.link(root / "hard.md", root / "b" / "hard2.md")
    (root / "l.md").symlink_to("b/t.md")
    (root / "inner").symlink_to(root / "b")
    (root / "away").symlink_to(outside)
    listing = list_dir(root, Ignore(IgnoreConfig()))
    assert (
        set(listing.files)
        == {"plain.md", "hard.md", "l.md"}
        == {n for n, _ in files_of(root, Ignore(IgnoreConfig()))}
    )
    assert listing.files["l.md"].st_ino == (root / "b" / "t.md").stat().st_ino  # the target's stat
    assert listing.links == {"l.md": str(root / "b" / "t.md")}
    assert listing.linked_dirs == {"inner": str(root / "b"), "away": str(outside)}
    hard = (root / "hard.md").stat()
    assert set(shared_files(listing)) == {Shared("l.md", target=str(root / "b" / "t.md")),
                                          Shared("hard.md", inode=(hard.st_dev, hard.st_ino))}  # fmt: skip
    # a link to a folder under a root is not followed, silently (its files are indexed where they are); one that
    # leads outside every root is SKIPPED with the reason
    assert outside_links(listing, (root,)) == {
        "away": f"symbolic link to the folder {outside}, outside the roots: not followed"
    }
    assert outside_links(listing, (root, outside)) == {}
    assert outside_links(listing, ()) == {}  # roots unknown: nothing judged


def test_a_link_is_judged_again_when_its_target_enters_or_leaves_the_roots(tmp_path: Path) -> None:
    (tmp_path / "t.md").write_text("x")
    target, one, two = str(tmp_path / "two" / "t.md"), tmp_path / "one", tmp_path / "two"
    indexed = _entry(tmp_path / "t.md")
    outside = _entry(tmp_path / "t.md", status=FileState.SKIPPED,
                     error={"code": "skipped", "message": f"symbolic link to {target}, outside the roots"})  # fmt: skip
    other_skip = _entry(
        tmp_path / "t.md", status=FileState.SKIPPED, error={"code": "skipped", "message": "file too large"}
    )
    assert rejudge_link(indexed, target, (one,)) and not rejudge_link(indexed, target, (one, two))
    assert rejudge_link(outside, target, (one, two)) and not rejudge_link(outside, target, (one,))
    assert not rejudge_link(other_skip, target, (one, two))
    assert not rejudge_link(None, target, (one,)) and not rejudge_link(indexed, target, ())


def test_md5_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    outcome: list[BaseException | str] = []

    def hash_it() -> None:
        try:
            outcome.append(md5_file(fifo))
        except BaseException as err:  # handed to the test thread
            outcome.append(err)

    t = threading.Thread(target=hash_it, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # blocked in open(): release it, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
        raise AssertionError("md5_file blocked opening a FIFO")
    assert isinstance(outcome[0], FileSkipped) and outcome[0].message == "not a regular file (FIFO)"


def test_an_unreadable_file_is_changed_not_an_error(tmp_path: Path) -> None:
    """A file whose content cannot be hashed (here: replaced by a FIFO) is CHANGED; its file job says why."""
    f = tmp_path / "a.md"
    f.write_text("hello")
    e = _entry(f)
    f.unlink()
    os.mkfifo(f)
    assert classify(e, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.CHANGED


LEAD = sidecar.StoredLead("A title\nits first words", "h", "AAAAAA==")


def test_an_entry_without_a_lead_gets_one_and_nothing_else(tmp_path: Path) -> None:
    """An EMBEDDED entry of an earlier ragd (no `lead`) is LEAD: its lead made from its chunks, nothing parsed.
    Not an entry of another tool (no parser), nor one with no chunks, nor one whose file changed (CHANGED: the
    whole file is redone), nor one that has a lead, even an empty one (a document with no title nor prose). A
    file touched since is LEAD too (its job records the new stat, as a touch's would)."""
    old = time.time() - 100
    f = tmp_path / "a.md"
    f.write_text("text")
    os.utime(f, (old, old))
    chunk = sidecar.StoredChunk("text", "h", 0, "AAAAAA==")

    def verdict(**kw: object) -> Change:
        kw.setdefault("chunks", (chunk,))
        return classify(_entry(f, **kw), f, f.stat(), IDENT, lambda: "p", time.time())

    assert verdict(parser="text") == Change.LEAD
    assert verdict(parser="text", lead=LEAD) == Change.UNCHANGED
    assert verdict(parser="text", lead=sidecar.StoredLead("", "h", "")) == Change.UNCHANGED
    assert verdict(parser=None) == Change.UNCHANGED
    assert verdict(parser="text", chunks=()) == Change.UNCHANGED
    assert verdict(parser="text", md5="0" * 32, recorded=old - 10) == Change.CHANGED
    assert verdict(parser="text", recorded=old - 10) == Change.LEAD  # a touch too: the lead's job records it
    assert verdict(parser="text", lead=LEAD, recorded=old - 10) == Change.TOUCHED
    digest = Digest.of(_entry(f, chunks=(chunk,), parser="text"), "a.md")
    assert not digest.has_lead and Digest.from_json(digest.to_json()) == digest
    assert classify(digest, f, f.stat(), IDENT, lambda: "p", time.time()) == Change.LEAD
    with_lead = Digest.of(_entry(f, chunks=(chunk,), parser="text", lead=LEAD), "a.md")
    assert with_lead.has_lead and Digest.from_json(with_lead.to_json()) == with_lead


def test_entries_of_older_split_rules_are_split_again_only_where_they_differ(tmp_path: Path) -> None:
    """Entries ragd wrote before split revision 2: RST/Org/HTML files and unclean heading paths are redone
    (RETRY: parsed and split again, vectors reused by content); the rest, and other tools' entries, stay."""
    from ragd.pipeline.structure import SPLIT_REVISION

    old = time.time() - 100

    def verdict(name: str, heading: list[str] | None = None, **kw: object) -> Change:
        f = tmp_path / name
        f.write_text("text")
        os.utime(f, (old, old))
        chunk = sidecar.StoredChunk("text", "h", 0, "AAAAAA==", {"heading_path": heading} if heading else {})
        e = _entry(f, chunks=(chunk,), lead=LEAD, **kw)
        return classify(e, f, f.stat(), IDENT, lambda: "p", time.time())

    assert verdict("a.rst", parser="text") == Change.RETRY
    assert verdict("a.org", parser="text") == Change.RETRY
    assert verdict("a.html", ["Install"], parser="markitdown") == Change.RETRY
    assert (
        verdict("a.md", ['Install[¶](#install "Permalink to this heading")'], parser="text") == Change.RETRY
    )
    assert verdict("b.md", ["Install", "**Linux**"], parser="text") == Change.RETRY
    assert verdict("c.md", ["Install", "Linux"], parser="text") == Change.UNCHANGED
    assert verdict("a.pdf", parser="pdfium+ocr") == Change.UNCHANGED
    assert verdict("b.rst", parser=None) == Change.UNCHANGED  # written by the ragjson tool: left alone
    assert verdict("c.rst", parser="text", split_revision=SPLIT_REVISION) == Change.UNCHANGED
    assert verdict("d.md", ["**x**"], parser="text", split_revision=SPLIT_REVISION) == Change.UNCHANGED


def test_entries_of_split_revision_3_are_split_again_where_a_chunk_is_markup_alone(tmp_path: Path) -> None:
    """Revision 4 makes no chunk without a letter, a digit or an ideograph, and drops a bracketed link from a
    heading path: entries holding either are split again (not those OCR read); what revision 3 already did
    (metadata, front matter) is not done again."""
    old = time.time() - 100

    def verdict(name: str, *texts: str, heading: tuple[str, ...] = (), **kw: object) -> Change:
        f = tmp_path / name
        f.write_text("\n\n".join(texts))
        os.utime(f, (old, old))
        meta = {"heading_path": list(heading)} if heading else {}
        chunks = tuple(sidecar.StoredChunk(t, f"h{i}", 0, "AAAAAA==", meta) for i, t in enumerate(texts))
        e = _entry(f, chunks=chunks, split_revision=3, lead=LEAD, **kw)
        return classify(e, f, f.stat(), IDENT, lambda: "p", time.time())

    assert verdict("a.html", "# Files", "|  |  |\n| --- | --- |", "text", parser="html") == Change.RETRY
    assert verdict("b.md", "text", "---", parser="text") == Change.RETRY
    assert verdict("c.md", "|  |\n| --- |", "表格", parser="text") == Change.RETRY
    assert verdict("d.md", "# D", "| a |\n| --- |", "文字 🍄", parser="text") == Change.UNCHANGED
    assert verdict("e.md", "---\ntags: [x]\n---\n# E", parser="text") == Change.UNCHANGED  # done in 3
    assert verdict("f.pdf", "text", parser="pdfium") == Change.RETRY  # revision 5: cut at page breaks
    assert verdict("g.pdf", "text", "· · ·", parser="pdfium+ocr") == Change.UNCHANGED  # OCR again: minutes
    assert verdict("h.md", "text", "---", parser=None) == Change.UNCHANGED  # the ragjson tool's
    src = "Stream[[src]](https://github.com/nodejs/node/blob/3626fea/lib/stream.js#L55)"
    assert verdict("i.html", "text", heading=("Node.js", src), parser="html") == Change.RETRY
    assert verdict("j.html", "text", heading=("Node.js", "Stream"), parser="html") == Change.UNCHANGED


def test_pdf_entries_of_split_revision_4_are_split_again_at_page_breaks(tmp_path: Path) -> None:
    """Revision 5 ends chunks at page breaks: PDF entries are split again (not those OCR read), nothing else."""
    from ragd.pipeline.structure import SPLIT_REVISION

    old = time.time() - 100

    def verdict(name: str, **kw: object) -> Change:
        f = tmp_path / name
        f.write_text("text")
        os.utime(f, (old, old))
        chunk = sidecar.StoredChunk("text", "h", 0, "AAAAAA==", {"page": 1})
        return classify(
            _entry(f, chunks=(chunk,), lead=LEAD, **kw), f, f.stat(), IDENT, lambda: "p", time.time()
        )

    assert SPLIT_REVISION == 5
    assert verdict("a.pdf", parser="pdfium", split_revision=4) == Change.RETRY
    assert verdict("b.PDF", parser="pdfium", split_revision=4) == Change.RETRY
    assert verdict("c.pdf", parser="pdfium+ocr", split_revision=4) == Change.UNCHANGED  # OCR again: minutes
    assert verdict("d.md", parser="text", split_revision=4) == Change.UNCHANGED
    assert verdict("e.pdf", parser="pdfium", split_revision=5) == Change.UNCHANGED
    assert verdict("f.pdf", parser=None, split_revision=4) == Change.UNCHANGED  # the ragjson tool's


def test_entries_of_split_revision_2_are_read_again_where_they_have_metadata(tmp_path: Path) -> None:
    """Revision 3 adds document metadata: Markdown files that open with front matter, and PDF and Office files
    (not those OCR read), are parsed again; other entries of revision 2, and other tools' entries, stay."""
    old = time.time() - 100

    def verdict(name: str, first: str = "text", **kw: object) -> Change:
        f = tmp_path / name
        f.write_text(first)
        os.utime(f, (old, old))
        chunk = sidecar.StoredChunk(first, "h", 0, "AAAAAA==", {})
        e = _entry(f, chunks=(chunk,), split_revision=2, lead=LEAD, **kw)
        return classify(e, f, f.stat(), IDENT, lambda: "p", time.time())

    assert verdict("a.md", "---\ntags: [x]\n---\n# A", parser="text") == Change.RETRY
    assert verdict("b.md", "+++\ntitle = 'B'\n+++", parser="text") == Change.RETRY
    assert verdict("c.md", "# C\n\ntext", parser="text") == Change.UNCHANGED
    assert verdict("d.pdf", parser="pdfium") == Change.RETRY
    assert verdict("e.docx", parser="markitdown") == Change.RETRY
    assert verdict("f.pdf", parser="pdfium+ocr") == Change.UNCHANGED  # OCR again would cost minutes
    assert verdict("g.rst", parser="text") == Change.UNCHANGED  # revision 2's own rules already applied
    assert verdict("h.md", "---\na: b\n---", parser=None) == Change.UNCHANGED  # the ragjson tool's


def test_a_listing_keeps_what_is_read_of_each_stat_in_half_its_memory(tmp_path: Path) -> None:
    """A directory job holds its folder's listing until it ends and a verification pass while it compares the folder:
    an `os.stat_result` a file put ~60 MiB on the agent for a folder of 100,000 notes (issue 36). The listing keeps the
    fields ragd reads, equal to the stat's, with the values its files share (device, mode, owner) kept once."""
    for i in range(400):
        (tmp_path / f"note{i:06d}.md").write_text("x" * (300 + i))
    listing, held = held_by(scan.__file__, lambda: list_dir(tmp_path, Ignore(IgnoreConfig())), frames=8)
    per_file = held / len(listing.files)
    assert len(listing.files) == 400
    assert per_file < 450, f"{per_file:.0f} bytes a file"  # 733 with os.stat_result, ~370 now (names, dict)
    for name, kept in listing.files.items():
        st = os.stat(tmp_path / name)
        assert kept._asdict() == {f: getattr(st, f) for f in FileStat._fields}
    first, second = listing.files["note000000.md"], listing.files["note000001.md"]
    assert first.st_dev is second.st_dev and first.st_mode is second.st_mode
