"""The web page (docs/web.md) over plain HTTP, served by the real agent (`ragd run`) with the fake embeddings API:
the gate (Host, Origin, tokens, cookies), the headers of every answer, the views' content, the retry action, the
live overview, and `ragctl ui`. What a browser does with it is tests/e2e/test_web_ui.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from ragctl.protocol import TOP_K
from tests.e2e.agent import AgentProcess, ragctl, ragctl_json, running_agent, write_doc
from tests.e2e.conftest import FAST_WATCH, write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

TOKEN = "web-token-0123456789"
VIEWS = ("/ui/", "/ui/failures", "/ui/search?q=marker", "/ui/changes")


@contextmanager
def agent_with(tmp_path: Path, api: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, *,
               mcp: str = "") -> Iterator[tuple[AgentProcess, Path, str]]:  # fmt: skip
    """The agent on a small tree (two documents, one corrupt PDF), idle; its page's URL."""
    kb = tmp_path / "kb"
    write_doc(kb / "notes" / "alpha.md", "zqalpha")
    (kb / "notes" / "配置.md").write_text(
        "# 代理配置\n\n如何配置代理服务器。设置 HTTP_PROXY 环境变量。\n", encoding="utf-8"
    )
    (kb / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a PDF\n")
    cfg = write_api_config(tmp_path / "ragd.toml", api, watch=FAST_WATCH)
    if mcp:  # into the [mcp] section
        text = cfg.read_text()
        at = text.index("\n", text.index("[mcp]\nport")) + len("\n")
        at = text.index("\n", at) + 1
        cfg.write_text(text[:at] + mcp + "\n" + text[at:])
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    with running_agent(tmp_path / "agent.log", str(kb), idle=True) as agent:
        url = agent.call("status")["mcp"]["ui_url"]
        yield agent, kb, url


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def test_every_answer_is_guarded_and_carries_the_strict_headers(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        agent_with(tmp_path, fake_openai_server, monkeypatch) as (_, kb, url),
        httpx.Client(timeout=60) as http,
    ):
        base = origin_of(url)
        assert http.get(f"{base}/").headers["location"] == "/ui/"
        for view in VIEWS:
            got = http.get(base + view)
            assert got.status_code == 200, (view, got.text)
            csp = got.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
            assert (
                got.headers["x-frame-options"] == "DENY"
                and got.headers["x-content-type-options"] == "nosniff"
            )
            assert "http://" not in got.text.replace(base, "")  # nothing fetched from elsewhere
        for asset in ("ragd.css", "ragd.js"):
            assert http.get(f"{base}/ui/static/{asset}").status_code == 200
        # DNS rebinding: another name for the same address
        assert http.get(f"{base}/ui/", headers={"Host": "rebind.example:80"}).status_code == 421
        # another site's page: refused whatever it asks
        evil = {"Origin": "http://evil.example"}
        assert http.get(f"{base}/ui/failures", headers=evil).status_code == 403
        form = {"path": str(kb / "broken.pdf")}
        assert http.post(f"{base}/ui/retry", data=form, headers=evil).status_code == 403
        assert http.post(f"{base}/ui/retry", data=form).status_code == 403  # no Origin at all
        ok = http.post(f"{base}/ui/retry", data=form, headers={"Origin": base})
        assert ok.status_code == 303 and "retried=" in ok.headers["location"]
        # a user's own file: served in a sandbox (a document's script runs nowhere near the page)
        (kb / "notes" / "page.html").write_text("<script>alert(1)</script><p>zqhtml</p>")
        raw = poll(lambda: _ok(http.get(f"{base}/ui/raw", params={"path": str(kb / "notes" / "page.html")})),
                   20, what="the raw file")  # fmt: skip
        assert raw.headers["content-security-policy"].startswith("sandbox")
        assert raw.headers["content-type"] == "text/html; charset=utf-8"
        # any other file: no script either, shown by the browser itself; text as text, in its own encoding
        (kb / "notes" / "README").write_text("plain words, no extension\n")
        (kb / "notes" / "旧.txt").write_bytes("简体中文的旧编码文件。".encode("gb18030") * 20)
        for name, kind in (("notes/alpha.md", "text/plain; charset=utf-8"),
                           ("notes/README", "text/plain; charset=utf-8"),
                           ("notes/旧.txt", "text/plain; charset=gb18030"), ("broken.pdf", "application/pdf")):  # fmt: skip
            got = poll(
                lambda n=name: _ok(http.get(f"{base}/ui/raw", params={"path": str(kb / n)})), 20, what=name
            )
            assert got.headers["content-type"] == kind, name
            assert "旧编码" in got.text or name != "notes/旧.txt"
            assert "sandbox" not in got.headers["content-security-policy"]
            assert "script-src" not in got.headers["content-security-policy"]  # default-src 'none' covers it
            assert "inline" in got.headers["content-disposition"]
        assert http.get(f"{base}/ui/raw", params={"path": "/etc/passwd"}).status_code == 404
        assert http.get(f"{base}/ui/doc", params={"path": "/etc/passwd"}).status_code == 404


def _ok(response: httpx.Response) -> httpx.Response | None:
    return response if response.status_code == 200 else None


def test_a_token_is_asked_for_and_kept_in_a_cookie_that_is_not_the_token(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with agent_with(tmp_path, fake_openai_server, monkeypatch, mcp=f'token = "{TOKEN}"') as (_, _kb, url):
        base = origin_of(url)
        with httpx.Client(timeout=60) as http:
            first = http.get(f"{base}/ui/failures?state=FAILED")
            assert first.status_code == 303
            assert parse_qs(urlsplit(first.headers["location"]).query)["next"] == [
                "/ui/failures?state=FAILED"
            ]
            assert http.get(f"{base}/ui/live").status_code == 401
            wrong = http.get(f"{base}/ui/?token=not-it")
            assert wrong.status_code == 401 and "not one this agent accepts" in wrong.text
            assert (
                http.post(f"{base}/ui/login", data={"token": "not-it"}, headers={"Origin": base}).status_code
                == 401
            )
        # `ragctl ui` prints the link that signs in; the token leaves the address at once
        told = ragctl_json("ui")
        assert told["token_in_link"] is True and told["link"] == f"{url}?token={TOKEN}"
        assert "keep it private" in ragctl("ui").stdout
        with httpx.Client(timeout=60) as http:
            signed = http.get(told["link"].replace("/ui/?", "/ui/failures?state=FAILED&"))
            assert signed.status_code == 303 and signed.headers["location"] == "/ui/failures?state=FAILED"
            cookie = http.cookies["ragd_ui"]
            assert TOKEN not in cookie and len(cookie) == 64
            assert "httponly" in signed.headers["set-cookie"].lower()
            assert "samesite=strict" in signed.headers["set-cookie"].lower()
            page = http.get(f"{base}/ui/failures?state=FAILED")
            assert page.status_code == 200 and "broken.pdf" in page.text and TOKEN not in page.text
            out = http.post(f"{base}/ui/logout", headers={"Origin": base})
            assert out.status_code == 303 and "ragd_ui" not in http.cookies
            assert http.get(f"{base}/ui/").status_code == 303
        with httpx.Client(timeout=60) as http:  # the sign-in form
            back = http.post(f"{base}/ui/login", data={"token": TOKEN, "next": "/ui/changes"},
                             headers={"Origin": base})  # fmt: skip
            assert back.status_code == 303 and back.headers["location"] == "/ui/changes"
            assert http.get(f"{base}/ui/changes").status_code == 200
            # a forged cookie is nobody's
            http.cookies.set("ragd_ui", "0" * 64)
            assert http.get(f"{base}/ui/changes").status_code == 303


def test_views_show_the_knowledge_base(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        agent_with(tmp_path, fake_openai_server, monkeypatch) as (agent, kb, url),
        httpx.Client(timeout=60) as http,
    ):
        base = origin_of(url)
        overview = http.get(url).text
        assert str(kb) in overview and 'id="chunks"' in overview
        failures = http.get(f"{base}/ui/failures", params={"state": "FAILED"}).text
        assert "broken.pdf" in failures and "corrupt PDF" in failures and "Retry now" in failures
        assert "alpha.md" not in failures
        assert "broken.pdf" not in http.get(f"{base}/ui/failures", params={"q": "zzz-no-such"}).text
        # search: Chinese question, matched words marked, a link to the passage
        found = http.get(f"{base}/ui/search", params={"q": "配置代理", "mode": "keyword"}).text
        assert "配置.md" in found and "<mark>" in found and "代理" in found
        assert "chunk=0#chunk-0" in found
        html = http.get(f"{base}/ui/search", params={"q": "<b>zqalpha</b>", "mode": "keyword"}).text
        assert "&lt;b&gt;zqalpha&lt;/b&gt;" in html and "<b>zqalpha</b>" not in html  # the query is escaped
        html = http.get(f"{base}/ui/search", params={"q": "ZQALPHA", "mode": "keyword"}).text
        assert "<mark>zqalpha</mark>" in html  # whole words, whatever their case
        for count in ("top_k", "k"):  # `k`: the older name, still accepted
            bad = http.get(f"{base}/ui/search", params={"q": "x", count: "1000"})
            assert bad.status_code == 400 and "top_k" in bad.text
        form = http.get(
            f"{base}/ui/search", params={"q": "zqalpha"}
        ).text  # the count every surface defaults to
        assert f'name="top_k" type="number" min="1" max="100" value="{TOP_K}"' in form
        under = http.get(f"{base}/ui/search", params={"q": "zqalpha", "path_prefix": str(kb / "notes")}).text
        assert "alpha.md" in under and f'value="{kb / "notes"}"' in under
        why = http.get(f"{base}/ui/search", params={"q": "zqalpha", "explain": "1"}).text  # search --explain
        assert 'id="how"' in why and "hybrid: rrf" in why and "why: vector " in why and "· fused " in why
        # the document view: chunks, state, identity and history
        doc = http.get(f"{base}/ui/doc", params={"path": str(kb / "notes" / "alpha.md"), "q": "zqalpha"}).text
        assert 'id="chunk-0"' in doc and "<mark>zqalpha</mark>" in doc and 'id="doc-id"' in doc
        assert "created" in doc
        failed = http.get(f"{base}/ui/doc", params={"path": str(kb / "broken.pdf")}).text
        assert 'id="doc-error"' in failed and "corrupt PDF" in failed
        # a long document: its passages a window at a time, around the one asked for
        long = kb / "notes" / "long.md"
        long.write_text("".join(f"## Part {i}\n\n" + f"zqlong part {i} " * 60 + "\n\n" for i in range(300)))
        agent.wait_idle()
        around = http.get(f"{base}/ui/doc", params={"path": str(long), "chunk": "250"}).text
        total = int(re.search(r"passages \d+–\d+ of (\d+)", around).group(1))  # type: ignore[union-attr]
        assert total >= 300 and 'id="chunk-250"' in around and 'id="chunk-0"' not in around
        assert ">earlier</a>" in around
        first = http.get(f"{base}/ui/doc", params={"path": str(long)}).text
        assert 'id="chunk-0"' in first and 'id="chunk-250"' not in first and ">later</a>" in first
        assert first.count('<li id="chunk-') == 200
        # changes: newest first, a move shown with where it came from
        (kb / "notes" / "alpha.md").rename(kb / "notes" / "beta.md")
        agent.wait_idle()

        def moved() -> str | None:
            text = http.get(f"{base}/ui/changes").text
            return text if "beta.md" in text else None

        changes = poll(moved, 20, what="the move in the changes view")
        assert "moved" in changes and str(kb / "notes" / "alpha.md") in changes
        assert changes.index("beta.md") < changes.index("配置.md")


def test_retry_now_runs_a_failed_file_again(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        agent_with(tmp_path, fake_openai_server, monkeypatch) as (agent, kb, url),
        httpx.Client(timeout=60) as http,
    ):
        base = origin_of(url)
        before = _attempts(agent, kb / "broken.pdf")
        done = http.post(f"{base}/ui/retry", data={"path": str(kb / "broken.pdf"), "back": "/ui/failures?state=FAILED"},
                         headers={"Origin": base})  # fmt: skip
        assert done.status_code == 303
        assert done.headers["location"].startswith("/ui/failures?state=FAILED&retried=")
        poll(lambda: _attempts(agent, kb / "broken.pdf") > before, 20, what="the file tried again")
        notice = http.get(base + done.headers["location"]).text
        assert "Retrying" in notice and "broken.pdf" in notice
        # a folder: every file of it is tried again
        before = _attempts(agent, kb / "broken.pdf")
        assert (
            http.post(f"{base}/ui/retry", data={"path": str(kb)}, headers={"Origin": base}).status_code == 303
        )
        poll(lambda: _attempts(agent, kb / "broken.pdf") > before, 20, what="the folder tried again")
        # outside every root: the message of `ragctl sync`, not a crash
        outside = http.post(f"{base}/ui/retry", data={"path": "/etc"}, headers={"Origin": base})
        assert outside.status_code == 404 and "root" in outside.text


def _attempts(agent: AgentProcess, path: Path) -> int:
    uri = "ragd://file" + str(path)
    answer = agent.call("mcp_read", {"uri": uri})
    info = json.loads(answer["contents"][0]["text"])
    return int((info.get("error") or {}).get("attempts") or 0)


def test_the_live_overview_streams_and_the_page_can_be_turned_off(
    tmp_path: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with agent_with(tmp_path, fake_openai_server, monkeypatch) as (_, kb, url):
        base = origin_of(url)
        events: list[str] = []
        with httpx.stream("GET", f"{base}/ui/live", timeout=10) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            for line in stream.iter_lines():
                events.append(line)
                if sum(1 for e in events if e == "event: overview") == 2:
                    break
        body = "\n".join(e.removeprefix("data: ") for e in events)
        assert 'id="chunks"' in body and str(kb) in body
    with agent_with(tmp_path / "off", fake_openai_server, monkeypatch, mcp="ui = false") as (agent, _, url):
        assert url is None
        mcp_url = agent.call("status")["mcp"]["url"]
        assert httpx.get(origin_of(mcp_url) + "/ui/").status_code == 404
        refused = ragctl("ui", check=1)
        assert "[mcp] ui = false" in refused.stderr
