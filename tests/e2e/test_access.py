"""Access scope with real users: the real agent (`ragd run`, as root, serving every local user) and the real
`ragctl`, `ragctl mcp` and MCP HTTP clients, run as throwaway users created for the test.

The tree (a marker word per file, found by keyword search):
    shared/guide.md   0644 root            zqshared   everybody
    alice/notes.md    0600 alice (dir 700) zqalice    alice
    alice/broken.pdf  0600 alice           (FAILED)   alice's failure, in alice's status only
    bob/notes.md      0600 bob (dir 700)   zqbob      bob
    team/plan.md      0640 root:team (dir 750 root:team) zqteam  alice (a member), not bob
    public/flip.md    0644 alice           zqflip     everybody, until it is chmod 600
    noexec/inside.md  0644 root (dir 744)  zqnoexec   nobody but root: the directory cannot be passed through
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import tarfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import ragctl
import ragd
from tests.e2e.agent import AgentProcess, ragctl_json, running_agent, write_doc
from tests.e2e.conftest import FAST_WATCH, write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.users import User, ragctl_as, require_root, throwaway_users, world_dir

T = TypeVar("T")
MARKERS = ("zqshared", "zqalice", "zqbob", "zqteam", "zqflip", "zqnoexec")
SEES = {
    "alice": {"zqshared", "zqalice", "zqteam", "zqflip"},
    "bob": {"zqshared", "zqbob", "zqflip"},
    "public": {"zqshared", "zqflip"},  # an MCP HTTP request without a token
}
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}


@dataclass
class Setup:
    agent: AgentProcess
    users: dict[str, User]
    team: int
    kb: Path
    env: dict[str, str]  # a client's environment (HOME, RAGD_SOCKET, PYTHONPATH)

    def ragctl(self, who: str, *args: str, check: int | None = 0) -> Any:
        """`ragctl ARGS --json` run as `who`, its JSON answer (or, with check=None, the completed process)."""
        proc = ragctl_as(self.users[who], *args, "--json", env=self.env)
        if check is None:
            return proc
        assert proc.returncode == check, (who, args, proc.returncode, proc.stdout, proc.stderr)
        return json.loads(proc.stdout)

    def finds(self, who: str) -> set[str]:
        """The markers `who` finds with `ragctl search MARKER --mode keyword`."""
        found = set()
        for marker in MARKERS:
            hits = self.ragctl(who, "search", marker, "--mode", "keyword", "-k", "10")["results"]
            found |= {marker for h in hits if marker in h["content"]}
        return found

    @property
    def url(self) -> str:
        url = self.agent.call("status")["mcp"]["url"]
        assert url, self.agent.call("status")["mcp"]
        return str(url)


def make_tree(kb: Path, users: dict[str, User], team: int) -> None:
    alice, bob = users["alice"], users["bob"]

    def put(rel: str, marker: str, mode: int, owner: tuple[int, int] = (0, 0)) -> None:
        path = write_doc(kb / rel, marker)
        os.chown(path, *owner)
        path.chmod(mode)

    put("shared/guide.md", "zqshared", 0o644)
    put("alice/notes.md", "zqalice", 0o600, (alice.uid, alice.gid))
    (kb / "alice" / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a PDF\n")
    os.chown(kb / "alice" / "broken.pdf", alice.uid, alice.gid)
    (kb / "alice" / "broken.pdf").chmod(0o600)
    put("bob/notes.md", "zqbob", 0o600, (bob.uid, bob.gid))
    put("team/plan.md", "zqteam", 0o640, (0, team))
    put("public/flip.md", "zqflip", 0o644, (alice.uid, alice.gid))
    put("noexec/inside.md", "zqnoexec", 0o644)
    for d, mode, owner in (("shared", 0o755, (0, 0)), ("alice", 0o700, (alice.uid, alice.gid)),
                           ("bob", 0o700, (bob.uid, bob.gid)), ("team", 0o750, (0, team)),
                           ("public", 0o755, (0, 0)), ("noexec", 0o744, (0, 0))):  # fmt: skip
        os.chown(kb / d, *owner)
        (kb / d).chmod(mode)
    kb.chmod(0o755)


@pytest.fixture
def users() -> Iterator[tuple[dict[str, User], int]]:
    require_root()
    with throwaway_users("alice", "bob", group_members=("alice",)) as made:
        yield made


@pytest.fixture
def base() -> Iterator[Path]:
    path = world_dir("ragd-access-e2e-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def serving(base: Path, users: tuple[dict[str, User], int], api: FakeOpenAI, monkeypatch: pytest.MonkeyPatch,
            access: str = 'connect = "anyone"') -> Iterator[Setup]:  # fmt: skip
    made, team = users
    kb = base / "kb"
    make_tree(kb, made, team)
    cfg = write_api_config(base / "ragd.toml", api, watch=FAST_WATCH)
    with cfg.open("a") as f:  # [mcp] (port 0) is the file's last section: its tokens table follows it
        f.write("\n[mcp.tokens]\n" + "".join(f'{made[u].name} = "{t}"\n' for u, t in TOKENS.items()))
        f.write(f"\n[access]\n{access}\n")
    (base / "run").mkdir(mode=0o755)
    (base / "home").mkdir(mode=0o755)
    sock = base / "run" / "ragd" / "control.sock"
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    monkeypatch.setenv("RAGD_SOCKET", str(sock))
    pythonpath = os.pathsep.join(str(Path(m.__file__).parents[1]) for m in (ragctl, ragd))  # type: ignore[arg-type]
    env = {"PATH": os.environ["PATH"], "HOME": str(base / "home"), "RAGD_SOCKET": str(sock),
           "PYTHONPATH": pythonpath, "LANG": "C.UTF-8"}  # fmt: skip
    with running_agent(base / "agent.log", str(kb), idle=True) as agent:
        yield Setup(agent, made, team, kb, env)


@pytest.fixture
def setup(base: Path, users: tuple[dict[str, User], int], fake_openai_server: FakeOpenAI,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:  # fmt: skip
    with serving(base, users, fake_openai_server, monkeypatch) as s:
        yield s


# -- ragctl as each user ---------------------------------------------------------------------------------------
def test_each_user_finds_their_own_files_and_the_shared_ones(setup: Setup) -> None:
    assert setup.finds("alice") == SEES["alice"]
    assert setup.finds("bob") == SEES["bob"]
    every = {m for m in MARKERS
             if ragctl_json("search", m, "--mode", "keyword", "-k", "10")["results"]}  # fmt: skip
    assert every == set(MARKERS)  # root (the agent's administrator) sees all of it
    # a scoped user still gets top_k results when the best hits are others': ask for one, get one of its own
    one = setup.ragctl("bob", "search", "marker appears here", "--mode", "keyword", "-k", "1")["results"]
    assert len(one) == 1 and Path(one[0]["path"]).parent.name in ("shared", "bob", "public")
    files = setup.ragctl("bob", "search", "marker appears here", "--mode", "keyword", "--files", "-k", "10")
    assert {Path(f["path"]).parent.name for f in files["files"]} == {"shared", "bob", "public"}
    # the history too: bob sees the events of his files and the shared ones, root all of them
    seen = {Path(c["path"]).parent.name for c in setup.ragctl("bob", "changes", "--since", "1h")["changes"]}
    assert seen and seen <= {"shared", "bob", "public"}, seen
    assert "alice" in {
        Path(c["path"]).parent.name for c in ragctl_json("changes", "--since", "1h")["changes"]
    }


def test_a_file_moved_out_of_a_folder_the_user_may_not_read_hides_where_it_came_from(setup: Setup) -> None:
    """`changes` and MCP's `recent_changes` (so the web page's changes view) name a moved file's former path only
    to a caller who may see it: bob sees the file now in shared/, not that it came from alice's folder."""
    before = setup.kb / "alice" / "moving.md"
    before.write_text("# Moving\n\nzqmoving: this marker appears here\n")
    setup.agent.wait_idle()
    after = setup.kb / "shared" / "moving.md"
    before.rename(after)
    after.chmod(0o644)
    setup.agent.wait_idle()

    def moved(changes: list[dict[str, Any]]) -> dict[str, Any]:
        return next(c for c in changes if c["path"] == str(after))

    assert moved(ragctl_json("changes", "--since", "1h")["changes"])["old_path"] == str(before)  # root: all
    assert moved(setup.ragctl("bob", "changes", "--since", "1h")["changes"])["old_path"] is None

    async def recent(client: Client) -> Any:
        res = await client.call_tool("recent_changes", {"since_hours": 1})
        assert not res.is_error and res.structured_content is not None, res.content
        return res.structured_content["changes"]

    assert moved(over_http(setup.url, TOKENS["alice"], recent))["old_path"] == str(before)
    assert moved(over_http(setup.url, TOKENS["bob"], recent))["old_path"] is None


def test_status_export_orphans_and_roots_show_only_what_the_user_may_see(setup: Setup) -> None:
    def failures(who: str | None) -> list[str]:
        st = setup.ragctl(who, "status") if who else ragctl_json("status")
        [root] = st["roots"]
        assert root["files"]["FAILED"] == 1  # the counts are the agent's
        return [f["path"] for f in root["failures"]]

    broken = str(setup.kb / "alice" / "broken.pdf")
    assert failures(None) == [broken] and failures("alice") == [broken]
    assert failures("bob") == []
    assert [r["path"] for r in setup.ragctl("bob", "roots")["roots"]] == [str(setup.kb)]
    out = Path(setup.env["HOME"]) / "bob" / "export.tar.gz"
    out.parent.mkdir()
    os.chown(out.parent, setup.users["bob"].uid, setup.users["bob"].gid)
    proc = setup.ragctl("bob", "export", str(out), "-r", check=None)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tar:
        names = sorted(m.name for m in tar.getmembers())
    # the entries of the folders bob can enter and of the files he can read; not that of his own notes.md: it is
    # private (0600), and its entry, the agent's, has that mode (ragctl reads the entries as bob)
    assert names == ["kb/.rag/bob.ragjson", "kb/.rag/public.ragjson", "kb/.rag/shared.ragjson",
                     "kb/public/.rag/flip.md.ragjson", "kb/shared/.rag/guide.md.ragjson"]  # fmt: skip
    everything = {f["arcname"] for f in setup.agent.call("export", {"recursive": True})["files"]}
    assert {
        "kb/alice/.rag/notes.md.ragjson",
        "kb/team/.rag/plan.md.ragjson",
        *names,
    } <= everything  # root: all
    ragctl_json("pause")  # (as root) so that the index keeps bob's note once it is gone: an orphan
    gone = setup.kb / "bob" / "notes.md"
    gone.unlink()
    assert ragctl_json("orphans")["orphans"] == [str(gone)]
    assert setup.ragctl("bob", "orphans")["orphans"] == [str(gone)]  # gone from a folder bob can list
    assert setup.ragctl("alice", "orphans")["orphans"] == []  # ... which alice cannot
    ragctl_json("resume")


def test_a_chmod_while_indexed_applies_at_once(setup: Setup) -> None:
    flip = setup.kb / "public" / "flip.md"
    assert "zqflip" in setup.finds("bob")
    flip.chmod(0o600)  # no waiting: the next answer already knows
    hits = setup.ragctl("bob", "search", "zqflip", "--mode", "keyword")["results"]
    assert hits == []
    assert setup.ragctl("alice", "search", "zqflip", "--mode", "keyword")["results"]  # the owner still does
    flip.chmod(0o644)
    assert setup.ragctl("bob", "search", "zqflip", "--mode", "keyword")["results"]
    setup.kb.joinpath("public").chmod(0o700)  # the file is fine, its folder is not
    assert setup.ragctl("bob", "search", "zqflip", "--mode", "keyword")["results"] == []


ADMINISTRATION = [("pause",), ("resume",), ("sync",), ("reload",), ("verify",), ("index",), ("index", "--rebuild"),
                  ("config", "check"), ("orphans", "--clean"), ("roots", "add", "/tmp")]  # fmt: skip


def test_administration_is_refused_to_a_scoped_user(setup: Setup) -> None:
    """Each administrative command, asked of one agent by bob in turn: each refused, none done (the agent is not
    paused after any of them)."""
    for args in ADMINISTRATION:
        proc = setup.ragctl("bob", *args, check=None)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "for the agent's administrators" in proc.stdout + proc.stderr, args
        assert setup.agent.call("status")["agent"]["paused"] is False, args


def test_a_group_admits_its_members_only(base: Path, users: tuple[dict[str, User], int],
                                         fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    group = grp.getgrgid(users[1]).gr_name
    team = users[1]
    with serving(base, users, fake_openai_server, monkeypatch, f'connect = "group"\ngroup = "{group}"') as s:
        sock = Path(s.env["RAGD_SOCKET"])
        assert (sock.stat().st_mode & 0o777, sock.stat().st_gid) == (0o660, team)
        assert s.finds("alice") == SEES["alice"]
        refused = s.ragctl("bob", "status", check=None)  # the socket's mode keeps bob out
        assert refused.returncode == 1 and "this agent does not serve your user" in refused.stderr
        assert "docs/access.md" in refused.stderr


# -- MCP ---------------------------------------------------------------------------------------------------------
async def _findings(client: Client) -> tuple[set[str], list[str]]:
    found = set()
    for marker in MARKERS:
        res = await client.call_tool("search", {"query": marker, "mode": "keyword", "top_k": 10})
        assert not res.is_error, res.content
        assert res.structured_content is not None
        found |= {marker for h in res.structured_content["results"] if marker in h["content"]}
    listed = await client.list_resources()
    return found, sorted(str(r.uri).rsplit("/", 2)[-2] for r in listed.resources)


def over_stdio(user: User, env: dict[str, str], fn: Callable[[Client], Awaitable[T]]) -> T:
    async def main() -> T:
        params = StdioServerParameters(command=user.command("mcp")[0], args=user.command("mcp")[1:], env=env,
                                       cwd=env["HOME"])  # fmt: skip
        async with Client(stdio_client(params), mode="legacy") as client:
            return await fn(client)

    return anyio.run(main)


def over_http(url: str, token: str | None, fn: Callable[[Client], Awaitable[T]]) -> T:
    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            return await fn(client)

    return anyio.run(main)


def test_ragctl_mcp_run_by_a_user_answers_for_that_user(setup: Setup) -> None:
    alice_notes = str(setup.kb / "alice" / "notes.md")
    flip = setup.kb / "public" / "flip.md"

    async def session(client: Client) -> tuple[Any, ...]:
        found, listed = await _findings(client)
        own = await client.call_tool("read_document", {"path": str(setup.kb / "bob" / "notes.md")})
        theirs = await client.call_tool("read_document", {"path": alice_notes})
        chunk = await client.call_tool("read_chunk", {"path": alice_notes, "chunk_index": 0})
        try:
            await client.read_resource(f"ragd://chunks/{alice_notes.lstrip('/')}")
            resource: MCPError | None = None
        except MCPError as err:
            resource = err
        before = await client.call_tool("read_document", {"path": str(flip)})
        flip.chmod(0o600)
        after = await client.call_tool("read_document", {"path": str(flip)})
        flip.chmod(0o644)
        again = await client.call_tool("read_document", {"path": str(flip)})
        reindex = await client.call_tool("reindex", {})
        return found, listed, own, theirs, chunk, resource, before, after, again, reindex

    found, listed, own, theirs, chunk, resource, before, after, again, reindex = over_stdio(
        setup.users["bob"], setup.env, session
    )
    assert found == SEES["bob"]
    assert listed == ["bob", "public", "shared"]  # resources/list: bob's readable documents only
    assert not own.is_error and "zqbob" in own.structured_content["text"]
    for refused in (theirs, chunk):
        assert refused.is_error and "is not readable by user" in refused.content[0].text
    assert resource is not None and "is not readable by user" in str(resource)
    assert not before.is_error and after.is_error and not again.is_error
    assert reindex.is_error and "for the agent's administrators" in reindex.content[0].text


def test_mcp_over_http_answers_as_the_tokens_user_and_without_one_as_anybody(setup: Setup) -> None:
    url = setup.url
    for who in ("alice", "bob"):
        found, _ = over_http(url, TOKENS[who], _findings)
        assert found == SEES[who], who
    found, listed = over_http(url, None, _findings)
    assert found == SEES["public"] and listed == ["public", "shared"]

    async def read(client: Client) -> Any:
        return await client.call_tool("read_document", {"path": str(setup.kb / "alice" / "notes.md")})

    assert over_http(url, TOKENS["alice"], read).is_error is False
    assert over_http(url, TOKENS["bob"], read).is_error is True
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Authorization": "Bearer not-a-token"}
    assert httpx.post(url, json=body, headers=headers, timeout=10).status_code == 401
    # `ragctl mcp-config --http` run by bob gives bob's own token
    told = setup.ragctl("bob", "mcp-config", "cursor", "--http")
    assert TOKENS["bob"] in json.dumps(told) and TOKENS["alice"] not in json.dumps(told)


# -- the web page (docs/web.md) --------------------------------------------------------------------------------
def test_the_web_page_shows_each_user_what_the_user_may_read(setup: Setup) -> None:
    page = setup.agent.call("status")["mcp"]["ui_url"]
    base = page.removesuffix("/ui/")
    clients = {"alice": httpx.Client(), "bob": httpx.Client(), "public": httpx.Client()}
    for who in ("alice", "bob"):  # the sign-in link `ragctl ui` gives each user holds that user's token
        link = setup.ragctl(who, "ui")["link"]
        assert link == f"{page}?token={TOKENS[who]}"
        assert clients[who].get(link).status_code == 303
    try:
        for who, http in clients.items():
            found = set()
            for marker in MARKERS:
                text = http.get(f"{base}/ui/search", params={"q": marker, "mode": "keyword"}).text
                found |= {marker} if f"<mark>{marker}</mark>" in text else set()
            assert found == SEES[who], who
            failures = http.get(f"{base}/ui/failures").text
            assert ("broken.pdf" in failures) is (who == "alice"), who
            assert "Retry now" not in failures  # retrying is the owner's
        notes = {"path": str(setup.kb / "alice" / "notes.md")}
        assert clients["alice"].get(f"{base}/ui/doc", params=notes).status_code == 200
        assert clients["alice"].get(f"{base}/ui/raw", params=notes).text.startswith("# zqalice")
        for who in ("bob", "public"):  # as if it did not exist
            for view in ("doc", "raw"):
                refused = clients[who].get(f"{base}/ui/{view}", params=notes)
                assert refused.status_code == 404 and "zqalice" not in refused.text, (who, view)
        refused = clients["alice"].post(f"{base}/ui/retry", data=notes, headers={"Origin": base})
        assert refused.status_code == 403
    finally:
        for http in clients.values():
            http.close()
