"""The real `ragd run` parses in worker processes: the converters never load into the agent, a file past its
deadline fails alone, idle workers exit, and none outlives a killed agent, nor does its temp directory outlive the
next agent's first parse."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from ragd.pipeline import tmpdirs
from tests.e2e.agent import AgentProcess, ragctl_json
from tests.e2e.conftest import FAST_WATCH, api_config_text
from tests.support import docgen
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll
from tests.unit.pipeline.test_workers import big_text, workers_of

HEAVY = (
    "pdfium",
    "onnxruntime",
    "lxml/etree",
)  # pypdfium2's library, magika's model runtime (markitdown's file typing), lxml (odfdo, markitdown's docx)


def mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def write_config(
    tmp_path: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, limits: str = "", idle: float = 1.0
) -> None:
    cfg = tmp_path / "ragd.toml"
    cfg.write_text(api_config_text(server, watch=FAST_WATCH) + f"\n[limits]\nmax_text_chars = 100000000\n{limits}"
                   + f"\n[run]\nworkers = 2\nworker_idle = {idle}\n")  # fmt: skip
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))


@pytest.fixture
def agent_env(tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_config(tmp_path, fake_openai_server, monkeypatch)
    root = tmp_path / "kb"
    root.mkdir()
    docgen.make_pdf(root / "manual.pdf", ["Page one of the manual: pdfworkertoken."])
    docgen.make_docx(root / "notes.docx", paragraphs=["The docx says docxworkertoken."])
    docgen.make_html(root / "page.html", "Page", "<p>The page says htmlworkertoken.</p>")
    docgen.make_odt(root / "minutes.odt", paragraphs=["The minutes say odtworkertoken."])
    return root


def test_the_agent_parses_in_workers_that_exit_when_idle(tmp_path: Path, agent_env: Path) -> None:
    agent = AgentProcess(tmp_path / "agent.log", str(agent_env))
    try:
        agent.wait_ready()
        agent.wait_idle()
        for token, name in [("pdfworkertoken", "manual.pdf"), ("docxworkertoken", "notes.docx"),
                            ("htmlworkertoken", "page.html"), ("odtworkertoken", "minutes.odt")]:  # fmt: skip
            hits = ragctl_json("search", token, "--mode", "keyword")["results"]
            assert [Path(h["path"]).name for h in hits] == [name], hits
        maps = mapped(agent.pid)
        assert not [lib for lib in HEAVY if lib in maps], "a converter's library is loaded in the agent"
        poll(lambda: not workers_of(agent.pid), timeout=60, what="the idle workers to exit")
        (agent_env / "late.md").write_text("# Late\n\nlateworkertoken arrives after the workers left.\n")
        poll(lambda: ragctl_json("search", "lateworkertoken", "--mode", "keyword")["results"], timeout=60,
             what="the late file to be searchable")  # fmt: skip
    finally:
        agent.stop()
    assert "Traceback" not in agent.log()


def pool_workers(agent: int, tmp: Path) -> list[int]:
    """The live workers of agent `agent`'s pools whose temp directories are in `tmp` (the agent's TMPDIR): a worker
    is one once its start made its directory there. (Not `workers_of`: where the fork server's socket does not fit
    under `tmp`, as under CI's deeper pytest paths, the workers are spawned, and so is the child that parses the
    dictionary on a first start: an agent killed while only that child ran had no pool yet, once in CI.)"""
    found = []
    for root in tmp.glob(f"{tmpdirs.PREFIX}{agent}-*"):
        with contextlib.suppress(OSError):  # removed meanwhile
            found += [int(d.name.split("-")[0]) for d in root.iterdir()]
    return [w for w in found if alive(w)]


def kill_an_agent_at_work(log: Path, root: Path, tmp: Path) -> tuple[int, list[int]]:
    """An agent SIGKILLed while its workers parse 40 files in `root`, once the workers it had then have exited: its
    pid and those workers. `tmp` is the agent's TMPDIR. (The config's `worker_idle` must outlast the parse: a pool
    that fell idle after the last file, its workers exiting and its directory removed, was killed once in CI.)"""
    for i in range(40):  # enough files that workers are busy when the agent is killed
        (root / f"doc{i}.md").write_text(f"# Doc {i}\n\n" + "text to parse. " * 2000)
    agent = AgentProcess(log, str(root))
    try:
        agent.wait_ready()
        workers = poll(lambda: pool_workers(agent.pid, tmp), timeout=60, what="the agent's workers to start")
    finally:
        agent.signal(signal.SIGKILL)
        agent.kill()
    poll(lambda: not any(alive(w) for w in workers), timeout=60, what="the orphaned workers to exit")
    return agent.pid, workers


def agent_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp directory of the agents' own (their TMPDIR), so that what their workers leave there is theirs."""
    tmp = tmp_path / "sys-tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def test_no_worker_outlives_a_killed_agent(
    tmp_path: Path, agent_env: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, fake_openai_server, monkeypatch, idle=60.0)
    _, workers = kill_an_agent_at_work(tmp_path / "agent.log", agent_env, agent_tmp(tmp_path, monkeypatch))
    assert workers


def test_the_temp_dirs_of_a_killed_agents_workers_go_when_the_next_agent_parses(
    tmp_path: Path, agent_env: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, fake_openai_server, monkeypatch, idle=60.0)
    sys_tmp = agent_tmp(tmp_path, monkeypatch)
    killed, _ = kill_an_agent_at_work(tmp_path / "killed.log", agent_env, sys_tmp)
    left = list(sys_tmp.glob(f"{tmpdirs.PREFIX}{killed}-*"))
    assert left, "the killed agent's workers had no temp directory"

    # every worker the killed agent had, by its directory (some started after the ones it waited for)
    poll(lambda: not pool_workers(killed, sys_tmp), timeout=60, what="every orphaned worker to exit")
    agent = AgentProcess(tmp_path / "agent.log", str(agent_env))
    try:
        agent.wait_ready()
        (agent_env / "late.md").write_text("# Late\n\nlateworkertoken makes the workers start.\n")
        poll(lambda: not any(d.exists() for d in left), timeout=60, what="the killed agent's temp dirs to go")
        agent.wait_idle()
    finally:
        agent.stop()
    # the workers', the converters' and the fork server's (`ragd-mp-*`: multiprocessing's own, `pymp-*`, stayed)
    assert not list(sys_tmp.glob("ragd-*")) and not list(sys_tmp.glob("pymp-*"))


def test_a_file_past_its_deadline_fails_alone_while_the_agent_goes_on(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(
        tmp_path, fake_openai_server, monkeypatch, "parse_timeout = 0.3\n"
    )  # text files only: no import
    root = tmp_path / "kb"
    root.mkdir()
    big_text(root / "huge.txt", lines=1_200_000)  # seconds to split, against a deadline of 0.3 s
    (root / "fine.md").write_text("# Fine\n\nfineworkertoken is indexed.\n")
    agent = AgentProcess(tmp_path / "agent.log", str(root))
    try:
        agent.wait_ready()
        agent.wait_idle()
        failures = ragctl_json("status")["roots"][0]["failures"]
        assert [Path(f["path"]).name for f in failures] == ["huge.txt"], failures
        assert failures[0]["reason"].startswith("timed out after 0.3 s")
        hits = ragctl_json("search", "fineworkertoken", "--mode", "keyword")["results"]
        assert [Path(h["path"]).name for h in hits] == ["fine.md"]
    finally:
        agent.stop()
