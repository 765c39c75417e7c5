"""What the foreground agent says in its log when its output is not a terminal (a file here, the journal under
systemd): that it is indexing, and one line when it becomes idle."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.agent import AgentProcess, write_doc
from tests.e2e.conftest import RAGD
from tests.support.poll import poll


def test_the_log_says_when_the_agent_becomes_idle(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "kb"
    for i in range(4):
        write_doc(root / f"d{i}" / "doc.md", f"token{i}")
    agent = AgentProcess(tmp_path / "agent.log", str(root))
    try:
        agent.wait_ready()
        line = poll(lambda: next((ln for ln in agent.log().splitlines() if " idle: " in ln), None), timeout=60,
                    what="the idle line in the log")  # fmt: skip
        assert line.endswith(" s") and " idle: 4 files, " in line and " chunks in " in line, line
        write_doc(root / "d0" / "more.md", "another")  # indexing again: one more idle line when done
        poll(lambda: agent.log().count(" idle: ") == 2, timeout=60, what="a second idle line")
        assert " idle: 5 files, " in agent.log()
    finally:
        agent.stop()


def _run_once_into_pipe(root: Path, environ: dict[str, str]) -> tuple[list[str], str]:
    """`ragd run --once ROOT` with its stderr a pipe, JOURNAL_STREAM naming that pipe as systemd names the journal's
    stream: its stderr lines, and its stdout."""
    read_end, write_end = os.pipe()
    st = os.fstat(write_end)
    env = {**environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
    with os.fdopen(read_end, encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.Popen([*RAGD, "run", "--once", str(root)], stderr=write_end, stdout=subprocess.PIPE,
                                    text=True, env=env)  # fmt: skip
        finally:
            os.close(write_end)
        lines = out.read().splitlines()
        stdout = proc.communicate(timeout=120)[0]
    return lines, stdout


def test_under_journald_every_line_carries_its_priority(tmp_path: Path, config: Path) -> None:
    """journald files a line at the priority its `<N>` prefix names (SyslogLevelPrefix=, on by default): without
    one, the agent's warnings and errors were all "info" and `journalctl -p warning` showed none of them. And the
    HTTP client's line per embeddings request is not logged at the default level."""
    root = tmp_path / "kb"
    for i in range(3):
        write_doc(root / f"doc{i}.md", f"token{i}")
    (root / os.fsdecode(b"bad \xff name.md")).write_text("not UTF-8 named\n")  # logged as a warning
    lines, stdout = _run_once_into_pipe(root, os.environ.copy())
    assert "indexed" in stdout or "embedded" in stdout, stdout
    warnings = [ln for ln in lines if "not valid UTF-8" in ln or "bad \\xff name" in ln]
    assert warnings and all(ln.startswith("<4>WARNING ") for ln in warnings), lines
    levels = (
        "CRITICAL",
        "ERROR",
        "WARNING",
        "INFO",
        "DEBUG",
    )  # a log line without its prefix (progress lines
    assert not any(ln.startswith(levels) for ln in lines), (
        lines
    )  # are no log records: info, as journald files them)
    assert not any("HTTP Request" in ln for ln in lines), lines


def test_a_stderr_that_is_not_the_journals_stream_gets_no_priorities(tmp_path: Path, config: Path) -> None:
    """A unit whose stderr goes elsewhere (or a shell that redirected it) inherits JOURNAL_STREAM: only the stream
    it names gets the prefixes."""
    root = tmp_path / "kb"
    (root / os.fsdecode(b"bad \xff name.md")).parent.mkdir(parents=True)
    (root / os.fsdecode(b"bad \xff name.md")).write_text("not UTF-8 named\n")
    proc = subprocess.run([*RAGD, "run", "--once", str(root)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JOURNAL_STREAM": "1:2"})  # fmt: skip
    assert "WARNING" in proc.stderr and "<4>" not in proc.stderr, proc.stderr
