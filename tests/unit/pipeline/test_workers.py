"""The parse workers: real worker processes (pebble's pool, the "spawn" start method) on generated files.

A crash is a real worker killed with SIGSEGV while it waits for a (fake) LibreOffice converter; a deadline is a real
file that takes longer to split than the limit; the memory cap is a real address-space limit that a large file
exceeds. The temp directories the workers leave are looked for in a system temp directory of the test's own
(TMPDIR and `tempfile.tempdir`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest
from pebble import ProcessExpired

from ragd.config import LimitsConfig, RunConfig
from ragd.errors import FileSkipped, ParseError
from ragd.model import SplitterSettings
from ragd.pipeline import tmpdirs
from ragd.pipeline.pool import WorkerPool
from ragd.pipeline.workers import (
    CRASHED,
    FEW_FILES,
    HERE_BYTES,
    MEMORY,
    SHUTDOWN,
    TIMEOUT,
    Parsers,
    parse_and_split,
)
from tests.support import docgen
from tests.support.poll import poll

SPLIT = SplitterSettings()
BIG_LIMITS = LimitsConfig(max_text_chars=100_000_000)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def fork_servers_of(pid: int) -> list[int]:
    """`pid`'s multiprocessing fork server, if it runs (the pools' workers are its children)."""
    return [c for c in children(pid) if b"multiprocessing.forkserver" in _cmdline(c)]


def workers_of(pid: int) -> list[int]:
    """The worker processes of the pools of `pid`: the children of its fork server, or its own spawned children
    (a temp directory too deep for the server's socket); not the server itself, nor multiprocessing's resource
    tracker."""
    forked = [w for server in fork_servers_of(pid) for w in children(server) if _cmdline(w)]
    return forked + [c for c in children(pid) if b"spawn_main" in _cmdline(c)]


def big_text(path: Path, lines: int = 400_000) -> Path:
    """A plain-text file that takes seconds to split into tens of thousands of chunks (about 40 MB of str)."""
    path.write_text(("the quick brown fox jumps over the lazy dog\n") * lines)
    return path


@pytest.fixture
def parsers_of() -> Iterator[list[Parsers]]:
    made: list[Parsers] = []
    yield made
    for p in made:
        p.close()


@pytest.fixture
def sys_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temp directory, for this process and the workers it starts: a directory of the test's own."""
    base = tmp_path / "sys-tmp"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    return base


def ours_in(base: Path) -> list[Path]:
    """What ragd left in `base` (a converter's or a worker's temp directory), but this process's multiprocessing
    temp directory, made by its first pool of forked workers and kept until it exits."""
    return sorted(p for p in base.glob("ragd-*") if not p.name.startswith(tmpdirs.mp_dir_name(os.getpid())))


def pool(made: list[Parsers], limits: LimitsConfig = BIG_LIMITS, few: int = 0, **run: object) -> Parsers:
    """Parsers whose every file goes to a worker (`few` = 0) unless told otherwise."""
    p = Parsers(RunConfig.model_validate({"workers": 1, **run}), limits, few=few)
    made.append(p)
    return p


def test_a_file_parsed_in_a_worker_is_what_the_thread_makes(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    md = docgen.write_text(tmp_path / "notes.md", "# 标题 Title\n\n" + "正文 body text. " * 300)
    docx = docgen.make_docx(tmp_path / "a.docx", paragraphs=["First paragraph of the manual.", "第二段。"])
    p = pool(parsers_of)
    for f in (md, docx):
        got = p.start(f, SPLIT).result()
        assert got == parse_and_split(f, BIG_LIMITS, SPLIT)
        assert got.chunks and got.parser
    assert workers_of(os.getpid()), "the files were parsed in this process"


def test_the_parsers_verdicts_cross_the_process_boundary_whole(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    p = pool(parsers_of)
    with pytest.raises(FileSkipped) as skipped:
        p.start(docgen.write_bytes(tmp_path / "empty.md", b""), SPLIT).result()
    assert skipped.value.message == "empty file (0 bytes)" and skipped.value.code == "skipped"
    with pytest.raises(ParseError) as corrupt:
        p.start(docgen.make_corrupt_pdf(tmp_path / "bad.pdf"), SPLIT).result()
    in_thread = Parsers(RunConfig(workers=0), BIG_LIMITS)
    with pytest.raises(ParseError) as same:
        in_thread.start(tmp_path / "bad.pdf", SPLIT).result()
    assert corrupt.value.to_dict() == same.value.to_dict() and corrupt.value.hint
    with pytest.raises(FileNotFoundError):
        p.start(tmp_path / "gone.md", SPLIT).result()


def test_a_file_past_its_deadline_fails_and_the_next_one_parses(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    p = pool(parsers_of, LimitsConfig(max_text_chars=100_000_000, parse_timeout=0.5))
    started = time.monotonic()
    with pytest.raises(ParseError) as err:
        # 66 MB: 400,000 lines were split in 0.54 s on a quiet machine, inside the deadline with its grace
        p.start(big_text(tmp_path / "big.txt", lines=1_500_000), SPLIT).result()
    assert err.value.code == TIMEOUT and err.value.message.startswith("timed out after 0.5 s")
    assert "limits.parse_timeout" in err.value.hint
    assert time.monotonic() - started < 30
    ok = docgen.write_text(tmp_path / "ok.md", "# fine\n\nsmall file\n")
    assert p.start(ok, SPLIT).result().chunks


def modules_a_parse_imports(path: Path) -> list[str]:
    """In a worker: the modules that parsing and splitting `path` imported."""
    import sys

    before = set(sys.modules)
    parse_and_split(path, BIG_LIMITS, SPLIT)
    return sorted(set(sys.modules) - before)


def test_a_fresh_worker_imports_nothing_for_its_first_text_file(tmp_path: Path) -> None:
    """The deadline of a text or Markdown file counts the file alone: the stages' imports, the splitter's
    included, happen as the worker starts (a fresh worker's first small file took 0.15 s of imports, past a
    0.3 s deadline on a loaded machine)."""
    from ragd.pipeline.workers import PRELOAD

    for name in ("fine.md", "plain.txt"):
        workers = WorkerPool("parse", 1, 1024, 60.0, preload=PRELOAD)
        try:
            f = docgen.write_text(tmp_path / name, "# Fine\n\nfineworkertoken is indexed.\n")
            assert workers.submit(modules_a_parse_imports, (f,)).result(timeout=60) == []
        finally:
            workers.close()


def test_a_crashed_worker_fails_only_its_file_and_is_replaced(
    tmp_path: Path, parsers_of: list[Parsers], monkeypatch: pytest.MonkeyPatch, sys_tmp: Path
) -> None:
    docgen.make_fake_soffice(tmp_path / "bin", None, sleep=20)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    p = pool(parsers_of)
    doc = docgen.write_bytes(tmp_path / "old.doc", docgen.CFB_MAGIC + docgen.junk_bytes(2048))
    pending = p.start(doc, SPLIT)

    def converting() -> tuple[int, int] | None:  # (worker, converter) once a worker waits for the converter
        for w in workers_of(os.getpid()):
            for c in children(w):
                return w, c
        return None

    worker, converter = poll(converting, timeout=60, what="a worker running the converter")
    # the converter's copy of the file, in the worker's temp directory
    (copy,) = sys_tmp.rglob("ragd-soffice-*/source.doc")
    os.kill(worker, signal.SIGSEGV)
    with pytest.raises(ParseError) as err:
        pending.result()
    os.killpg(converter, signal.SIGKILL)  # the converter runs in its own process group
    assert err.value.code == CRASHED
    assert err.value.message == f"parser crashed (killed by SIGSEGV): {doc}"
    poll(lambda: not copy.parent.exists(), timeout=30, what="the crashed worker's temp files to be removed")
    ok = docgen.write_text(tmp_path / "ok.md", "# fine\n\nsmall file\n")
    assert p.start(ok, SPLIT).result().chunks
    assert worker not in workers_of(os.getpid())


def test_a_file_that_needs_more_memory_than_the_cap_fails_and_the_worker_goes_on(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    p = pool(parsers_of, worker_memory=256)
    ok = docgen.write_text(tmp_path / "ok.md", "# fine\n\nsmall file\n")
    assert p.start(ok, SPLIT).result().chunks
    with pytest.raises(ParseError) as err:
        p.start(big_text(tmp_path / "big.txt", lines=1_500_000), SPLIT).result()
    assert err.value.code == MEMORY and "run.worker_memory (256 MiB)" in err.value.message
    assert p.start(ok, SPLIT).result().chunks


def test_a_few_small_text_files_are_parsed_here_while_the_workers_are_not_running(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    """A fresh agent's first note needs no worker (starting one took seconds); a bigger file, or more files within
    the window, start them."""
    p = pool(parsers_of, few=FEW_FILES)
    notes = [
        docgen.write_text(tmp_path / f"note {i}.md", f"# Note {i}\n\n笔记 body {i}\n")
        for i in range(FEW_FILES)
    ]
    assert all(p.start(note, SPLIT).result().chunks for note in notes)
    assert not p.running and not workers_of(os.getpid())
    assert p.start(notes[0], SPLIT).result().chunks  # one more within the window: a bigger job
    assert p.running and p.started == 1
    q = pool(parsers_of, few=FEW_FILES)
    big = docgen.write_text(tmp_path / "big.md", "# Big\n\n" + "words and 文字 " * (HERE_BYTES // 10))
    assert q.start(big, SPLIT).result().chunks
    assert q.running, "a text file over HERE_BYTES was parsed outside the workers"


def test_a_job_of_more_than_a_few_files_starts_the_workers_for_its_first(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    """Its first few files were parsed one by one in the job's thread, the rest waiting behind them and the splitter's
    imports (a run of 400 text files began ~0.8 s later); a job of a few still parses them here."""
    note = docgen.write_text(tmp_path / "note.md", "# Note\n\n笔记 body\n")
    few = pool(parsers_of, few=FEW_FILES)
    few.expect(FEW_FILES)
    assert few.start(note, SPLIT).result().chunks and not few.running
    many = pool(parsers_of, few=FEW_FILES)
    many.expect(FEW_FILES + 1)
    assert many.start(note, SPLIT).result().chunks
    assert many.running and many.started == 1, "the first file of a big job was parsed outside the workers"


def test_idle_workers_exit_and_come_back_for_the_next_file(tmp_path: Path, parsers_of: list[Parsers]) -> None:
    p = pool(parsers_of, workers=2, worker_idle=0.3)
    ok = docgen.write_text(tmp_path / "ok.md", "# fine\n\nsmall file\n")
    assert p.start(ok, SPLIT).result().chunks
    assert p.running
    poll(lambda: not p.running and not workers_of(os.getpid()), timeout=30, what="the idle workers to exit")
    assert p.start(ok, SPLIT).result().chunks
    assert p.started == 2


def test_a_busy_pool_keeps_one_idle_timer_not_one_for_each_task() -> None:
    """Each time its tasks ran out, the pool started a timer (a thread) for its idle exit and the next task cancelled
    it: a thread for about every embed request of a big folder."""
    workers = WorkerPool("test", 1, 0, 60.0)
    seen: set[int] = set()
    try:
        for _ in range(40):
            workers.submit(os.getpid, ()).result(timeout=60)
            seen.update(id(t) for t in threading.enumerate() if isinstance(t, threading.Timer))
    finally:
        workers.close()
    assert 1 <= len(seen) <= 2


def test_a_pool_busy_again_exits_only_after_a_whole_idle_time() -> None:
    workers = WorkerPool("test", 1, 0, 1.5)
    try:
        workers.submit(os.getpid, ()).result(timeout=60)
        time.sleep(1.0)
        busy_again = time.monotonic()
        workers.submit(os.getpid, ()).result(timeout=60)
        time.sleep(0.8)  # the timer armed at the first idle moment fires here: only 0.8 s idle since
        assert workers.running
        poll(
            lambda: not workers.running and not workers_of(os.getpid()),
            timeout=30,
            what="the idle workers to exit",
        )
        assert time.monotonic() - busy_again >= 1.5
    finally:
        workers.close()


def _die_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # a worker that crashes, its clean-up not run


def test_a_worker_that_crashed_has_its_temp_dir_swept(tmp_path: Path, sys_tmp: Path) -> None:
    """The workers' temp directories, swept after every task before, are swept after a task that failed (and every
    `pool.SWEEP_EVERY` tasks)."""
    workers = WorkerPool("test", 1, 0, 60.0)
    try:
        left = Path(workers.submit(leave_a_temp_dir, (tmp_path / "where",)).result(timeout=60))
        with pytest.raises(
            ProcessExpired
        ):  # the worker dies under its task: the task fails, the sweep follows
            workers.submit(_die_now, ()).result(timeout=60)
        poll(lambda: not left.exists(), timeout=30, what="the gone worker's temp directory to be removed")
    finally:
        workers.close()
    assert ours_in(sys_tmp) == []


def test_files_under_way_when_the_pool_stops_end_as_shutdown(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    p = pool(parsers_of)
    pending = p.start(big_text(tmp_path / "big.txt"), SPLIT)
    p.close()
    with pytest.raises(ParseError) as err:
        pending.result()
    assert err.value.code == SHUTDOWN
    with pytest.raises(ParseError) as late:
        p.start(tmp_path / "big.txt", SPLIT).result()
    assert late.value.code == SHUTDOWN
    assert not workers_of(os.getpid())


def test_no_workers_parses_in_the_calling_thread(tmp_path: Path) -> None:
    p = Parsers(RunConfig(workers=0), BIG_LIMITS)
    ok = docgen.write_text(tmp_path / "ok.md", "# fine\n\nsmall file\n")
    assert p.start(ok, SPLIT).result().chunks
    assert not p.running and not workers_of(os.getpid())


def test_the_memory_cap_has_a_floor_a_worker_can_start_under() -> None:
    with pytest.raises(ValueError, match="at least 256 MiB"):
        RunConfig(worker_memory=100)
    assert RunConfig(worker_memory=0).worker_memory == 0


def module_in_worker(name: str, seconds: float) -> tuple[int, int]:
    """In a worker, after a `seconds` sleep: (its pid, the address of module `name` in it)."""
    time.sleep(seconds)
    return os.getpid(), id(sys.modules[name])


def test_the_workers_are_forked_from_one_server_that_imported_their_modules_once() -> None:
    """A worker is a fork of multiprocessing's fork server, which imported every pool's preload once (a worker
    spawned afresh paid ~0.5 CPU-seconds of imports, under load most of a run's worker CPU): every worker holds the
    server's very module objects, at the address the server made them. The server goes with the last pool."""
    from ragd.pipeline.workers import PRELOAD

    pool = WorkerPool("parse", 2, 1024, 60.0, preload=PRELOAD)
    try:
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while (
            len(seen) < 2 and time.monotonic() < deadline
        ):  # two at a time: both workers take some, once started
            tasks = [
                pool.submit(module_in_worker, ("langchain_text_splitters.character", 0.5)) for _ in range(4)
            ]
            seen.update(t.result(timeout=60) for t in tasks)
        assert len(seen) == 2, seen
        assert len(set(seen.values())) == 1, f"each worker imported the splitter itself: {seen}"
        (server,) = fork_servers_of(os.getpid())
        assert set(seen) == set(children(server))
    finally:
        pool.close()
    poll(
        lambda: not fork_servers_of(os.getpid()),
        timeout=30,
        what="the fork server to stop with the last pool",
    )


def dictionary_in_worker(seconds: float) -> tuple[int, int, int]:
    """In a worker, after a `seconds` sleep: (its pid, whether it holds the keyword dictionary, the address of it)."""
    from ragd.index.keyword import words

    time.sleep(seconds)
    built = words._load_jieba.cache_info().currsize  # before this task asked for it
    return os.getpid(), built, id(words._load_jieba())


def test_a_worker_given_the_keyword_cut_sends_each_chunks_words_with_its_chunks(
    tmp_path: Path, parsers_of: list[Parsers]
) -> None:
    """What the index writer would cut (pipeline/cutwords.py): the same words, made in the worker."""
    from ragd.index.keyword import WORKER_CUT, words
    from ragd.index.keyword.fts import chunk_text

    md = docgen.write_text(tmp_path / "notes.md", "# 标题 Title\n\n中华人民共和国 parse_config 正文. " * 200)
    p = Parsers(RunConfig.model_validate({"workers": 1}), BIG_LIMITS, few=0, cut=WORKER_CUT)
    parsers_of.append(p)
    got = p.start(md, SPLIT).result()
    assert len(got.chunks) > 1 and len(got.words) == len(got.chunks)
    texts = [chunk_text(c.header, c.content) for c in got.chunks]
    assert got.words == tuple((t, words.joined(t, normalized=True)) for t in texts)
    assert "中华" in got.words[0][1].split() and "parse" in got.words[0][1].split()
    assert got.chunks == parse_and_split(md, BIG_LIMITS, SPLIT).chunks  # the chunks as without the cut
    assert parse_and_split(md, BIG_LIMITS, SPLIT).words == ()  # no cut asked: no words


def test_the_workers_fork_server_builds_the_keyword_dictionary_once_for_all() -> None:
    """The cut's module, preloaded by the fork server, builds the dictionary as it is imported: every worker holds
    the server's very dictionary before its first Chinese text (each worker building its own cost ~0.2 s)."""
    from ragd.index.keyword import WORKER_CUT

    parsers = Parsers(RunConfig.model_validate({"workers": 2}), BIG_LIMITS, few=0, cut=WORKER_CUT)
    assert parsers.pool is not None
    try:
        seen: dict[int, tuple[int, int]] = {}
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            tasks = [parsers.pool.submit(dictionary_in_worker, (0.5,)) for _ in range(4)]
            seen.update((pid, (built, at)) for pid, built, at in (t.result(timeout=60) for t in tasks))
        assert len(seen) == 2, seen
        if fork_servers_of(os.getpid()):  # (spawned workers, under a deep temp directory, build their own)
            assert {built for built, _at in seen.values()} == {1}, seen
            assert len({at for _built, at in seen.values()}) == 1, f"each worker built its own: {seen}"
    finally:
        parsers.close()


def test_under_a_temp_directory_too_deep_for_the_servers_socket_the_workers_are_spawned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fork server's AF_UNIX socket lies in the temp directory, and its path may not pass 107 bytes: under a
    deeper TMPDIR (found by CI, whose test directories are deeper than a developer's) the server could not start,
    and no worker ever did. The workers are spawned then, as fresh interpreters."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    pool = WorkerPool("parse", 1, 1024, 60.0)
    try:
        assert (
            pool.submit(os.getppid, ()).result(timeout=60) == os.getpid()
        )  # spawned: a child of this process
        assert not fork_servers_of(os.getpid())
    finally:
        pool.close()


KILLED_WITH_A_SERVER = """
import multiprocessing, os
from ragd.pipeline.pool import WorkerPool
pool = WorkerPool("test", 1, 0, 60.0)
pool.submit(os.getpid, ()).result(timeout=60)
print(multiprocessing.current_process()._config["tempdir"], flush=True)
os.kill(os.getpid(), 9)
"""


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A system temp directory of the test's own, short enough for the fork server's socket (a test's `tmp_path`
    may not be): in the real one. This process's own multiprocessing temp directory stays in the real one."""
    tmpdirs.claim_mp_dir()
    base = Path(tempfile.mkdtemp(prefix="mp-"))
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_the_fork_servers_socket_of_an_agent_killed_goes_when_the_next_pool_starts(short_tmp: Path) -> None:
    """The fork server's socket lies in the agent's multiprocessing temp directory, which multiprocessing removes
    only at the agent's own exit: an agent killed left `pymp-XXXX/` behind for good. Named after the agent, it goes
    when the next agent's pool starts."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WITH_A_SERVER], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = Path(proc.stdout.strip())
    assert left.parent == short_tmp and left.name.startswith("ragd-mp-"), left
    assert [p.name.startswith("listener-") for p in left.iterdir()] == [True]
    assert not list(short_tmp.glob("pymp-*"))
    workers = WorkerPool("test", 1, 0, 60.0)
    try:
        assert workers.submit(os.getpid, ()).result(timeout=60)
    finally:
        workers.close()
    assert not left.exists()


def test_a_task_submitted_first_overtakes_the_tasks_waiting_for_a_worker() -> None:
    pool = WorkerPool("test", 1, 0, 60.0)
    try:
        busy = pool.submit(time.sleep, (1.0,))  # the one worker is busy for a second
        waiting = [pool.submit(time.time, ()) for _ in range(6)]  # handed out one at a time, in order
        urgent = pool.submit(time.time, (), first=True)  # an edited file's: next, whatever came before it
        started = [f.result(timeout=60) for f in waiting]
        assert busy.result(timeout=60) is None
        assert urgent.result(timeout=60) < min(started)
        assert started == sorted(started)
    finally:
        pool.close()


def interval(seconds: float) -> tuple[float, float]:
    """In a worker: (start, end) of a `seconds` sleep."""
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


def test_while_someone_edits_one_worker_waits_for_the_edited_files() -> None:
    pool = WorkerPool("test", 2, 0, 60.0)
    try:
        pool.submit(time.time, ()).result(timeout=60)  # both workers started
        pool.keep_one_free(60.0)
        others = [pool.submit(interval, (0.6,)) for _ in range(3)]
        time.sleep(0.2)
        edited = pool.submit(time.time, (), first=True).result(timeout=60)
        spans = sorted(f.result(timeout=60) for f in others)
        assert edited < spans[0][1], "the edited file waited for a busy worker"
        assert all(a[1] <= b[0] + 0.05 for a, b in itertools.pairwise(spans)), "two ran side by side"
    finally:
        pool.close()


def test_without_an_edit_every_worker_takes_the_waiting_files() -> None:
    pool = WorkerPool("test", 2, 0, 60.0)
    try:
        pool.submit(time.time, ()).result(timeout=60)
        # long enough that the second worker's start (a spawned Python: over a second under load) still overlaps
        spans = sorted(f.result(timeout=60) for f in [pool.submit(interval, (3.0,)) for _ in range(2)])
        assert spans[1][0] < spans[0][1], "the two ran one after the other"
    finally:
        pool.close()


def leave_a_temp_dir(note: Path, hang: float = 0.0) -> str:
    """In a worker: a temp directory with a file in it, never removed (as by a converter stopped half-way), its
    path written to `note`; then `hang` seconds' sleep."""
    where = tempfile.mkdtemp(prefix="ragd-soffice-")
    Path(where, "source.doc").write_bytes(b"x" * 4096)
    note.write_text(where)
    time.sleep(hang)
    return where


def test_a_worker_killed_at_its_deadline_leaves_no_temp_dir(tmp_path: Path, sys_tmp: Path) -> None:
    workers = WorkerPool("test", 1, 0, 60.0)
    try:
        note = tmp_path / "where"
        with pytest.raises(FutureTimeout):
            workers.submit(leave_a_temp_dir, (note, 60.0), timeout=1.0).result(timeout=60)
        left = Path(note.read_text())
        assert left.is_relative_to(sys_tmp)
        poll(lambda: not left.exists(), timeout=30, what="the killed worker's temp directory to be removed")
        assert workers.submit(os.getpid, ()).result(timeout=60) in workers_of(os.getpid())  # its replacement
    finally:
        workers.close()
    assert ours_in(sys_tmp) == []


@pytest.mark.parametrize("end", ["idle", "close"])
def test_workers_that_exit_leave_no_temp_dir(tmp_path: Path, sys_tmp: Path, end: str) -> None:
    workers = WorkerPool("test", 2, 0, 0.3 if end == "idle" else 60.0)
    try:
        left = Path(workers.submit(leave_a_temp_dir, (tmp_path / "where",)).result(timeout=60))
        assert left.is_relative_to(sys_tmp) and left.is_dir()
        if end == "idle":
            poll(lambda: not ours_in(sys_tmp), timeout=30, what="the idle workers' temp directories to go")
            assert not workers.running and not workers_of(os.getpid())
    finally:
        workers.close()
    assert ours_in(sys_tmp) == []


def test_closing_while_idle_workers_exit_waits_for_their_temp_dirs_to_go(
    tmp_path: Path, sys_tmp: Path
) -> None:
    """An agent stopping just as its idle workers exit: `close` returns once they are gone and their temp
    directories too, not while the idle exit is still under way (the process would end and leave them)."""
    workers = WorkerPool("test", 2, 0, 0.3)
    try:
        workers.submit(leave_a_temp_dir, (tmp_path / "where",)).result(timeout=60)
        assert ours_in(sys_tmp)
        poll(lambda: not workers.running, timeout=30, every=0.005, what="the idle exit to begin")
    finally:
        workers.close()
    assert ours_in(sys_tmp) == [] and not workers_of(os.getpid())


def gone_pid() -> int:
    """The pid of a process that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def worker_dir(base: Path, agent: int, worker: int, tag: str) -> Path:
    """A worker's temp directory as an agent `agent` makes it, with a file in it."""
    own = base / f"ragd-worker-{agent}-{tag}" / f"{worker}-{tag}"
    own.mkdir(parents=True)
    (own / "source.doc").write_bytes(b"x")
    return own


def test_a_pool_starting_removes_the_temp_dirs_of_gone_agents_and_keeps_live_ones(sys_tmp: Path) -> None:
    gone, live = gone_pid(), subprocess.Popen(["sleep", "60"])
    try:
        # an agent killed with its workers; one killed while a worker of it runs on; another agent, running
        dead = worker_dir(sys_tmp, gone, gone, "dead")
        orphan = worker_dir(sys_tmp, gone, live.pid, "orphan")
        orphans_gone = worker_dir(sys_tmp, gone, gone, "orphan")
        running = worker_dir(sys_tmp, live.pid, gone, "running")
        # the multiprocessing temp directories (the fork server's socket) of an agent killed and of a live one
        dead_mp, live_mp = sys_tmp / f"ragd-mp-{gone}-dead", sys_tmp / f"ragd-mp-{live.pid}-live"
        for mp in dead_mp, live_mp:
            mp.mkdir()
            (mp / "listener-abcd").write_bytes(b"")
        workers = WorkerPool("test", 1, 0, 60.0)
        try:
            assert workers.submit(os.getpid, ()).result(timeout=60)
        finally:
            workers.close()
        assert not dead.parent.exists()
        assert (orphan / "source.doc").exists() and not orphans_gone.exists()
        assert (running / "source.doc").exists()
        assert not dead_mp.exists() and (live_mp / "listener-abcd").exists()
        assert set(ours_in(sys_tmp)) == {orphan.parent, running.parent, live_mp}
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("agent", ["gone", "live"])
def test_a_worker_starting_for_an_agent_gone_exits_quietly(sys_tmp: Path, agent: str) -> None:
    """A worker still starting when its agent was killed finds its pool's directory removed by the next agent's
    pool: it exits at once with nothing in the log (its start-up traceback went into the log the agents share).
    A worker whose agent lives still says what went wrong."""
    pid = gone_pid() if agent == "gone" else os.getpid()
    root = sys_tmp / f"ragd-worker-{pid}-abcd"  # never made, or removed
    code = "import sys; from pathlib import Path; from ragd.pipeline import tmpdirs; tmpdirs.enter(Path(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
    if agent == "gone":
        assert (proc.returncode, proc.stderr) == (0, "")
    else:
        assert proc.returncode == 1 and "FileNotFoundError" in proc.stderr


def test_a_worker_killed_while_idle_leaves_no_temp_dir_once_its_pool_is_replaced(
    tmp_path: Path, sys_tmp: Path
) -> None:
    workers = WorkerPool("test", 1, 0, 60.0)

    def in_a_new_worker() -> bool:
        try:
            return workers.submit(os.getpid, ()).result(timeout=60) != worker
        except BrokenProcessPool:  # handed to the pool before it saw its worker die
            return False

    try:
        left = Path(workers.submit(leave_a_temp_dir, (tmp_path / "where",)).result(timeout=60))
        (worker,) = workers_of(os.getpid())
        os.kill(worker, signal.SIGKILL)  # with no task to fail, the pool breaks: the next task gets a new one
        poll(in_a_new_worker, timeout=60, what="a task in a new worker")
        poll(lambda: not left.exists(), timeout=30, what="the killed worker's temp directory to be removed")
    finally:
        workers.close()
    assert ours_in(sys_tmp) == []


EARLY_SERVER = """
import json, os
from multiprocessing import forkserver
from ragd.pipeline import pool
from ragd.pipeline.pool import WorkerPool

pool.start_server(("colorsys",))  # what `ragd run --once` does before its own imports
early = forkserver._forkserver._forkserver_pid
workers = WorkerPool("t", 1, 1024, 60.0)  # a pool with no preload of its own
try:
    preloaded = workers.submit(eval, ("'colorsys' in __import__('sys').modules",)).result(timeout=60)
    served = forkserver._forkserver._forkserver_pid
finally:
    workers.close()
print(json.dumps({"early": early, "served": served, "preloaded": preloaded,
                  "stopped": forkserver._forkserver._forkserver_pid is None}))
"""


def test_the_fork_server_started_ahead_serves_the_first_pool_and_stops_with_it() -> None:
    """`ragd run --once` starts the parse workers' fork server before it imports its config and pipeline, so that
    the server's imports overlap its own (pool.start_server): the first pool's workers come from that server, with
    what it was started with imported, and the server stops with the last pool, as one the first worker started.
    (In a child process: the test runner's fork server is not this test's.)"""
    import json

    # a temp directory short enough for the server's socket (a test's own is too deep for it on CI's runner)
    with tempfile.TemporaryDirectory(prefix="ragd-t-", dir="/tmp") as short:
        env = {**os.environ, "TMPDIR": short}
        out = subprocess.run([sys.executable, "-c", EARLY_SERVER], capture_output=True, text=True, timeout=120,
                             env=env, check=True)  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["early"] is not None and seen["served"] == seen["early"], seen
    assert seen["preloaded"] is True and seen["stopped"] is True, seen


def test_the_early_start_names_the_workers_keyword_cut() -> None:
    """`run --once` names the modules the fork server imports before it imports the index: the same cut."""
    from ragd.index.keyword import WORKER_CUT
    from ragd.pipeline import preload

    assert WORKER_CUT.partition(":")[0] == preload.CUT_MODULE
