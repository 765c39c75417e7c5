"""Odd entries and failing writes under the real `ragd`: names that are not UTF-8, FIFOs and broken links, unreadable
files, a disk that refuses a sidecar. Each ends in its own visible state; the rest of the tree is indexed."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.pipeline import sidecar
from tests.e2e.agent import (
    AgentProcess,
    keyword_hits,
    ragctl,
    ragctl_json,
    running_agent,
    write_doc,
)
from tests.e2e.conftest import RAGD, ragd, ragd_json
from tests.integration.helpers import all_json_valid
from tests.support import docgen
from tests.support.poll import poll


def _bad(directory: Path, name: bytes) -> bytes:
    return os.fsencode(directory) + b"/" + name


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    return root


@pytest.fixture
def agent(tmp_path: Path, config: Path, root: Path) -> Iterator[AgentProcess]:
    with running_agent(tmp_path / "agent.log", str(root)) as proc:
        yield proc


def test_a_name_that_is_not_utf8_is_skipped_and_its_directory_indexed(
    agent: AgentProcess, root: Path
) -> None:
    agent.wait_idle()
    mixed = root / "mixed"
    mixed.mkdir()
    fd = os.open(_bad(mixed, b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"latinonetoken in a latin-1 name\n")
    os.close(fd)
    bad_dir = Path(os.fsdecode(_bad(mixed, b"d\xff")))
    bad_dir.mkdir()
    write_doc(bad_dir / "inside.md", "insidetoken")
    for i in range(9):
        write_doc(mixed / f"good{i}.md", "goodtoken")
    ragctl("wait")
    assert keyword_hits("goodtoken") == [str(mixed / f"good{i}.md") for i in range(9)]
    assert keyword_hits("latinonetoken") == [] and keyword_hits("insidetoken") == []
    st = ragctl_json("status")
    summary = st["roots"][0]
    assert summary["files"] == {"EMBEDDED": 10, "SKIPPED": 2, "FAILED": 0}
    assert summary["dir_errors"] == [] and summary["failures"] == [] and st["progress"]["failed_dirs"] == []
    reasons = {s["path"]: s["reason"] for s in summary["skipped"]}
    assert (
        reasons[str(mixed / "caf\\xe9.txt")]
        == "file name is not valid UTF-8 (b'caf\\xe9.txt'); rename it to index it"
    )
    assert "file name is not valid UTF-8 (b'caf\\xe9.txt'); rename it to index it" in agent.log()
    assert "directory name is not valid UTF-8 (b'd\\xff'); rename it to index its files" in agent.log()
    assert "job for" not in agent.log()  # no directory job failed (it would be retried every minute)
    assert ragctl("status").returncode == 0
    # the directory keeps working: a later file is indexed, the odd ones stay SKIPPED
    write_doc(mixed / "later.md", "latertoken")
    ragctl("wait")
    assert keyword_hits("latertoken") == [str(mixed / "later.md")]
    assert ragctl_json("status")["roots"][0]["files"]["SKIPPED"] == 2
    all_json_valid(root)


def test_fifos_sockets_and_broken_links_are_skipped_while_watching(agent: AgentProcess, root: Path) -> None:
    agent.wait_idle()
    odd = root / "odd"
    odd.mkdir()
    os.mkfifo(odd / "pipe.md")  # reading it would block the job forever
    (odd / "dangling.md").symlink_to(odd / "nowhere.md")
    (odd / "loop.md").symlink_to(odd / "loop.md")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(odd / "sock.md"))
        write_doc(odd / "fine.md", "finetoken")
        ragctl("wait")
        assert keyword_hits("finetoken") == [str(odd / "fine.md")]
        summary = ragctl_json("status")["roots"][0]
    assert summary["files"] == {"EMBEDDED": 2, "SKIPPED": 4, "FAILED": 0} and summary["dir_errors"] == []
    assert sorted(p.name for p in (odd / ".rag").glob("*.ragjson")) == ["fine.md.ragjson"]


def test_a_sidecar_write_failure_is_retried_until_it_succeeds(
    tmp_path: Path, config: Path, root: Path
) -> None:
    """The entry's path is taken (a non-empty directory: rename() fails even for root), so neither the entry nor its
    FAILED record can be written. The file is FAILED with the reason and a retry time; once the way is clear, the
    agent's timed retry (`run.retry_after`, 60 s by default, 3 s here) indexes it with no further change to the
    file."""
    with config.open("a") as f:
        f.write("\n[run]\nretry_after = 3\n")
    with running_agent(tmp_path / "agent.log", str(root)) as agent:
        agent.wait_idle()
        (root / ".rag" / "blocked.md.ragjson" / "in-the-way").mkdir(parents=True)
        write_doc(root / "blocked.md", "blockedtoken")
        ragctl("wait")
        failures = ragctl_json("status")["roots"][0]["failures"]
        assert [f["path"] for f in failures] == [str(root / "blocked.md")]
        assert "cannot write" in failures[0]["reason"] and failures[0]["retry_at"]
        assert keyword_hits("blockedtoken") == []
        (root / ".rag" / "blocked.md.ragjson" / "in-the-way").rmdir()
        (root / ".rag" / "blocked.md.ragjson").rmdir()
        poll(lambda: keyword_hits("blockedtoken") == [str(root / "blocked.md")], timeout=60, every=0.2,
             what="the timed retry (run.retry_after: 3 s)")  # fmt: skip
        ragctl("wait")
        assert ragctl_json("status")["roots"][0]["failures"] == []
        entry = sidecar.read_entry(sidecar.entry_path(root, "blocked.md"))
        assert entry is not None and entry.status == "EMBEDDED"


def _with_file_size_limit(limit: int, argv: list[str]) -> list[str]:
    """`ragd ARGS` in an interpreter that first lowers its RLIMIT_FSIZE (Python ignores SIGXFSZ: writes get EFBIG)."""
    assert argv[:3] == RAGD
    code = ("import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.getrlimit(resource.RLIMIT_FSIZE)[1])); "
            f"sys.argv = ['ragd', *{argv[3:]!r}]; runpy.run_module('ragd', run_name='__main__')")  # fmt: skip
    return [RAGD[0], "-c", code]


def test_a_full_disk_leaves_the_file_failed_with_a_retry_time(tmp_path: Path, config: Path) -> None:
    """RLIMIT_FSIZE makes the big entry's write fail for real (EFBIG, as ENOSPC would; it applies to root too); the
    small FAILED record still fits, with a retry time. Once writes work again, the due retry embeds it."""
    root = tmp_path / "kb"
    root.mkdir()
    write_doc(root / "small.md", "smalltoken")
    (root / "big.md").write_text(
        "".join(f"Paragraph {i}: bigtoken words of a long text.\n\n" for i in range(400))
    )
    run = [*RAGD, "run", "--once", "--no-index", "--json", str(root)]
    limited = _with_file_size_limit(16384, run)
    proc = subprocess.run(limited, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["embedded"] == 1 and summary["failed_dirs"] == []
    assert [(Path(f["path"]).name, "File too large" in f["reason"]) for f in summary["failed"]] == [
        ("big.md", True)
    ]
    big = sidecar.read_entry(sidecar.entry_path(root, "big.md"))
    assert big is not None and big.status == "FAILED" and big.error is not None
    assert big.error["code"] == "storage" and big.error["retry_at"]
    assert "Traceback" not in proc.stderr
    # not retried before its time, then retried once due (the retry time is moved, as time passing would)
    assert json.loads(subprocess.run(run, capture_output=True, text=True, timeout=120).stdout)["failed"] == []
    sidecar.write_entry(
        root, big.with_status("FAILED", error={**big.error, "retry_at": "2000-01-01T00:00:00Z"})
    )
    again = json.loads(subprocess.run(run, capture_output=True, text=True, timeout=120).stdout)
    assert again["embedded"] == 1 and again["failed"] == []
    done = sidecar.read_entry(sidecar.entry_path(root, "big.md"))
    assert done is not None and done.status == "EMBEDDED"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file; the same path is shown as root by "
                    "tests/integration/test_dirjob_odd.py::test_an_unreadable_file_is_failed_with_permission_denied, "
                    "which drops to nobody in a forked child")  # fmt: skip
def test_an_unreadable_file_is_failed_with_permission_denied(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "kb"
    write_doc(root / "open.md", "opentoken")
    write_doc(root / "closed.md", "closedtoken").chmod(0)
    run = [*RAGD, "run", "--once", "--no-index", "--json", str(root)]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    summary = json.loads(proc.stdout)
    assert summary["embedded"] == 1 and summary["failed_dirs"] == []
    assert summary["failed"] == [
        {"path": str(root / "closed.md"), "reason": f"permission denied: {root / 'closed.md'}"}
    ]
    assert "Traceback" not in proc.stderr
    entry = sidecar.read_entry(sidecar.entry_path(root, "closed.md"))
    assert entry is not None and entry.error is not None and entry.error["retry_at"] is None
    assert "read access" in entry.error["hint"]
    (root / "closed.md").chmod(0o600)  # a chmod is a change: the next run indexes it
    again = json.loads(subprocess.run(run, capture_output=True, text=True, timeout=120).stdout)
    assert again["embedded"] == 1 and again["failed"] == []
    assert stat.S_IMODE(sidecar.entry_path(root, "closed.md").stat().st_mode) == 0o600


def test_the_data_directory_is_private(tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index holds every document's text: the data directory is created 0700, and an index/ left wider by an
    older version is narrowed to 0700."""
    root = tmp_path / "kb"
    write_doc(root / "a.md", "alpha")
    data = tmp_path / "state" / "ragd"
    monkeypatch.setenv("RAGD_DATA_DIR", str(data))
    assert (
        subprocess.run([*RAGD, "run", "--once", str(root)], capture_output=True, timeout=120).returncode == 0
    )
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "index").stat().st_mode) == 0o700
    (data / "index").chmod(0o755)
    assert (
        subprocess.run([*RAGD, "run", "--once", str(root)], capture_output=True, timeout=120).returncode == 0
    )
    assert stat.S_IMODE((data / "index").stat().st_mode) == 0o700


def test_utf8_text_with_a_stray_byte_or_a_cut_last_character_is_embedded_and_says_so(
    tmp_path: Path, config: Path
) -> None:
    """One bad byte used to make a whole Chinese file FAILED ("undecodable text"). It is read with the bad bytes
    replaced, found by its words, and its status says how many; binary junk is still refused."""
    root = tmp_path / "kb"
    text = "# 知识库笔记\n\n袋鼠公园的门票收入用于保护动物。kangaroostray 这是一个中文文档。\n" * 3
    data = text.encode()
    (root / "zh").mkdir(parents=True)
    (root / "zh" / "stray.md").write_bytes(data[:40] + b"\xff" + data[40:])
    (root / "zh" / "cut.txt").write_bytes(
        data.replace(b"kangaroostray", b"kangaroocut")[:-2]
    )  # "\n" and 。's last
    (root / "zh" / "junk.txt").write_bytes(docgen.junk_bytes())
    (root / "zh" / "high.txt").write_bytes(bytes(b for b in docgen.junk_bytes(8192) if b >= 0x80))
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("kangaroostray") == [str(root / "zh" / "stray.md")]
        assert keyword_hits("kangaroocut") == [str(root / "zh" / "cut.txt")]
        assert keyword_hits("袋鼠") == [str(root / "zh" / "cut.txt"), str(root / "zh" / "stray.md")]
        failed = {f["path"]: f["reason"] for f in ragctl_json("status")["roots"][0]["failures"]}
        assert set(failed) == {str(root / "zh" / "junk.txt"), str(root / "zh" / "high.txt")}
        assert "binary content" in failed[str(root / "zh" / "junk.txt")]
    states = {e["path"]: e for e in ragd_json("status", str(root / "zh"))["entries"]}
    assert states[str(root / "zh" / "stray.md")]["state"] == "EMBEDDED"
    assert states[str(root / "zh" / "stray.md")]["note"] == "with 1 undecodable byte replaced (U+FFFD)"
    assert states[str(root / "zh" / "cut.txt")]["note"] == "with 2 undecodable bytes replaced (U+FFFD)"
    assert states[str(root / "zh" / "junk.txt")]["state"] == "FAILED"
    out = ragd("status", str(root / "zh")).stdout
    assert f"EMBEDDED  {root / 'zh' / 'stray.md'}  with 1 undecodable byte replaced (U+FFFD)" in out
    entry = sidecar.read_entry(sidecar.entry_path(root / "zh", "stray.md"))
    assert entry is not None and entry.warning == "1 undecodable byte replaced (U+FFFD)"
