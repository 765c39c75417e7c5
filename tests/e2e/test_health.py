"""Health that never hides a broken capability (DESIGN §9): the real agent, with a capability broken for real (a port
taken by another socket, no LibreOffice on PATH, an embeddings API that fails, a disk fuller than the threshold),
shows its state and reason in `ragctl status` (plain and --json), MCP `status`, systemd's STATUS= and, once, in its
log."""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.agent import AgentProcess, ragctl, ragctl_json, write_doc
from tests.e2e.conftest import api_config_text
from tests.e2e.test_agent_notify import NotifySocket
from tests.e2e.test_mcp_stdio import assert_jsonrpc, raw_session, req
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


def _agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeOpenAI, root: Path, *, port: int = 0,
           config: str = "", env: dict[str, str] | None = None) -> AgentProcess:  # fmt: skip
    text = api_config_text(server, watch={"quiet": 0.1, "ceiling": 1.0}).replace("port = 0", f"port = {port}")
    text += config
    (tmp_path / "ragd.toml").write_text(text)
    monkeypatch.setenv("RAGD_CONFIG", str(tmp_path / "ragd.toml"))
    agent = AgentProcess(tmp_path / "agent.log", str(root), env={**os.environ, **(env or {})})
    agent.wait_ready()
    return agent


@pytest.fixture
def root(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    write_doc(kb / "a.md", "zqalpha")
    return kb


def _health(name: str) -> dict[str, Any]:
    return dict(ragctl_json("status")["health"][name])


def _failed_files() -> list[dict[str, Any]]:
    return [f for r in ragctl_json("status")["roots"] for f in r["failures"]]


def _warnings(agent: AgentProcess, text: str) -> list[str]:
    return [line for line in agent.log().splitlines() if " WARNING " in line and text in line]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_a_port_taken_by_another_program_shows_http_unavailable_with_its_reason(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_openai_server: FakeOpenAI,
    root: Path,
    taken_port: int,
) -> None:
    notify = NotifySocket(tmp_path / "notify.sock")
    agent = _agent(tmp_path, monkeypatch, fake_openai_server, root,
                   port=taken_port, env={"NOTIFY_SOCKET": str(notify.path)})  # fmt: skip
    try:
        poll(lambda: _health("http")["state"] == "unavailable", what="http to be unavailable")
        http = _health("http")
        assert f"port {taken_port}" in http["reason"] and "in use" in http["reason"], http
        agent.wait_idle()
        plain = ragctl("status").stdout
        assert "health: 1 problem" in plain, plain
        assert (
            f"  http (MCP and web page): UNAVAILABLE (since {http['since']}): cannot listen on 127.0.0.1 "
            in plain
        )
        assert plain.count("`ragctl mcp` still works") == 2, (
            plain
        )  # the health line's reason and the mcp line's
        [mcp_line] = [line for line in plain.splitlines() if line.startswith("mcp: ")]
        assert mcp_line.count("`ragctl mcp` still works") == 1, mcp_line
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        lines = raw_session(
            [
                req(1, "initialize", hello),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                req(2, "tools/call", {"name": "status"}),
            ]
        )  # `ragctl mcp`: stdio still works
        [reply] = [r for line in lines for r in assert_jsonrpc(line) if r["id"] == 2]
        assert reply["result"]["structuredContent"]["health"]["http"] == http, reply
        poll(lambda: any("HTTP (MCP and web page) unavailable" in m for _, m in notify.drain()),
             what="STATUS= to say http is unavailable")  # fmt: skip
        agent.call("status")  # more checks: still logged once
        assert len(_warnings(agent, "HTTP (MCP and web page) unavailable: cannot listen")) == 1, agent.log()
    finally:
        agent.kill()


def test_an_agent_without_libreoffice_says_legacy_office_files_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai_server: FakeOpenAI, root: Path
) -> None:
    """No soffice on the agent's PATH: unavailable with the reason; a problem (warning, STATUS=) once a .doc needs
    it. With a soffice on its PATH: ok."""
    bare = tmp_path / "bin-bare"
    bare.mkdir()
    for tool in ("sh", "env"):  # what the agent may start; never soffice
        if found := shutil.which(tool):
            (bare / tool).symlink_to(found)
    notify = NotifySocket(tmp_path / "notify.sock")
    agent = _agent(tmp_path, monkeypatch, fake_openai_server, root,
                   env={"PATH": str(bare), "NOTIFY_SOCKET": str(notify.path)})  # fmt: skip
    try:
        agent.wait_idle()
        legacy = _health("legacy_office")
        assert legacy["state"] == "unavailable" and "soffice" in legacy["reason"], legacy
        assert legacy.get("unneeded") is True  # no .doc yet: not a problem
        assert (
            "health: all working; missing, though no file needed it yet: legacy office files"
            in ragctl("status").stdout
        )
        (root / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0 not really a doc")
        poll(lambda: not _health("legacy_office").get("unneeded"), what="the .doc to make it a problem")
        plain = ragctl("status").stdout
        assert "  legacy office files: UNAVAILABLE" in plain and ".doc and .ppt files are skipped" in plain, (
            plain
        )
        assert "1 file: needs LibreOffice (soffice) on PATH to convert .doc" in plain, plain
        poll(lambda: any("legacy Office files unavailable" in m for _, m in notify.drain()), what="STATUS=")
        assert len(_warnings(agent, "legacy Office files unavailable")) == 1, agent.log()
    finally:
        agent.kill()

    tools = tmp_path / "bin-office"
    tools.mkdir()
    soffice = tools / "soffice"
    soffice.write_text("#!/bin/sh\nexit 1\n")
    soffice.chmod(soffice.stat().st_mode | stat.S_IXUSR)
    agent = _agent(tmp_path, monkeypatch, fake_openai_server, root,
                   env={"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})  # fmt: skip
    try:
        assert _health("legacy_office")["state"] == "ok"
    finally:
        agent.kill()


def test_an_embeddings_api_that_fails_is_shown_and_its_return_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai_server: FakeOpenAI, root: Path
) -> None:
    """Every attempt answered 500: unavailable; 429: degraded (rate limited); answering again: ok. Each change is
    logged once (a warning when it stops working, info when it works again)."""
    server = fake_openai_server
    agent = _agent(tmp_path, monkeypatch, server, root)
    try:
        agent.wait_idle()
        assert _health("embeddings")["state"] == "ok"
        # the first attempt and both retries of the next batch; "429" in a failure's text is not a rate limit
        server.fail_next(3, status=500, message="the upstream proxy failed (it said 429 rate-limit)")
        write_doc(root / "b.md", "zqbravo")
        poll(lambda: _health("embeddings")["state"] == "unavailable", what="the embeddings to be unavailable")
        reason = _health("embeddings")["reason"]
        assert "failing" in reason and "not sent texts until" in reason and "ragctl sync" in reason, reason
        assert "  embeddings: UNAVAILABLE" in ragctl("status").stdout
        write_doc(root / "c.md", "zqcharlie")  # held down: fails at once, not sent
        poll(lambda: any("not tried again" in f.get("reason", "") for f in _failed_files()),
             what="c.md failed at once")  # fmt: skip
        assert "zqcharlie" not in " ".join(server.texts)
        ragctl("sync", "--force")  # a person asks: tried now, and c.md redone
        poll(lambda: _health("embeddings")["state"] == "ok", what="the embeddings to work again")
        server.fail_next(3, status=429)
        write_doc(root / "d.md", "zqdelta")
        # degraded from the first retry on ("requests retried"), then "rate limited" once the batch is given up
        poll(lambda: _health("embeddings")["reason"].startswith("rate limited: "), what="to be rate limited")
        assert _health("embeddings")["state"] == "degraded"
        ragctl("sync")  # held down after the 429s too: tried now
        write_doc(root / "e.md", "zqecho")
        poll(lambda: _health("embeddings")["state"] == "ok", what="the embeddings to work again")
        poll(lambda: len([x for x in agent.log().splitlines() if "embeddings: working again" in x]) == 2,
             what="both returns in the log")  # fmt: skip
        assert len(_warnings(agent, "embeddings unavailable: failing")) == 1, agent.log()
        assert len(_warnings(agent, "embeddings degraded: ")) in (1, 2), agent.log()  # at each failure: once
    finally:
        agent.kill()


def test_less_free_space_than_the_threshold_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai_server: FakeOpenAI, root: Path
) -> None:
    """`[run] min_free_space` above what is free on the data directory's file system: degraded, with how much is
    free and the threshold."""
    st = os.statvfs(tmp_path)
    free_mib = st.f_bavail * st.f_frsize // (1024 * 1024)
    agent = _agent(tmp_path, monkeypatch, fake_openai_server, root,
                   config=f"\n[run]\nmin_free_space = {2 * free_mib + 1}\n\n[parse]\nocr = false\n")  # fmt: skip
    try:
        poll(lambda: _health("disk")["state"] == "degraded", what="disk space to be degraded")
        disk = _health("disk")
        assert f"below [run] min_free_space = {2 * free_mib + 1} MiB" in disk["reason"], disk
        assert "  disk space: DEGRADED" in ragctl("status").stdout
        url = poll(lambda: ragctl_json("status")["mcp"]["ui_url"], what="the web page")
        page = httpx.get(url).text  # the web page's overview
        assert '<li data-capability="disk" data-state="degraded"><b>Disk space</b>:' in page, page
        assert f"below [run] min_free_space = {2 * free_mib + 1} MiB" in page
        poll(lambda: _warnings(agent, "disk space degraded"), what="the warning")
        ocr = _health("ocr")  # turned off in the config: shown, not a problem, not a warning
        assert (ocr["state"], ocr.get("chosen")) == ("unavailable", True), ocr
        assert "health: 1 problem; turned off in the config: ocr" in ragctl("status").stdout
        assert not _warnings(agent, "OCR")
    finally:
        agent.kill()
