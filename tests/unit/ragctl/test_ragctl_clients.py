"""`ragctl mcp-config`: each client's entry, the absolute command of this ragctl, and the merge into a config file.

The command is checked by running ragctl the ways it is started (`python -m ragctl`, a console script by its path
and through PATH); the merge on real files in tmp_path; the --http answers with `FakeAgentServer` as the agent.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ragctl
from ragctl import protocol
from ragctl.clientfile import MergeRefused, merge_entry
from ragctl.clients import CLIENTS, Command, Endpoint, claude_code_line, this_program
from ragctl.main import main
from tests.support.fake_agent import FakeAgentServer

CMD = Command("/opt/ragd/bin/ragctl", ("mcp",))
EP = Endpoint("http://127.0.0.1:9999/mcp", "t0ken-ABC")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def mcp_config(*argv: str, env: dict[str, str] | None = None, program: list[str] | None = None) -> Any:
    """The real `ragctl mcp-config ARGV --json` in a subprocess (started as `program`, default python -m ragctl)."""
    cmd = [*(program or [sys.executable, "-m", "ragctl"]), "mcp-config", *argv, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env or os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- each client's entry ----------------------------------------------------------------------------------------
def test_each_clients_stdio_snippet() -> None:
    stdio = {"command": "/opt/ragd/bin/ragctl", "args": ["mcp"]}
    assert CLIENTS["claude-desktop"].snippet(CLIENTS["claude-desktop"].entry(CMD)) == {
        "mcpServers": {"ragd": stdio}
    }
    assert CLIENTS["cursor"].snippet(CLIENTS["cursor"].entry(CMD)) == {"mcpServers": {"ragd": stdio}}
    assert CLIENTS["vscode"].snippet(CLIENTS["vscode"].entry(CMD)) == {
        "servers": {"ragd": {"type": "stdio", **stdio}}
    }
    assert CLIENTS["claude-code"].snippet(CLIENTS["claude-code"].entry(CMD)) == {
        "mcpServers": {"ragd": {"type": "stdio", **stdio}}
    }
    assert claude_code_line(CMD) == "claude mcp add --scope user ragd -- /opt/ragd/bin/ragctl mcp"
    with_env = Command("/usr/bin/python3", ("-m", "ragctl", "mcp"), {"PYTHONPATH": "/src/my cli"})
    assert CLIENTS["cursor"].entry(with_env)["env"] == {"PYTHONPATH": "/src/my cli"}
    # -e takes several values: after the name, or it would take the name for one
    assert claude_code_line(with_env) == (
        "claude mcp add --scope user ragd -e 'PYTHONPATH=/src/my cli' -- /usr/bin/python3 -m ragctl mcp"
    )


def test_each_clients_http_snippet() -> None:
    auth = {"Authorization": "Bearer t0ken-ABC"}
    assert CLIENTS["cursor"].entry(EP) == {"url": EP.url, "headers": auth}
    assert CLIENTS["vscode"].entry(EP) == {"type": "http", "url": EP.url, "headers": auth}
    assert CLIENTS["claude-code"].entry(EP) == {"type": "http", "url": EP.url, "headers": auth}
    assert CLIENTS["cursor"].entry(Endpoint(EP.url)) == {"url": EP.url}  # no token: no header
    assert claude_code_line(EP) == (
        "claude mcp add --scope user --transport http ragd http://127.0.0.1:9999/mcp "
        "--header 'Authorization: Bearer t0ken-ABC'"
    )
    with pytest.raises(ValueError, match="Claude Desktop takes no HTTP"):
        CLIENTS["claude-desktop"].entry(EP)


def test_each_clients_file() -> None:
    env = {"HOME": "/home/u"}
    where = {name: str(c.default_file(env, "linux")) for name, c in CLIENTS.items()}
    assert where == {"claude-desktop": "/home/u/.config/Claude/claude_desktop_config.json",
                     "claude-code": "/home/u/.claude.json", "cursor": "/home/u/.cursor/mcp.json",
                     "vscode": "/home/u/.config/Code/User/mcp.json"}  # fmt: skip
    mac = {name: str(c.default_file(env, "darwin")) for name, c in CLIENTS.items()}
    assert mac["claude-desktop"] == "/home/u/Library/Application Support/Claude/claude_desktop_config.json"
    assert mac["vscode"] == "/home/u/Library/Application Support/Code/User/mcp.json"
    xdg = {**env, "XDG_CONFIG_HOME": "/x"}
    assert str(CLIENTS["vscode"].default_file(xdg, "linux")) == "/x/Code/User/mcp.json"


# -- the absolute command ---------------------------------------------------------------------------------------
def console_script(path: Path) -> Path:
    """A console script as pip writes one into a venv's bin/."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom ragctl.main import main\nsys.exit(main())\n")
    path.chmod(0o755)
    return path


def test_started_as_python_m_ragctl_the_command_is_this_interpreter() -> None:
    entry = mcp_config("cursor")["entry"]
    assert entry["command"] == sys.executable and os.path.isabs(entry["command"])
    assert entry["args"] == ["-m", "ragctl", "mcp"]


def test_a_console_script_is_named_by_its_absolute_path_links_kept(tmp_path: Path) -> None:
    script = console_script(tmp_path / "lib" / "ragd" / "1.0" / "bin" / "ragctl")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ragctl").symlink_to(script)  # as the installer links ~/.local/bin/ragctl
    direct = mcp_config("vscode", program=[str(script)])["entry"]
    assert direct["command"] == str(script) and direct["args"] == ["mcp"]
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    found = subprocess.run(["ragctl", "mcp-config", "vscode", "--json"], capture_output=True, text=True,
                           timeout=60, env=env, cwd=tmp_path)  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["entry"]["command"] == str(tmp_path / "bin" / "ragctl")


def test_the_frozen_program_is_found_on_path_when_started_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = console_script(tmp_path / "bin" / "ragctl")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert this_program("ragctl", frozen=True) == Command(str(program), ("mcp",))
    assert this_program(str(program), frozen=True) == Command(str(program), ("mcp",))


def test_pythonpath_is_passed_on_only_when_ragctl_comes_from_it() -> None:
    cli = str(Path(__file__).resolve().parents[3] / "cli")
    with_it = this_program(f"{cli}/ragctl/__main__.py", {"PYTHONPATH": f"/elsewhere{os.pathsep}{cli}"})
    assert with_it.env == {"PYTHONPATH": cli}
    if sys.path[0] != cli:
        assert this_program(f"{cli}/ragctl/__main__.py", {}).env == {}


# -- the merge --------------------------------------------------------------------------------------------------
ENTRY = {"command": "/opt/ragd/bin/ragctl", "args": ["mcp"]}
OLD = {"theme": "dark", "mcpServers": {"a": {"command": "a"}, "ragd": {"command": "old"}, "z": {"url": "u"}},
       "projects": {"/p": {"mcpServers": {"ragd": {"command": "kept"}}}}}  # fmt: skip


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def test_merge_keeps_every_other_key_and_server_and_backs_up_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    path.write_text(json.dumps(OLD, indent=1))
    path.chmod(0o640)
    old = path.read_bytes()
    done = merge_entry(path, "mcpServers", "ragd", ENTRY, secret=False)
    data = json.loads(path.read_text())
    assert data == {**OLD, "mcpServers": {**OLD["mcpServers"], "ragd": ENTRY}}
    assert list(data["mcpServers"]) == ["a", "ragd", "z"]  # in its place
    assert data["projects"]["/p"]["mcpServers"]["ragd"] == {"command": "kept"}  # top level only
    assert done.backup is not None and backups(path) == [done.backup]
    assert done.backup.read_bytes() == old
    assert not done.created and mode_of(path) == 0o640 and done.mode == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".claude.json",
        done.backup.name,
    ]  # no temp file left


def test_merge_creates_a_missing_file_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "mcp.json"
    done = merge_entry(path, "servers", "ragd", ENTRY, secret=False)
    assert done.created and done.backup is None
    assert json.loads(path.read_text()) == {"servers": {"ragd": ENTRY}}
    assert mode_of(path) & 0o022 == 0 and mode_of(path.parent) == 0o700


def test_an_entry_with_a_token_makes_a_new_file_private(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    merge_entry(path, "mcpServers", "ragd", CLIENTS["cursor"].entry(EP), secret=True)
    assert mode_of(path) == 0o600
    assert json.loads(path.read_text())["mcpServers"]["ragd"]["headers"] == {
        "Authorization": "Bearer t0ken-ABC"
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [("{\n  // a comment\n}", "not valid JSON"), ('{"a": 1,}', "not valid JSON"), ("[1, 2]", "it holds an array in JSON"),
     ('{"mcpServers": []}', "its 'mcpServers' is an array"), (b"\xff\xfe{}", "not UTF-8")],
)  # fmt: skip
def test_a_file_that_is_not_a_json_object_is_refused_and_untouched(
    tmp_path: Path, text: str | bytes, says: str
) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = path.stat()
    with pytest.raises(MergeRefused) as info:
        merge_entry(path, "mcpServers", "ragd", ENTRY, secret=False)
    assert says in info.value.message
    assert str(path) in info.value.message and "nothing was changed" in info.value.hint
    assert path.read_bytes() == (text if isinstance(text, bytes) else text.encode())
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert list(tmp_path.iterdir()) == [path]  # no backup, no temp file


def test_a_linked_config_file_is_written_through_its_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}')
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    done = merge_entry(link, "mcpServers", "ragd", ENTRY, secret=False)
    assert link.is_symlink() and done.file == real
    assert json.loads(real.read_text()) == {"mcpServers": {"ragd": ENTRY}}


# -- the command line -------------------------------------------------------------------------------------------
def test_every_client_without_a_name_and_write_into_a_named_file(tmp_path: Path) -> None:
    every = mcp_config()
    assert [c["client"] for c in every["clients"]] == list(CLIENTS)
    path = tmp_path / "cfg" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"servers": {"other": {"type": "stdio", "command": "x"}}}')
    out = mcp_config("vscode", "--write", "--config-file", str(path))
    assert out["written"]["file"] == str(path) and out["written"]["backup"].startswith(str(path) + ".bak-")
    assert json.loads(path.read_text())["servers"] == {"other": {"type": "stdio", "command": "x"},
                                                       "ragd": out["entry"]}  # fmt: skip


def test_usage_errors_and_a_refused_file_exit_2_and_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # in-process, as `python -m ragctl` (whatever started the test runner: pytest-xdist's workers are `-c`)
    monkeypatch.setattr(sys, "argv", [str(Path(ragctl.__file__).with_name("__main__.py"))])
    assert main(["mcp-config", "--write"]) == 2
    assert "--write needs a CLIENT" in capsys.readouterr().err
    assert main(["mcp-config", "claude-desktop", "--http"]) == 2
    assert "only commands (stdio)" in capsys.readouterr().err
    assert main(["mcp-config", "zed"]) == 2
    bad = tmp_path / "mcp.json"
    bad.write_text("{oops")
    assert main(["mcp-config", "cursor", "--write", "--config-file", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"ragctl: cannot merge into {bad}: it is not valid JSON" in err and "hint:" in err
    assert bad.read_text() == "{oops"


# -- --http: the agent's URL and token --------------------------------------------------------------------------
class Agent(FakeAgentServer):
    def __init__(self, path: Path, answers: dict[str, tuple[Any, ...]]) -> None:
        self.answers = answers
        super().__init__(path)

    def answer(self, conn: socket.socket, rid: Any, verb: str, args: dict[str, Any]) -> bool:
        kind, *rest = self.answers[verb]
        reply = protocol.reply_ok(rid, *rest) if kind == "ok" else protocol.reply_error(rid, *rest)
        conn.sendall(protocol.encode(reply))
        return True


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "ctl.sock"


def http(sock: Path, answers: dict[str, tuple[Any, ...]], *argv: str) -> tuple[int, str, str]:
    agent = Agent(sock, answers)
    try:
        proc = subprocess.run([sys.executable, "-m", "ragctl", "--socket", str(sock), "mcp-config", "--http", *argv],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    finally:
        agent.close()
        sock.unlink()
    return proc.returncode, proc.stdout, proc.stderr


def test_http_takes_the_url_and_token_the_agent_tells(sock: Path) -> None:
    told = {"enabled": True, "url": "http://127.0.0.1:4321/mcp", "error": None, "token": "s3cret"}
    code, out, err = http(sock, {"mcp_client": ("ok", told)}, "cursor", "--json")
    assert code == 0, err
    assert json.loads(out)["entry"] == {"url": told["url"], "headers": {"Authorization": "Bearer s3cret"}}
    assert "holds the agent's bearer token" in err


def test_http_says_when_the_endpoint_is_off_or_the_agent_is_older(sock: Path) -> None:
    off = {"enabled": False, "url": None, "error": None, "token": None}
    code, _, err = http(sock, {"mcp_client": ("ok", off)}, "vscode")
    assert code == 1 and "[mcp] enabled = false" in err
    failed = {"enabled": True, "url": None, "error": "cannot listen on 127.0.0.1 port 8739", "token": None}
    code, _, err = http(sock, {"mcp_client": ("ok", failed)}, "vscode")
    assert code == 1 and "not serving: cannot listen on 127.0.0.1 port 8739" in err
    older = {"mcp_client": ("error", protocol.UNKNOWN_VERB, "unknown verb 'mcp_client'"),
             "status": ("ok", {"mcp": {"enabled": True, "url": "http://127.0.0.1:5555/mcp"}})}  # fmt: skip
    code, out, err = http(sock, older, "vscode", "--json")
    assert code == 0, err
    assert json.loads(out)["entry"] == {"type": "http", "url": "http://127.0.0.1:5555/mcp"}
    assert "does not tell its token" in err


def test_http_without_an_agent_gives_the_default_url_and_says_so(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ragctl", "--socket", str(tmp_path / "none.sock"), "mcp-config",
                           "claude-code", "--http"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "claude mcp add --scope user --transport http ragd http://127.0.0.1:8739/mcp\n" in proc.stdout
    assert "the agent is not running" in proc.stderr


def test_the_command_line_offers_every_client_this_module_knows() -> None:
    """main.py names the clients itself (parsing the command line imports nothing more)."""
    from ragctl.main import MCP_CLIENTS

    assert tuple(CLIENTS) == MCP_CLIENTS
