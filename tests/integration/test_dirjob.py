"""The directory job end to end, in process: real parse/split, real HTTP embeddings server on 127.0.0.1."""

from __future__ import annotations

import os
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from ragd.config import Config, LimitsConfig, RunConfig
from ragd.pipeline import mushroom, sidecar
from ragd.pipeline.mushroom import Event
from ragd.pipeline.sidecar import files as sidecar_files
from ragd.pipeline.sidecar.recent import Recent
from ragd.resident.once import RunSummary
from ragd.vocabulary import FileState, NoteStatus
from tests.integration import helpers
from tests.integration.helpers import all_events, api_config, clear_mushrooms, copy_fixture, entry
from tests.support.fake_openai import FakeOpenAI
from tests.support.opens import OpenWatch
from tests.support.poll import poll


def run(config: Config, **kw: object) -> RunSummary:
    """A run that leaves its mushrooms in place (no index sync), so the events can be inspected."""
    return helpers.run(config, index=False, **kw)


PARA = "Paragraph {n}: the agent keeps folders searchable. 第{n}段：代理让文件夹随时可以搜索。\n\n"


def test_ragjson_tool_tree_is_taken_as_it_is(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    tree = copy_fixture(tmp_path)
    before = {p: p.read_text() for p in tree.rglob("*.mushroom")}
    summary = run(api_config(fake_openai_server, [tree]))
    assert summary.ok and summary.embedded == 0 and summary.texts_embedded == 0
    assert fake_openai_server.requests == []  # nothing re-chunked or re-embedded
    phone = entry(tree / "docs", "phone.md")
    assert (
        phone.status == FileState.EMBEDDED and phone.model_name == "fake-embed-8" and len(phone.chunks) == 1
    )
    # the tool's pending mushrooms are understood and left for the index consumer (see test_index_sync)
    assert {p: p.read_text() for p in tree.rglob("*.mushroom")} == before
    assert Event("gone", "dir_delete") in all_events(tree / "docs")


def test_new_edit_delete_recover_and_events(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\n" + "".join(PARA.format(n=i) for i in range(30)))
    (root / "sub" / "b.txt").write_text("小米 15 Pro 的电池容量是 6100mAh。")
    cfg = api_config(fake_openai_server, [root])
    s1 = run(cfg)
    assert s1.ok and s1.embedded == 2 and s1.texts_embedded == s1.chunks > 2
    assert sidecar.read_entry(sidecar.entry_path(root, "sub")) is None
    assert {e.file for e in all_events(root)} == {"a.md"}
    clear_mushrooms(root)

    # edit one paragraph: only the changed chunks go to the embedder
    n_chunks = len(entry(root, "a.md").chunks)
    text = (root / "a.md").read_text().replace("Paragraph 15:", "Paragraph fifteen (edited):")
    (root / "a.md").write_text(text)
    sent = len(fake_openai_server.texts)
    s2 = run(cfg)
    assert s2.embedded == 1 and 0 < s2.texts_embedded < n_chunks
    assert len(fake_openai_server.texts) - sent == s2.texts_embedded
    assert s2.vectors_reused == len(entry(root, "a.md").chunks) - s2.texts_embedded
    assert all_events(root) == [Event("a.md", "upsert")]
    clear_mushrooms(root)

    # unchanged: nothing to do, no mushroom
    s3 = run(cfg)
    assert s3.embedded == 0 and s3.unchanged == 2 and s3.mushrooms == 0

    # delete a file and a directory
    (root / "a.md").rename(tmp_path / "a.md.away")
    (root / "sub").rename(tmp_path / "sub.away")
    run(cfg)
    assert all_events(root) == [Event("a.md", "delete"), Event("sub", "dir_delete")] or sorted(
        all_events(root), key=lambda e: e.file
    ) == [Event("a.md", "delete"), Event("sub", "dir_delete")]
    assert sidecar.entry_path(root, "a.md", deleted=True).exists()
    assert sidecar.entry_path(root, "sub", deleted=True).exists()
    clear_mushrooms(root)

    # both come back: entries renamed back, vectors reused, recover events
    (tmp_path / "a.md.away").rename(root / "a.md")
    (tmp_path / "sub.away").rename(root / "sub")
    sent = len(fake_openai_server.texts)
    run(cfg)
    assert len(fake_openai_server.texts) == sent  # nothing re-embedded
    assert sorted(all_events(root), key=lambda e: e.file) == [
        Event("a.md", "upsert"),
        Event("sub", "dir_recover"),
    ]
    assert entry(root, "a.md").status == FileState.EMBEDDED
    assert not sidecar.entry_path(root, "a.md", deleted=True).exists()


def test_an_edit_in_a_folder_reads_again_only_the_entries_its_file_may_reuse(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vectors an edited file may reuse are taken from its own entry (and those of files gone or deleted), not
    from every entry of its folder: an edit in a folder of 30,000 notes read them all once more and held all their
    vectors, the agent at 452 MiB for one file (issue 36). Its own unchanged chunks are still reused."""
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(20):
        (root / f"n{i:02d}.md").write_text(f"# Note {i}\n\n" + "".join(PARA.format(n=j) for j in range(30)))
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).ok
    (root / "n00.md").write_text((root / "n00.md").read_text().replace("Paragraph 15:", "Paragraph fifteen:"))
    monkeypatch.setattr(sidecar_files, "RECENT", Recent())  # written long ago: none kept as written
    with OpenWatch(root / sidecar.RAG_DIR) as seen:
        s = run(cfg)
        reads = [name for name in seen.names() if name.endswith(sidecar.ENTRY_SUFFIX)]
    assert s.embedded == 1 and s.vectors_reused > 0 and s.texts_embedded < len(entry(root, "n00.md").chunks)
    assert max(reads.count(f"n{i:02d}.md{sidecar.ENTRY_SUFFIX}") for i in range(1, 20)) == 1, sorted(reads)


def test_rename_within_directory_reuses_vectors(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "old name.md").write_text("".join(PARA.format(n=i) for i in range(10)))
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    sent = len(fake_openai_server.texts)
    (root / "old name.md").rename(root / "new name.md")
    s = run(cfg)
    assert s.embedded == 1 and s.texts_embedded == 0 and s.vectors_reused > 0
    assert len(fake_openai_server.texts) == sent


ODD_NAMES = [
    "quote \"double\" 'single'.md",
    "50% off_sale.md",
    "under_score.md",
    "with space.txt",
    "new\nline.md",
    "emoji 🍄.md",
    "中文文件名.md",
    "back\\slash.md",
]


def test_odd_file_names(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "odd 50%_dir"
    root.mkdir()
    for i, name in enumerate(ODD_NAMES):
        (root / name).write_text(f"# Title {i}\n\nBody text number {i}. 正文 {i}。")
    s = run(api_config(fake_openai_server, [root]))
    assert s.ok and s.embedded == len(ODD_NAMES)
    for name in ODD_NAMES:
        assert entry(root, name).source.file_name == name
    assert {e.file for e in all_events(root)} == set(ODD_NAMES)


def test_bad_inputs_end_skipped_or_failed_and_never_stop_the_rest(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    from tests.support import docgen

    root = tmp_path / "bad"
    root.mkdir()
    (root / "empty.md").write_bytes(b"")
    (root / "junk.txt").write_bytes(os.urandom(3000))
    (root / "corrupt.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(2000))
    (root / "corrupt.docx").write_bytes(os.urandom(3000))
    (root / "video.mp4").write_bytes(os.urandom(100))
    (root / "huge.md").write_text("x" * 5000)
    docgen.make_pdf(root / "secret.pdf", ["top secret"], user_password="pw")
    docgen.make_pdf(root / "paged.pdf", ["first page text", "second page text"], title="Paged")
    (root / "good.md").write_text("# Good\n\nThis one is fine.")
    (root / "gbk.txt").write_bytes(
        "中文编码测试：这是一段用 GBK 编码保存的文字，应当被正确解码。".encode("gbk") * 3
    )
    cfg = api_config(fake_openai_server, [root]).model_copy(
        update={
            "limits": api_config(fake_openai_server, [root]).limits.model_copy(update={"max_file_size": 4000})
        }
    )
    s = run(cfg)
    states = {
        n: entry(root, n)
        for n in (
            "empty.md",
            "junk.txt",
            "corrupt.pdf",
            "corrupt.docx",
            "video.mp4",
            "huge.md",
            "secret.pdf",
            "good.md",
            "gbk.txt",
            "paged.pdf",
        )
    }
    assert states["good.md"].status == FileState.EMBEDDED
    assert [c.meta["page"] for c in states["paged.pdf"].chunks] == [1, 2] or states["paged.pdf"].chunks[
        0
    ].meta["page"] == 1
    assert states["gbk.txt"].status == FileState.EMBEDDED and "GBK" in states["gbk.txt"].chunks[0].content
    for name in ("empty.md", "video.mp4", "huge.md"):
        assert states[name].status == FileState.SKIPPED, name
    for name in ("junk.txt", "corrupt.pdf", "corrupt.docx", "secret.pdf"):
        assert states[name].status == FileState.FAILED, name
        assert states[name].chunks == ()  # never garbage chunks
    assert "encrypted" in states["secret.pdf"].error["message"]  # type: ignore[index]
    assert "too large" in states["huge.md"].error["message"]  # type: ignore[index]
    assert "unsupported file type '.mp4'" in states["video.mp4"].error["message"]  # type: ignore[index]
    assert states["video.mp4"].source.md5_hash == ""  # never read
    assert not s.ok and {p.name for p, _ in s.failed} == {
        "junk.txt",
        "corrupt.pdf",
        "corrupt.docx",
        "secret.pdf",
    }
    # parse failures are not retried until the file changes; skipped files stay skipped
    again = run(cfg)
    assert again.embedded == 0 and not again.failed and again.unchanged == 10


@pytest.mark.parametrize("status", [429, 500])
def test_api_errors_retried_then_succeed(tmp_path: Path, fake_openai_server: FakeOpenAI, status: int) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("hello world")
    fake_openai_server.fail_next(2, status=status, retry_after=0.1)
    s = run(api_config(fake_openai_server, [root], retries=3))
    assert s.ok and entry(root, "a.md").status == FileState.EMBEDDED
    assert [r.status for r in fake_openai_server.requests] == [status, status, 200]


def test_dead_api_marks_files_failed_with_retry_time_then_recovers(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("alpha text")
    (root / "b.md").write_text("beta text")
    with FakeOpenAI(dim=8) as server:
        port = server.port
    cfg = api_config(server, [root], retries=1, timeout=1)  # the server is gone: connection refused
    s = run(cfg)
    assert {p.name for p, _ in s.failed} == {"a.md", "b.md"}
    err = entry(root, "a.md").error
    assert (
        err is not None
        and err["code"] == "embed"
        and err["retry_at"]
        and f"127.0.0.1:{port}" in err["message"]
    )
    assert "sk-test-key" not in str(err)
    # not retried before its time ...
    assert run(cfg).failed == []
    # ... and retried once due, against a live server
    with FakeOpenAI(dim=8) as live:
        for name in ("a.md", "b.md"):
            e = entry(root, name)
            sidecar.write_entry(
                root, e.with_status(FileState.FAILED, error={**e.error, "retry_at": "2000-01-01T00:00:00Z"})
            )
        s2 = run(api_config(live, [root]))
    assert s2.ok and s2.embedded == 2


def test_wrong_dimension_is_a_clear_failure(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("alpha")
    fake_openai_server.wrong_dim = 4
    s = run(api_config(fake_openai_server, [root]))
    assert not s.ok
    assert "4-d" in entry(root, "a.md").error["message"]  # type: ignore[index]


def test_identity_change_reembeds(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("alpha beta gamma")
    with FakeOpenAI(dim=8) as s8:
        run(api_config(s8, [root]))
    with FakeOpenAI(dim=16) as s16:
        s = run(api_config(s16, [root], model="fake-embed-16"))
        assert s.embedded == 1 and len(s16.texts) == 2  # its chunk and its lead
    e = entry(root, "a.md")
    assert e.model_name == "fake-embed-16" and e.dimension == 16


def test_mushroom_pending_events_cover_a_failed_job(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("alpha")
    run(api_config(fake_openai_server, [root]))
    names = [p.name for p in mushroom.pending(root)]
    assert len(names) == 1 and names[0].endswith(".mushroom") and f"-{os.getpid()}-" in names[0]


def test_symlinks_out_of_the_roots_are_not_indexed(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root, outside = tmp_path / "kb", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# secret\n\nnot for the index\n")
    (root / "inside.md").write_text("# inside\n\nfine\n")
    os.symlink(outside / "secret.md", root / "leak.md")
    os.symlink(root / "inside.md", root / "alias.md")  # a link within the root is followed
    summary = helpers.run(api_config(fake_openai_server, [root]))
    assert summary.ok
    leak = entry(root, "leak.md")
    assert leak.status == FileState.SKIPPED and "outside the roots" in str(leak.error)
    assert entry(root, "alias.md").status == FileState.EMBEDDED
    assert "not for the index" not in str(sidecar.entry_path(root, "leak.md").read_text())


def test_a_link_to_a_file_whose_name_is_not_utf8_is_skipped_with_the_name_shown(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The reason names the target as `\\xNN` (a sidecar is UTF-8 JSON): it was an internal error, the file FAILED."""
    root, outside = tmp_path / "kb", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    target = os.fsencode(outside) + b"/caf\xe9 latin1.md"
    with open(target, "w") as fh:
        fh.write("# latin\n\ntext\n")
    os.symlink(target, os.fsencode(root / "b.txt"))
    summary = helpers.run(api_config(fake_openai_server, [root]))
    assert summary.ok, summary.failed
    link = entry(root, "b.txt")
    assert link.status == FileState.SKIPPED and "outside the roots" in str(link.error)
    assert link.error is not None and "caf\\xe9 latin1.md" in link.error["message"]


def test_a_folder_renamed_with_its_sidecars_is_announced_for_a_resync(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Its `.rag/` moves with it and its entries still match, so its own job announces nothing: the parent's job
    does (`dir_recover`), and the index re-syncs the subtree under the new path. A first run announces no such
    event for a new folder, even when the folder's own job starts first."""
    root = tmp_path / "kb"
    (root / "lambda" / "deep").mkdir(parents=True)
    (root / "lambda" / "l1.md").write_text("lima one\n")
    (root / "lambda" / "deep" / "l2.md").write_text("lima two\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    assert not any(e.status == NoteStatus.DIR_RECOVER for e in all_events(root))
    clear_mushrooms(root)
    (root / "lambda").rename(root / "aws-lambda")
    s = run(cfg)
    assert s.embedded == 0 and s.texts_embedded == 0  # nothing re-embedded
    assert sorted(all_events(root), key=lambda e: e.file) == [
        Event("aws-lambda", NoteStatus.DIR_RECOVER),
        Event("lambda", NoteStatus.DIR_DELETE),
    ]
    assert sidecar.read_entry(sidecar.entry_path(root, "aws-lambda")) is None  # a directory entry now


def test_a_folder_renamed_is_recovered_under_its_new_name_before_its_old_name_is_deleted(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """In the parent's note, the new name's `dir_recover` comes before the old name's `dir_delete`: the index
    writer applies them in that order, so the folder's files are found under one name or both while it re-syncs,
    never under neither (a 10,000-note folder renamed was out of search for ~5 s: bench_bigfolder --rename)."""
    root = tmp_path / "kb"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "n1.md").write_text("november one\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    clear_mushrooms(root)
    (root / "notes").rename(root / "notes renamed")
    run(cfg)
    assert all_events(root) == [
        Event("notes renamed", NoteStatus.DIR_RECOVER),
        Event("notes", NoteStatus.DIR_DELETE),
    ]


def test_a_subdirectory_whose_store_is_a_file_fails_alone(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A `.rag` that is a regular file fails its own directory's job, with the reason; its parent is indexed and
    the index sync goes through (both raised NotADirectoryError while looking into that `.rag`)."""
    root = tmp_path / "kb"
    (root / "blocked").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nAlpha is indexed.\n")
    (root / "blocked" / "b.md").write_text("# B\n\nBeta waits for its store.\n")
    (root / "blocked" / ".rag").write_text("not a store")
    s = helpers.run(api_config(fake_openai_server, [root]))
    assert not s.ok and s.embedded == 1 and s.failed == []
    assert [(p, "Not a directory" in r) for p, r in s.failed_dirs] == [(root / "blocked", True)]
    assert f"{root / 'blocked' / '.rag'} is a file" in s.failed_dirs[0][1]
    assert s.index["chunks"] == 1 and s.index["mushrooms_failed"] == []


def test_a_file_reached_after_the_embedder_closed_stays_chunked(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The agent stops while a job still prepares files: one that reaches the embedder after it closed is left
    CHUNKED (redone at the next start), like one whose texts were waiting; it was FAILED as an internal error."""
    from ragd.pipeline.dirjob import run_directory

    root = tmp_path / "kb"
    root.mkdir()
    (root / "late.md").write_text("prepared after the stop began\n")
    ctx, queue = helpers.context(api_config(fake_openai_server, [root]))
    queue.close()
    result = run_directory(ctx, root)
    (late,) = result.files
    assert late.state == FileState.ABANDONED and "shut down" in late.reason, late
    assert entry(root, "late.md").status == FileState.CHUNKED


def test_a_file_is_written_once_its_vectors_are_back_and_chunked_if_the_embedder_closes_before(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """While a file's texts wait for the embedder nothing is written for it (its old entry, or none, stands: each
    file's CHUNKED entry, written before its texts went out, was a fifth of a big folder's agent CPU); the agent
    stopping meanwhile leaves it CHUNKED, its chunks kept without vectors, redone at the next start."""
    import threading

    from ragd.pipeline.dirjob import run_directory

    root = tmp_path / "kb"
    root.mkdir()
    (root / "waits.md").write_text("# Waiting\n\nthe first file's words\n")
    (root / "done.md").write_text("# Done\n\nthe second file's words\n")
    cfg = api_config(fake_openai_server, [root])
    ctx, queue = helpers.context(cfg)
    fake_openai_server.hold_next(2)  # the two files' texts: one request, or one each

    def both_sent() -> bool:
        texts = fake_openai_server.texts
        return all(any(f"{n} file's words" in t for t in texts) for n in ("first", "second"))

    results = []
    job = threading.Thread(target=lambda: results.append(run_directory(ctx, root)))
    job.start()
    try:
        poll(both_sent, timeout=30, what="the job's requests")
        assert (
            not sidecar.entry_path(root, "waits.md").exists()
            and not sidecar.entry_path(root, "done.md").exists()
        )
        queue.close()  # the agent stops while the request is held
    finally:
        fake_openai_server.release()
        job.join(timeout=60)
    (result,) = results
    states = {f.name: f.state for f in result.files}
    assert set(states.values()) == {FileState.ABANDONED}, result.files
    for name in ("waits.md", "done.md"):
        left = entry(root, name)
        assert left.status == FileState.CHUNKED and left.chunks and left.error is None
        assert all(c.vector_base64 is None for c in left.chunks)
    ctx, queue = helpers.context(cfg)  # the next start
    try:
        again = run_directory(ctx, root)
    finally:
        queue.close()
    assert {f.name: f.state for f in again.files} == dict.fromkeys(states, FileState.EMBEDDED)
    assert entry(root, "waits.md").status == FileState.EMBEDDED


def test_a_file_past_the_parse_deadline_fails_alone_and_is_retried_later(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The parse workers (two processes) stop a file that takes longer than limits.parse_timeout; the rest of its
    directory is indexed, and the file is FAILED with the reason and a retry time."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "big.txt").write_text(
        "the quick brown fox jumps over the lazy dog\n" * 1_200_000
    )  # seconds to split
    (root / "good.md").write_text("# Good\n\n" + PARA.format(n=1))
    (root / "also.md").write_text("# Also\n\n" + PARA.format(n=2))
    cfg = api_config(fake_openai_server, [root])
    limits = LimitsConfig(parse_timeout=0.3, max_text_chars=100_000_000)
    cfg = cfg.model_copy(update={"limits": limits, "run": RunConfig(workers=2)})
    summary = run(cfg)
    assert summary.embedded == 2 and [p.name for p, _ in summary.failed] == ["big.txt"]
    big = entry(root, "big.txt")
    assert big.status == FileState.FAILED and big.error is not None
    assert big.error["code"] == "timeout" and big.error["message"].startswith("timed out after 0.3 s")
    assert big.error["retry_at"] and big.error["attempts"] == 1
    assert (
        entry(root, "good.md").status == FileState.EMBEDDED
        and entry(root, "also.md").status == FileState.EMBEDDED
    )


def test_a_passing_failure_is_tried_again_after_run_retry_after_doubled_at_each_failure(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A file the embeddings API failed is FAILED with a retry time `run.retry_after` seconds on (60 s by default),
    twice that after its second failure; a failure that no waiting mends (an empty file's) has none."""
    from ragd.pipeline.sidecar import parse_stamp

    root = tmp_path / "kb"
    root.mkdir()
    (root / "note.md").write_text("# Note\n\n" + PARA.format(n=1))
    cfg = api_config(fake_openai_server, [root])
    cfg = cfg.model_copy(update={"run": RunConfig(retry_after=7)})
    fake_openai_server.fail_next(100, status=400)

    def waited() -> float:
        error = entry(root, "note.md").error or {}
        return (parse_stamp(error["retry_at"]) or 0) - (parse_stamp(error["at"]) or 0)

    assert [p.name for p, _ in run(cfg).failed] == ["note.md"]
    assert 6 <= waited() <= 8
    assert [p.name for p, _ in run(cfg, force=True).failed] == ["note.md"]
    assert 13 <= waited() <= 15 and (entry(root, "note.md").error or {})["attempts"] == 2


def test_files_of_a_root_removed_while_their_job_runs_are_left_alone(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """`roots remove` while a job of the root waits for the embedder, which then fails: the files were written
    FAILED with a backoff, so adding the root again left them FAILED (and unsearchable) for up to the backoff. Now
    whatever the job has not recorded yet is left as it was: every file keeps its old entry (or none), which it no
    longer matches, so all are done again when the root comes back; the file whose texts went out too."""
    import threading
    from dataclasses import replace

    from ragd.pipeline.dirjob import run_directory
    from ragd.pipeline.outcome import ROOT_REMOVED

    root = tmp_path / "kb"
    root.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (root / name).write_text(f"{name} before\n")
    cfg = api_config(fake_openai_server, [root], retries=0)
    assert run(cfg).embedded == 3
    for name in ("a.md", "b.md", "c.md"):
        (root / name).write_text(f"{name} after, with other words\n")
    before = {n: entry(root, n) for n in ("a.md", "b.md", "c.md")}
    fake_openai_server.fail_next(100, status=503, message="upstream overloaded")
    ctx, queue = helpers.context(cfg)
    removed = threading.Event()

    def submit(texts: object) -> object:  # the root is removed as soon as the first texts went out
        fut = queue.submit(texts)  # type: ignore[arg-type]
        removed.set()
        return fut

    try:
        result = run_directory(replace(ctx, submit=submit, dropped=removed.is_set), root)  # type: ignore[arg-type]
    finally:
        queue.close()
    assert sorted((f.name, f.state, f.reason) for f in result.files) == [
        (n, FileState.ABANDONED, ROOT_REMOVED) for n in ("a.md", "b.md", "c.md")
    ]
    assert fake_openai_server.requests[-1].status == 503  # the embedder did fail
    assert any("after, with other words" in t for t in fake_openai_server.texts)  # a file's texts went out
    assert {n: entry(root, n) for n in before} == before  # nothing recorded: not FAILED, not CHUNKED
    # the root comes back, and the API: every file is done at once, none waits for a retry time
    fake_openai_server.reset()
    s = run(cfg)
    assert s.ok and s.embedded == 3 and all(entry(root, n).status == FileState.EMBEDDED for n in before)


def test_a_folder_deleted_while_its_job_waits_for_vectors_is_no_error(
    tmp_path: Path, fake_openai_server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """`rm -r` of a folder while its job waits for the embedder: the entries cannot be written any more, and the
    folder's parent job records the deletion. Found by the model-based test: each file was logged as an ERROR,
    "cannot write …: No such file or directory (check free space and write permission on the directory)"."""
    import logging
    import shutil
    from dataclasses import replace

    from ragd.pipeline.dirjob import run_directory

    folder = tmp_path / "kb" / "gone"
    folder.mkdir(parents=True)
    for name in ("a.md", "b.md"):
        (folder / name).write_text(f"{name}: words to embed\n")
    cfg = api_config(fake_openai_server, [tmp_path / "kb"], retries=0)
    ctx, queue = helpers.context(cfg)

    sent: list[Future[Any]] = []

    def submit(texts: object) -> object:  # the folder goes as soon as the first texts went out
        fut = queue.submit(texts)  # type: ignore[arg-type]
        sent.append(fut)
        shutil.rmtree(folder)
        return fut

    try:
        with caplog.at_level(logging.WARNING):
            result = run_directory(replace(ctx, submit=submit), folder)  # type: ignore[arg-type]
            # the job does not wait for a vanished file's vectors; the test does, so that closing the queue does
            # not cut a request off (the agent stopping, which says so: another matter)
            for fut in sent:
                fut.exception(timeout=10)
    finally:
        queue.close()
    assert not folder.exists()
    assert [(f.state, f.reason) for f in result.files] == [
        (FileState.UNCHANGED, "vanished during the job")
    ] * 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_file_type_newly_supported_is_read_where_an_earlier_version_skipped_it(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """An .odt that ragd before OpenDocument support skipped ("unsupported file type") is read at the next run:
    the SKIPPED verdict's policy names the file types read (`formats=`), so it is no longer the policy of today."""
    import json

    from tests.support import docgen

    root = tmp_path / "kb"
    root.mkdir()
    docgen.make_odt(
        root / "minutes.odt", heading="Minutes", paragraphs=["The budget review moved to Thursday."]
    )
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).embedded == 1
    today = helpers.context(cfg)[0].policy("minutes.odt")
    assert "formats=" in today

    def skipped_under(policy: str) -> None:  # the entry as that version wrote it, the file as it is
        where = sidecar.entry_path(root, "minutes.odt")
        data = json.loads(where.read_bytes())
        data["processing"]["status"] = FileState.SKIPPED
        data.update(chunks=[], error={"code": "skipped", "message": "unsupported file type '.odt'",
                                      "hint": "supported: …", "policy": policy})  # fmt: skip
        for key in ("lead", "parser", "metadata", "split_revision"):
            data.pop(key, None)
        data["source"]["md5_hash"] = ""
        where.write_bytes(json.dumps(data).encode())

    skipped_under(today)  # the same policy: it stays as it is (nothing read)
    assert run(cfg).unchanged == 1 and entry(root, "minutes.odt").status == FileState.SKIPPED
    skipped_under(today.split("; formats=")[0])  # the earlier version's
    again = run(cfg)
    assert again.embedded == 1 and entry(root, "minutes.odt").status == FileState.EMBEDDED
    assert "budget review" in entry(root, "minutes.odt").chunks[0].content


def test_a_run_of_text_files_never_asks_whether_ocr_loads(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SKIPPED verdict of a file OCR may read (an image, a PDF) records whether OCR loads (its policy), which
    takes a child process (~0.45 CPU-seconds: under load, a tenth of the referee's run); a run of text files waited
    for it before its first job, then asked it for any skipped text file. Only a verdict that depends on it asks."""
    from ragd.pipeline.parse import ocr

    monkeypatch.setattr(ocr, "_IMPORT_ERROR", None)  # not found out yet in this process
    root = tmp_path / "kb"
    root.mkdir()
    (root / "note.md").write_text("# Note\n\nsome words\n", encoding="utf-8")
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).embedded == 1
    assert ocr._IMPORT_ERROR is None, "the run asked whether OCR loads, and nothing needed it"
    (root / "blank.md").write_text("   \n", encoding="utf-8")
    assert run(cfg).skipped == 1
    assert ocr._IMPORT_ERROR is None, "a text file's SKIPPED verdict asked whether OCR loads"
    policy = entry(root, "blank.md").error["policy"]
    assert policy == helpers.context(cfg)[0].policy("blank.md") and "ocr=" not in policy
    assert run(cfg).unchanged == 2  # the verdict stands: the same policy
    (root / "blank.PNG").write_bytes(b"")  # an image's verdict (here: empty) depends on whether OCR loads
    assert run(cfg).skipped == 1
    assert ocr._IMPORT_ERROR is not None
    policy = entry(root, "blank.PNG").error["policy"]
    assert policy == helpers.context(cfg)[0].policy("blank.PNG") and "ocr=" in policy
    assert run(cfg).unchanged == 3
