"""What the foreground agent says in its log when its output is not a terminal (a file here, the journal under
systemd): that it is indexing, and one line when it becomes idle."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.agent import AgentProcess, write_doc
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
