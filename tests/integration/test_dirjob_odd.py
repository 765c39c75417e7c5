"""Directory jobs over what a folder may hold besides documents: names that are not UTF-8, FIFOs, sockets, broken
symbolic links, and sidecar writes that fail. Each gets its own visible state; the rest of the directory goes on."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ragd.pipeline import mushroom, sidecar
from ragd.pipeline.dirjob import FileOutcome, run_directory
from ragd.pipeline.filejob import FileTask
from ragd.pipeline.rounds import FILES_PER_ROUND
from ragd.pipeline.scan import Change, Ignore, list_dir, walk_dirs
from ragd.resident.tracker import Tracker
from ragd.vocabulary import FileState, NoteStatus
from tests.integration import helpers
from tests.integration.helpers import all_json_valid, api_config, context, entry
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

BAD_FILE = b"caf\xe9.txt"
BAD_DIR = b"d\xff"


def _bad(directory: Path, name: bytes) -> bytes:
    return os.fsencode(directory) + b"/" + name


def _good_tree(root: Path, n: int = 9) -> None:
    root.mkdir()
    for i in range(n):
        (root / f"good{i}.md").write_text(f"# Good {i}\n\nThe good file number {i}.\n")


def _by_name(outcomes: tuple[FileOutcome, ...]) -> dict[str, FileOutcome]:
    return {f.name: f for f in outcomes}


def test_a_name_that_is_not_utf8_is_skipped_and_the_rest_goes_on(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    _good_tree(root)
    fd = os.open(_bad(root, BAD_FILE), os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"hello from a latin-1 name")
    os.close(fd)
    os.mkdir(_bad(root, BAD_DIR))
    (Path(os.fsdecode(_bad(root, BAD_DIR))) / "inside.md").write_text("never tracked")
    ctx, queue = context(api_config(fake_openai_server, [root]))
    try:
        result = run_directory(ctx, root)
        again = run_directory(ctx, root)
    finally:
        queue.close()
    files = _by_name(result.files)
    assert {n for n, f in files.items() if f.state == FileState.EMBEDDED} == {f"good{i}.md" for i in range(9)}
    assert files["caf\\xe9.txt"].state == FileState.SKIPPED
    assert (
        files["caf\\xe9.txt"].reason
        == "file name is not valid UTF-8 (b'caf\\xe9.txt'); rename it to index it"
    )
    assert (
        files["d\\xff"].state == FileState.SKIPPED
        and "directory name is not valid UTF-8 (b'd\\xff')" in files["d\\xff"].reason
    )
    assert result.subdirs == () and result.new_subdirs == ()
    # what reaches `ragctl status` encodes as UTF-8 JSON (the control protocol's encoding)
    tracker = Tracker()
    tracker.record(result)
    json.dumps(tracker.root_summary(root), ensure_ascii=False).encode("utf-8")
    json.dumps([f.__dict__ for f in result.files], ensure_ascii=False).encode("utf-8")
    # nothing was written under such a name: every sidecar and mushroom is UTF-8 JSON
    assert sorted(p.name for p in (root / ".rag").glob("*.ragjson")) == [
        f"good{i}.md.ragjson" for i in range(9)
    ]
    all_json_valid(root)
    assert {ev.file for p in mushroom.pending(root) for ev in mushroom.read(p).events} == {
        f"good{i}.md" for i in range(9)
    }
    # the next job is quiet: nothing to redo, the odd names reported again, no error
    assert {f.name: f.final_state for f in again.files} == {n: f.final_state for n, f in files.items()}
    assert again.events == ()


def test_a_directory_that_is_not_utf8_is_not_tracked(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    _good_tree(root, 1)
    bad_dir = Path(os.fsdecode(_bad(root, BAD_DIR)))
    bad_dir.mkdir()
    (bad_dir / "inside.md").write_text("never tracked")
    assert list(walk_dirs(root, helpers.context(api_config(fake_openai_server, [root]))[0].ignore)) == [root]
    summary = helpers.run(api_config(fake_openai_server, [root]), index=False)
    assert summary.ok and summary.embedded == 1 and summary.skipped == 1 and summary.failed_dirs == []
    ctx, queue = context(api_config(fake_openai_server, [root]))
    try:
        result = run_directory(
            ctx, bad_dir
        )  # e.g. a watch event from inside it: nothing is done, nothing fails
    finally:
        queue.close()
    assert result.files == () and result.events == ()
    assert not (bad_dir / ".rag").exists()


def test_an_entry_of_an_older_version_with_such_a_name_is_removed(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    _good_tree(root, 1)
    (root / ".rag").mkdir()
    with open(
        _bad(root / ".rag", BAD_DIR + b".ragjson"), "wb"
    ) as fh:  # a directory entry an older ragd wrote
        fh.write(b'{"ragjson_version": "2.4"}')
    summary = helpers.run(api_config(fake_openai_server, [root]), index=False)
    assert summary.ok and summary.embedded == 1
    names = os.listdir(os.fsencode(root / ".rag"))
    assert BAD_DIR + b".ragjson" not in names and BAD_DIR + b".ragjson.deleted" not in names
    all_json_valid(root)


def test_fifos_sockets_and_broken_links_are_skipped_with_the_reason(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    _good_tree(root, 2)
    os.mkfifo(root / "pipe.md")
    (root / "null.txt").symlink_to("/dev/null")
    (root / "dangling.md").symlink_to(root / "gone.md")
    (root / "loop.md").symlink_to(root / "loop.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock.md"))
        summary = helpers.run(api_config(fake_openai_server, [root]), index=False)
        ctx, queue = context(api_config(fake_openai_server, [root]))
        try:
            files = _by_name(run_directory(ctx, root).files)
        finally:
            queue.close()
    assert summary.ok and summary.embedded == 2 and summary.skipped == 5
    assert {n: (f.state, f.reason) for n, f in files.items() if f.state == FileState.SKIPPED} == {
        "pipe.md": (FileState.SKIPPED, "not a regular file (FIFO)"),
        "sock.md": (FileState.SKIPPED, "not a regular file (socket)"),
        "null.txt": (FileState.SKIPPED, "not a regular file (character device)"),
        "dangling.md": (FileState.SKIPPED, f"dangling symbolic link to {root / 'gone.md'}"),
        "loop.md": (FileState.SKIPPED, "symbolic link loop"),
    }
    assert sorted(p.name for p in (root / ".rag").glob("*.ragjson")) == [
        "good0.md.ragjson",
        "good1.md.ragjson",
    ]


def test_a_fifo_put_in_place_of_a_listed_file_is_never_opened(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The listing said "regular file", then a FIFO took its name: the file job must not block reading it."""
    root = tmp_path / "kb"
    root.mkdir()
    os.mkfifo(root / "a.md")
    ctx, queue = context(api_config(fake_openai_server, [root]))
    got: list[FileOutcome | None] = []
    with sidecar.DirLock(root):
        task = FileTask(ctx, root, "a.md", Change.NEW, None)
        worker = threading.Thread(target=lambda: got.append(task.guard(task.begin)), daemon=True)
        worker.start()
        worker.join(20)
        if worker.is_alive():  # blocked in open(): let it go, then fail
            os.close(os.open(root / "a.md", os.O_WRONLY | os.O_NONBLOCK))
            worker.join(20)
    queue.close()
    assert not worker.is_alive() and got and got[0] is not None
    assert (got[0].state, got[0].reason) == (FileState.SKIPPED, "not a regular file (FIFO)")


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_entries_follow_their_sources_mode(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    root.mkdir(mode=0o750)
    modes = {"diary.md": 0o600, "team.md": 0o640, "public.md": 0o644}
    for name, mode in modes.items():
        (root / name).write_text(f"# {name}\n\nsome text of {name}\n")
        (root / name).chmod(mode)
    cfg = api_config(fake_openai_server, [root])
    assert helpers.run(cfg, index=False).embedded == 3
    assert {n: _mode(sidecar.entry_path(root, n)) for n in modes} == modes
    assert _mode(root / ".rag") == 0o750 and _mode(root / ".rag" / "tmp") == 0o700
    # a chmod is a change of the stat (ctime): the entry is rewritten (TOUCHED) and its mode follows, both ways
    (root / "diary.md").chmod(0o644)
    (root / "public.md").chmod(0o600)
    sent = len(fake_openai_server.texts)
    assert helpers.run(cfg, index=False).embedded == 0
    assert len(fake_openai_server.texts) == sent
    assert _mode(sidecar.entry_path(root, "diary.md")) == 0o644
    assert _mode(sidecar.entry_path(root, "public.md")) == 0o600
    # an entry left wider than its source (an older version, another tool) is narrowed by the next job
    sidecar.entry_path(root, "team.md").chmod(0o666)
    helpers.run(cfg, index=False)
    assert _mode(sidecar.entry_path(root, "team.md")) == 0o640
    assert entry(root, "team.md").status == FileState.EMBEDDED


def test_a_sidecar_that_cannot_be_written_is_failed_with_a_retry_time(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A real write failure (no root trick needed: the entry's path is taken by a non-empty directory, so rename()
    fails for anyone): the file is FAILED with the reason and a retry time, though even the FAILED entry could not be
    written; the others go on; once the way is clear, the retry embeds it."""
    root = tmp_path / "kb"
    _good_tree(root, 2)
    (root / "blocked.md").write_text("# Blocked\n\nthe text that could not be stored\n")
    (root / ".rag" / "blocked.md.ragjson" / "in-the-way").mkdir(parents=True)
    ctx, queue = context(api_config(fake_openai_server, [root]))
    try:
        files = _by_name(run_directory(ctx, root).files)
        assert files["good0.md"].state == FileState.EMBEDDED and files["good1.md"].state == FileState.EMBEDDED
        blocked = files["blocked.md"]
        assert blocked.final_state == FileState.FAILED and blocked.retry_at is not None
        assert "cannot write" in blocked.reason and "blocked.md.ragjson" in blocked.reason
        assert sidecar.parse_stamp(blocked.retry_at) is not None
        assert list((root / ".rag" / "tmp").iterdir()) == []
        (root / ".rag" / "blocked.md.ragjson" / "in-the-way").rmdir()
        (root / ".rag" / "blocked.md.ragjson").rmdir()
        retried = _by_name(run_directory(ctx, root).files)
    finally:
        queue.close()
    assert retried["blocked.md"].state == FileState.EMBEDDED
    assert entry(root, "blocked.md").status == FileState.EMBEDDED


NOBODY = 65534


def _in_child(fn: Callable[[], Any], *, as_nobody: bool) -> Any:
    """Run `fn` in a forked child (as `nobody` if asked: root reads every file) and return its JSON result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(r)
            if as_nobody:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            payload = json.dumps({"ok": fn()})
            code = 0
        except BaseException as err:  # reported to the parent
            payload = json.dumps({"error": repr(err)})
        finally:
            os.write(w, payload.encode())
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = json.loads(fh.read() or b"{}")
    os.waitpid(pid, 0)
    assert "ok" in data, data
    return data["ok"]


@contextmanager
def _kb_for_nobody(server: FakeOpenAI) -> Iterator[tuple[Path, bool, Any, list[logging.LogRecord]]]:
    """(root, as_nobody, job context, the `ragd` log's records): a root `kb` that `nobody` may enter (in a folder of
    its own: pytest's tmp dirs are 0700), to run the jobs that must not read as `nobody` when the test runs as root
    (`_in_child`), which reads every file. Removed, and the log left alone, at the end."""
    as_nobody = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="ragd-perm-"))
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    try:
        root = base / "kb"
        root.mkdir()
        if as_nobody:
            for p in (base, root):
                os.chown(p, NOBODY, NOBODY)
        ctx, queue = context(api_config(server, [root]))
        logging.getLogger("ragd").addHandler(handler)
        try:
            yield root, as_nobody, ctx, records
        finally:
            logging.getLogger("ragd").removeHandler(handler)
            queue.close()
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("name", ["closed.md", "CLOSED"])
def test_an_unreadable_file_is_failed_with_permission_denied(
    fake_openai_server: FakeOpenAI, name: str
) -> None:
    """FAILED "permission denied: <path>" with a hint, no traceback, not retried until the file changes (a chmod
    counts). Run where the process really cannot read the file: as root, in a child that drops to `nobody`. A name
    without an extension too, whose type is read from its start: not SKIPPED as "not text" for lack of it."""
    with _kb_for_nobody(fake_openai_server) as (root, as_nobody, ctx, records):
        closed = _doc_at(root / name)
        closed.chmod(0o600 if as_nobody else 0)

        def job() -> list[Any]:
            files = run_directory(ctx, root).files
            return [
                [f.name, f.final_state, f.reason, f.retry_at, [r.exc_info is not None for r in records]]
                for f in files
            ]

        first = _in_child(job, as_nobody=as_nobody)
        failed = entry(root, name)
        second = _in_child(job, as_nobody=as_nobody)  # no change: not tried again
        attempts = entry(root, name).error["attempts"]  # type: ignore[index]
        closed.chmod(0o644)  # a chmod is a change: the next job tries again, and now it can read it
        third = _by_name(run_directory(ctx, root).files)
        assert first == [
            [name, FileState.FAILED, f"permission denied: {closed}", None, []]
        ]  # [] : nothing logged
        assert failed.status == FileState.FAILED and failed.error is not None
        assert failed.error["code"] == "permission" and failed.error["retry_at"] is None
        assert "give the agent's user read access" in failed.error["hint"]
        assert (
            second == [[name, FileState.FAILED, f"permission denied: {closed}", None, []]] and attempts == 1
        )
        assert third[name].state == FileState.EMBEDDED
        assert _mode(sidecar.entry_path(root, name)) == 0o644


@pytest.mark.parametrize("change", [Change.LEAD, Change.TOUCHED])
def test_a_file_made_unreadable_after_its_job_planned_a_touch_is_failed_with_permission_denied(
    fake_openai_server: FakeOpenAI, change: Change
) -> None:
    """Found by the soak (row 65): a job planned a touch (a new stat, the same md5) or a lead for a file that was
    then changed again and made unreadable (`chmod 000`) before the job got to it. Its check for an edit since the
    plan reads the file: the PermissionError was an internal error with a traceback. It is FAILED "permission
    denied" now, as any file the agent cannot read. (As root, in a child that drops to `nobody`.)"""
    from dataclasses import replace

    with _kb_for_nobody(fake_openai_server) as (root, as_nobody, ctx, records):
        note = _doc_at(root / "a.md")  # indexed here (the child, as nobody, can import nothing new)
        assert _by_name(run_directory(ctx, root).files)["a.md"].final_state == FileState.EMBEDDED
        if as_nobody:
            for p in (root / ".rag", *(root / ".rag").iterdir(), note):
                os.chown(p, NOBODY, NOBODY)
        planned = entry(root, "a.md")
        if change == Change.LEAD:
            planned = replace(planned, lead=None)  # as an earlier ragd wrote it
        listed = note.stat()  # what the job's listing saw

        def job() -> list[Any]:
            os.utime(note, ns=(listed.st_mtime_ns + 10**9, listed.st_mtime_ns + 10**9))  # then changed again
            note.chmod(0)  # and closed, before the job got to it
            with sidecar.DirLock(root):
                task = FileTask(ctx, root, "a.md", change, planned, planned=listed)
                out = task.guard(task.begin) or task.guard(lambda: task.prepare(lambda hashes: {}))
                out = out or task.guard(task.finish)
            assert out is not None
            return [out.state, out.reason, [r.exc_info is not None for r in records]]

        state, reason, tracebacks = _in_child(job, as_nobody=as_nobody)
        assert (state, reason) == (FileState.FAILED, f"permission denied: {root / 'a.md'}")
        assert not any(tracebacks), "an internal error was logged"
        assert entry(root, "a.md").status == FileState.FAILED


def _doc_at(path: Path) -> Path:
    path.write_text("# Closed\n\nthe text nobody may read\n")
    old = path.stat().st_mtime - 100  # not "racy": the stat alone decides that nothing changed
    os.utime(path, (old, old))
    return path


def test_a_chmod_whose_entry_cannot_be_rewritten_still_narrows_the_entry(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The TOUCHED rewrite fails (its staging path is taken by a directory): the entry stays EMBEDDED (its content is
    right), but its mode is narrowed at once (a chmod needs no space), and the next job rewrites it."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nprivate words\n")
    (root / "a.md").chmod(0o644)
    ctx, queue = context(api_config(fake_openai_server, [root]))
    try:
        assert _by_name(run_directory(ctx, root).files)["a.md"].state == FileState.EMBEDDED
        (root / "a.md").chmod(0o600)
        block = root / ".rag" / "tmp" / f"a.md.ragjson.{os.getpid()}.tmp"
        (block / "in-the-way").mkdir(parents=True)
        assert _by_name(run_directory(ctx, root).files)["a.md"].state == FileState.TOUCHED
        assert (
            _mode(sidecar.entry_path(root, "a.md")) == 0o600
            and entry(root, "a.md").status == FileState.EMBEDDED
        )
        (block / "in-the-way").rmdir()
        block.rmdir()
        assert _by_name(run_directory(ctx, root).files)["a.md"].state == FileState.TOUCHED
    finally:
        queue.close()
    assert entry(root, "a.md").source.ctime_ns == (root / "a.md").stat().st_ctime_ns


@pytest.mark.parametrize("change", [Change.LEAD, Change.TOUCHED])
def test_a_file_edited_after_its_job_was_planned_is_done_again_whole(
    tmp_path: Path, fake_openai_server: FakeOpenAI, change: Change
) -> None:
    """Its directory's job planned a touch (a new stat, the same md5) or a lead (an entry of an earlier ragd) for
    the file, which was edited before the job got to it. Either would record the old md5 under the new stat, and
    every later job would take the edit for done; the file is done again whole instead. Not edited, neither
    hashes it again nor parses it."""
    from dataclasses import replace

    root = tmp_path / "kb"
    root.mkdir()
    note = root / "a.md"
    note.write_text("# A note\n\nThe first words of the note.\n")
    cfg = api_config(fake_openai_server, [root])
    assert helpers.run(cfg, index=False).ok
    planned = entry(root, "a.md")
    if change == Change.LEAD:
        planned = replace(planned, lead=None)  # as an earlier ragd wrote it
    else:
        os.utime(note, ns=(planned.source.mtime_ns + 10**9, planned.source.mtime_ns + 10**9))  # touched

    def job(listed: os.stat_result) -> FileOutcome | None:
        ctx, queue = context(cfg)
        with sidecar.DirLock(root):
            task = FileTask(ctx, root, "a.md", change, planned, planned=listed)
            out = task.guard(task.begin) or task.guard(lambda: task.prepare(lambda hashes: {}))
            out = out or task.guard(task.finish)
        queue.close()
        return out

    untouched = job(note.stat())
    assert (
        untouched is not None
        and untouched.state == FileState.TOUCHED
        and untouched.md5 == planned.source.md5_hash
    )
    listed = note.stat()
    note.write_text("# A note\n\nOther words entirely, written after the plan.\n")
    out = job(listed)
    assert out is not None and out.state == FileState.EMBEDDED
    now = entry(root, "a.md")
    assert now.source.md5_hash == out.md5 != planned.source.md5_hash
    assert "Other words entirely" in now.chunks[0].content and now.lead is not None
    assert "Other words entirely" in now.lead.content


def test_a_touched_file_edited_before_its_job_got_to_it_is_announced_in_the_change_note(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Found by the model-based test (seed 748550650): a hard link made to a file changes only its stat (a touch:
    no change note is planned for it); edited before the job got to it (through that link, outside every root), it
    was done again whole and its new entry written, but the note planned before said nothing of it: the index kept
    the old text until a verification removed it. The note names it now. (The job gets to its third round of files
    only once the first round's vectors are back: held, the file is edited meanwhile.)"""
    root = tmp_path / "kb"
    root.mkdir()
    for n in range(2 * FILES_PER_ROUND + 8):
        (root / f"n{n:03d}.md").write_text(f"Note {n}: words of the first version.\n")
    cfg = api_config(fake_openai_server, [root])
    ctx, queue = context(cfg)
    try:
        run_directory(ctx, root)
    finally:
        queue.close()
    helpers.clear_mushrooms(root)
    names = list(list_dir(root, Ignore(cfg.ignore)).files)  # the order of the job's work
    *edited, last = names
    for name in edited:  # done again: they come first, in rounds
        (root / name).write_text(f"{name}: words of the second version.\n")
    os.link(root / last, tmp_path / "outside.md")  # `last` only touched (its ctime), as the plan sees it
    fake_openai_server.hold_next(1)
    asked = len(fake_openai_server.requests)
    ctx, queue = context(cfg)
    try:
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(run_directory, ctx, root)
            poll(lambda: len(fake_openai_server.requests) > asked, 30, what="the first round's request held")
            (tmp_path / "outside.md").write_text("Written through the other path: zyxedited.\n")
            fake_openai_server.release()
            result = job.result(timeout=120)
    finally:
        fake_openai_server.release()
        queue.close()
    assert _by_name(result.files)[last].state == FileState.EMBEDDED
    assert "zyxedited" in entry(root, last).chunks[0].content
    assert mushroom.Event(last, NoteStatus.UPSERT) in helpers.all_events(root)


def test_a_round_names_a_recorded_file_that_is_away_at_its_hand_over(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A big folder's job hands each round over with a note of its files' upserts. It left out a file missing at that
    moment, for "no entry was written": but a `git checkout` deletes a file whose entry the round has written and
    writes it again (the same text) a moment later, and the file's next job then finds it only touched, with no
    change note, so its entry never reached the index (the soak, row 57: a repair). Whether an entry was written
    is the outcome's to say: a file that went before (vanished) is left out, one recorded is named."""
    from ragd.pipeline.dirjob import _Steps
    from ragd.pipeline.dirplan import plan_directory
    from ragd.pipeline.outcome import VANISHED

    root = tmp_path / "kb"
    root.mkdir()
    for n in range(FILES_PER_ROUND + 2):
        (root / f"n{n:03d}.md").write_text(f"Note {n}: a few words.\n")
    cfg = api_config(fake_openai_server, [root])
    ctx, queue = context(cfg)
    reported: list[Any] = []
    try:
        with sidecar.DirLock(root):
            plan = plan_directory(ctx, root)
            steps = _Steps(ctx, root, plan, reported.append)
            assert steps.on
            (root / "n000.md").unlink()  # away at the hand-over, its entry written (the round's outcome)
            steps.round([FileOutcome("n000.md", FileState.EMBEDDED, chunks=1, md5="m"),
                         FileOutcome("n001.md", FileState.UNCHANGED, reason=VANISHED)])  # fmt: skip
    finally:
        queue.close()
    [step] = reported
    assert mushroom.Event("n000.md", NoteStatus.UPSERT) in step.events
    assert mushroom.Event("n001.md", NoteStatus.UPSERT) not in step.events
