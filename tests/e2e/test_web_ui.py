"""The web page (/ui/) in a real browser: the real agent (`ragd run`) on the fake embeddings API, and the system's
headless Chromium driven by Playwright (tests/support/browser.py). A person loads the overview, searches (in
English and Chinese), opens a result, finds a FAILED file and its reason, retries it, watches the progress while
files arrive, uses only the keyboard, a phone-sized screen, a token; and a page of another site gets nothing.

With RAGD_SCREENSHOTS=DIR the tests also save the screenshots of docs/ui/ into DIR (and index a few of the
machine's Debian READMEs beside their own documents, so that the pictures look like a real knowledge base):

    RAGD_SCREENSHOTS=$PWD/docs/ui .venv/bin/python -m pytest --basetemp=/tmp/ragd tests/e2e/test_web_ui.py
"""

from __future__ import annotations

import os
import random
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from ragd.pipeline import sidecar
from tests.e2e.agent import AgentProcess, write_doc
from tests.e2e.conftest import FAST_WATCH, api_config_text
from tests.support.browser import Watched, chromium
from tests.support.fake_openai import FakeOpenAI
from tests.support.isolation import environ, isolation
from tests.support.poll import poll

pytestmark = pytest.mark.slow
expect.set_options(timeout=20_000)  # a loaded 2-core machine may take seconds to answer a search
SCREENSHOTS = os.environ.get("RAGD_SCREENSHOTS")  # read on import, before each test's isolation unsets RAGD_*
WIDE, NARROW = ViewportSize(width=1200, height=800), ViewportSize(width=390, height=844)
TOKEN = "ui-token-5c0f1e2d3b4a"
REBIND = "rebind.test"  # a name of another site that resolves to the agent's address (DNS rebinding)
POISON = "Wi-Fi"  # a text the embeddings API is made to answer with a zero vector (a passing fault)
HUNDREDS = 60  # documents added while the overview is watched
NUMBER = re.compile(r"^\d+$")

PRINTER = """# Office printer

The office printer (a Brother HL-L3270) sits by the kitchen. It prints on both sides by default: choose
"one-sided" in the print dialog for labels and envelopes. Jobs wait in its queue for two hours, then they are
dropped.

## Paper

Load A4 paper with the short edge first, and fan the stack before loading it. The tray takes 250 sheets.
Envelopes and labels go through the manual feed slot at the back, one at a time, printed side up.

## Jams

A jam in the duplexer shows the code E-71. Open the rear door, pull the duplexer out and remove the torn
sheet, then push the duplexer back until it clicks. A jam in the tray (E-70) is cleared from the front.
"""
CORPUS = {
    "notes/router.md": "# Router reset\n\nIf the router cannot reach the network, hold the reset button for "
    "ten seconds, then wait until the light turns green.\n",
    "notes/backup.md": "# Backups\n\nThe NAS copies every laptop each night at 02:00. Restore a file from "
    "the web console under Snapshots.\n",
    "manuals/printer.md": PRINTER,
    "笔记/路由器.md": "# 路由器重置\n\n如果路由器无法连接网络，请按住复位按钮十秒钟，然后等待指示灯变绿。\n",
    "笔记/会议纪要.md": "# 周一会议纪要\n\n讨论了新办公室的网络布线和打印机采购。下次会议在周五。\n",
    "notes/flaky.md": "# Wi-Fi\n\nThe guest network is called Visitors; its password is on the fridge.\n",
    "notes/empty.md": "",
}
BROKEN = ("scans/broken.pdf", "scans/old-contract.docx")  # random bytes: FAILED, until a new version comes


@dataclass(frozen=True)
class Site:
    """An agent serving the page without a token (every visitor is its owner), on a root of CORPUS."""

    agent: AgentProcess
    api: FakeOpenAI
    root: Path
    url: str  # the page: http://127.0.0.1:PORT/ui/

    def doc(self, rel: str, **params: Any) -> str:
        return f"{self.url}doc?{urlencode({'path': str(self.root / rel), **params})}"


class Screenshots:
    """Pictures of the views for the docs, saved only when RAGD_SCREENSHOTS names a directory."""

    def __init__(self, directory: str | None) -> None:
        self.dir = Path(directory) if directory else None

    def take(self, page: Page, name: str, *, height: int | None = None) -> None:
        """The window's picture as DIR/NAME.png (the window made `height` px high first, if given)."""
        if self.dir is None:
            return
        if height is not None:
            page.set_viewport_size(ViewportSize(width=(page.viewport_size or WIDE)["width"], height=height))
        self.dir.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=self.dir / f"{name}.png", animations="disabled")


def write_corpus(root: Path, *, debian: bool) -> None:
    for rel, text in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "scans").mkdir()
    for n, rel in enumerate(BROKEN):
        (root / rel).write_bytes(random.Random(n).randbytes(4096))
    if debian:
        copy_debian_readmes(root / "debian", 8)


def copy_debian_readmes(dest: Path, count: int) -> None:
    """Up to `count` of the machine's plain-text package READMEs, as PACKAGE-README….txt (for the screenshots
    only: what /usr/share/doc holds differs from machine to machine)."""
    dest.mkdir()
    for path in sorted(Path("/usr/share/doc").glob("*/README*")):
        if count and path.is_file() and path.suffix != ".gz" and 400 < path.stat().st_size < 40_000:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            (dest / f"{path.parent.name}-{path.name}.txt").write_text(text, encoding="utf-8")
            count -= 1


def start_agent(base: Path, root: Path, config_text: str) -> AgentProcess:
    """`ragd run ROOT` with HOME and XDG_* of its own under `base`, ready and idle."""
    (base / "agent-home").mkdir()
    (base / "ragd.toml").write_text(config_text)
    env = environ({**isolation(base / "agent-home"), "RAGD_CONFIG": str(base / "ragd.toml")})
    agent = AgentProcess(base / "agent.log", str(root), env=env)
    try:
        agent.wait_ready()
        agent.wait_idle()
    except BaseException:
        agent.kill()
        raise
    return agent


# -- fixtures -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Chromium for the module (first: without it the tests skip before any agent starts), with a HOME of its own;
    REBIND resolves to 127.0.0.1."""
    home = tmp_path_factory.mktemp("browser-home")
    with chromium(env=environ(isolation(home)), args=[f"--host-resolver-rules=MAP {REBIND} 127.0.0.1"]) as b:
        yield b


@pytest.fixture(scope="module")
def shots() -> Screenshots:
    return Screenshots(SCREENSHOTS)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, shots: Screenshots) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("web-ui", numbered=False)  # short paths in the screenshots
    root = base / "Documents"
    write_corpus(root, debian=shots.dir is not None)
    with FakeOpenAI(dim=256, mode="words") as api:
        # small batches, one at a time: added files are indexed a few at a time while the overview is watched;
        # short passages: a document's view shows several at once
        config = api_config_text(api, watch=FAST_WATCH, batch_size=4, concurrency=1)
        config += "\n[splitter]\nchunk_size = 400\nchunk_overlap = 40\n"
        agent = start_agent(base, root, config)
        try:
            yield Site(agent, api, root, agent.call("status")["mcp"]["ui_url"])
        finally:
            agent.kill()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """An agent whose page asks for a token ([mcp] token)."""
    base = tmp_path_factory.mktemp("web-ui-token", numbered=False)
    root = base / "Documents"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "router.md").write_text(CORPUS["notes/router.md"])
    with FakeOpenAI(dim=8) as api:
        config = api_config_text(api).replace("[mcp]\n", f'[mcp]\ntoken = "{TOKEN}"\n')
        agent = start_agent(base, root, config)
        try:
            yield Site(agent, api, root, agent.call("status")["mcp"]["ui_url"])
        finally:
            agent.kill()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page of a new browser context (no cookies), 1200 px wide, light colours."""
    context = browser.new_context(viewport=WIDE, locale="en-GB", color_scheme="light", device_scale_factor=1)
    context.set_default_timeout(20_000)
    try:
        yield context.new_page()
    finally:
        context.close()


# -- helpers --------------------------------------------------------------------------------------------------------
def shown_int(page: Page, selector: str) -> int:
    return int(page.inner_text(selector).strip())


def indexed_count(page: Page, root: Path) -> int:
    """The overview's "Indexed" figure for `root`."""
    return int(page.locator(f'tr[data-root="{root}"] td.num').first.inner_text().strip())


def overflow(page: Page) -> int:
    """How many CSS pixels the page is wider than the window (0: it fits, nothing to scroll sideways)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def search_url(site: Site, query: str, **params: str) -> str:
    return f"{site.url}search?{urlencode({'q': query, **params})}"


# -- loading, searching, opening ------------------------------------------------------------------------------------
def test_the_overview_loads_and_leads_to_a_failed_file_and_its_reason(
    page: Page, site: Site, shots: Screenshots
) -> None:
    seen = Watched(page)
    page.goto(site.url)
    expect(page).to_have_title("Overview · ragd")
    expect(page.locator("#agent-state")).to_have_text("idle")
    expect(page.locator("#live")).to_have_attribute("data-updated", NUMBER)  # a live update came
    status = site.agent.call("status")
    assert shown_int(page, "#chunks") == status["index"]["chunks"] > 0
    files = status["roots"][0]["files"]
    assert files["FAILED"] == len(BROKEN)
    assert indexed_count(page, site.root) == files["EMBEDDED"]
    expect(page.locator("#verify")).to_contain_text("consistent")

    failed = page.locator(f'tr[data-root="{site.root}"] a.bad')  # the root's failed count, a link
    expect(failed).to_have_text(str(files["FAILED"]))
    failed.click()
    expect(page).to_have_url(f"{site.url}failures?{urlencode({'state': 'FAILED', 'root': str(site.root)})}")
    broken = site.root / "scans" / "broken.pdf"
    row = page.locator(f'tr[data-path="{broken}"]')
    expect(row.locator(".badge.failed")).to_have_text("failed")
    expect(row.locator("td.reason")).to_have_text(
        "corrupt PDF: Failed to load document (PDFium: Data format error)."
    )
    expect(row).to_contain_text("when the file changes")  # not retried by time: only a new version can help
    expect(page.locator("tr[data-path] .badge.skipped")).to_have_count(0)  # the filter: failed ones only
    expect(page.locator("#problem-count")).to_have_text(f"{len(BROKEN)} files")

    page.goto(f"{site.url}failures")  # every problem: the empty file is skipped, with its reason
    empty = page.locator(f'tr[data-path="{site.root / "notes" / "empty.md"}"]')
    expect(empty.locator(".badge.skipped")).to_have_text("skipped")
    expect(empty.locator("td.reason")).to_have_text("empty file (0 bytes)")
    expect(page.locator("table.problems tbody tr")).to_have_count(1 + len(BROKEN))
    shots.take(page, "failures")

    page.locator(f'tr[data-path="{broken}"] td.path a').click()  # the document view of the failed file
    expect(page.locator("#doc-state")).to_have_text("failed")
    expect(page.locator("#doc-error")).to_contain_text("corrupt PDF: Failed to load document")
    assert seen.problems() == []


def test_a_search_opens_its_result_at_the_passage(page: Page, site: Site, shots: Screenshots) -> None:
    page.goto(f"{site.url}search")
    expect(page.locator("#q")).to_be_focused()
    page.fill("#q", "duplexer jam")
    page.press("#q", "Enter")
    expect(page).to_have_url(re.compile(r"/ui/search\?q=duplexer\+jam"))
    expect(page.locator("#result-count")).to_contain_text("results in")
    first = page.locator("li.result").first
    expect(first.locator("a.open")).to_have_text("manuals/printer.md")
    expect(first.locator(".heading")).to_contain_text("Jams")
    expect(first.locator(".where")).to_contain_text("lines")
    marks = first.locator(".snippet mark").all_inner_texts()
    assert {m.lower() for m in marks} >= {"duplexer", "jam"}, marks

    href = first.locator("a.open").get_attribute("href") or ""
    chunk = int(re.fullmatch(r".*[?&]chunk=(\d+)#chunk-(\d+)", href).group(1))  # type: ignore[union-attr]
    assert href.endswith(f"#chunk-{chunk}") and chunk > 0  # the third section: not the first passage
    first.locator("a.open").click()
    expect(page).to_have_url(re.compile(rf"/ui/doc\?.*#chunk-{chunk}$"))
    expect(page.locator("h1")).to_have_text("printer.md")
    expect(page.locator("#doc-state")).to_have_text("embedded")
    expect(page.locator("#doc-id")).to_have_text(re.compile(r"^[0-9a-f-]{36}$"))
    expect(page.locator("ol.events li").first).to_contain_text("created")
    target = page.locator(f"li#chunk-{chunk}")
    expect(target).to_have_class(re.compile(r"\btarget\b"))
    expect(target).to_be_focused()
    expect(target).to_be_in_viewport()
    assert "duplexer" in [m.lower() for m in target.locator(".content mark").all_inner_texts()]
    expect(page.locator("li.chunk.target")).to_have_count(1)
    raw = page.get_by_role("link", name="Open the file")
    printer = site.root / "manuals" / "printer.md"
    expect(raw).to_have_attribute("href", f"/ui/raw?{urlencode({'path': str(printer)})}")
    shots.take(page, "document", height=1100)  # the whole document: its facts, history and passages


def test_a_chinese_query_finds_the_chinese_document_with_its_words_marked(
    page: Page, site: Site, shots: Screenshots
) -> None:
    page.goto(search_url(site, "路由器 复位"))
    chinese = page.locator("li.result").filter(has=page.locator("a.open", has_text="笔记/路由器.md"))
    expect(chinese).to_have_count(1)  # (the English router note may come first: the search is cross-lingual)
    marks = chinese.locator(".snippet mark").all_inner_texts()
    assert marks and all(set(m) <= set("路由器复位") for m in marks), marks  # only the query's words
    assert {"复位"} <= set(marks) and any("路由" in m for m in marks), marks

    page.goto(search_url(site, "路由器 reset"))  # both languages in one question: both documents, both marked
    results = page.locator("li.result")
    expect(results.locator("a.open").filter(has_text="笔记/路由器.md")).to_have_count(1)
    english = results.filter(has=page.locator("a.open", has_text="notes/router.md"))
    assert "reset" in [m.lower() for m in english.locator(".snippet mark").all_inner_texts()]
    shots.take(page, "search")


def test_a_chinese_word_of_the_query_is_marked_whole(page: Page, site: Site) -> None:
    page.goto(search_url(site, "路由器", mode="keyword"))
    first = page.locator("li.result").first
    expect(first.locator("a.open")).to_have_text("笔记/路由器.md")
    assert "路由器" in first.locator(".snippet mark").all_inner_texts()


# -- the keyboard, small screens, the console -----------------------------------------------------------------------
def test_keyboard_only_search_and_open(page: Page, site: Site) -> None:
    page.goto(site.url)
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("/")
    expect(page.locator("#quick-q")).to_be_focused()
    page.keyboard.type("duplexer")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{site.url}search?q=duplexer")
    expect(page.locator("li.result").first).to_be_visible()
    expect(page.locator("#q")).to_be_focused()  # the results page puts the keyboard in its search box
    for _ in range(10):  # the search box, its button, the options, then the first result
        if page.evaluate("document.activeElement === document.querySelector('a.open')"):
            break
        page.keyboard.press("Tab")
    expect(page.locator("a.open").first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/doc\?.*#chunk-\d+$"))
    chunk = page.url.rsplit("#chunk-", 1)[1]
    target = page.locator(f"li#chunk-{chunk}")
    expect(target).to_be_focused()
    expect(target).to_have_class(re.compile(r"\btarget\b"))
    expect(target).to_contain_text("duplexer")


def views(site: Site) -> dict[str, str]:
    return {
        "overview": site.url,
        "failures": f"{site.url}failures",
        "search": search_url(site, "路由器 reset"),
        "search-files": search_url(site, "printer", files="1", path=str(site.root / "manuals")),
        "document": site.doc("笔记/路由器.md", q="路由器", chunk="0") + "#chunk-0",
        "document-failed": site.doc("scans/broken.pdf"),
        "changes": f"{site.url}changes",
        "login": f"{site.url}login",
    }


def test_a_narrow_screen_never_scrolls_sideways(page: Page, site: Site, shots: Screenshots) -> None:
    page.set_viewport_size(NARROW)
    wide = {}
    for name, url in views(site).items():
        page.goto(url)
        if name == "overview":
            expect(page.locator("#live")).to_have_attribute("data-updated", NUMBER)
        if name in ("overview", "search"):
            shots.take(page, f"{name}-narrow")
        if overflow(page) > 0:
            wide[name] = overflow(page)
    assert wide == {}, f"wider than {NARROW['width']} px by: {wide}"


def test_no_view_logs_an_error_or_breaks_its_content_security_policy(
    page: Page, site: Site, shots: Screenshots
) -> None:
    seen = Watched(page)
    for name, url in views(site).items():
        page.goto(url)
        if name == "overview":
            expect(page.locator("#live")).to_have_attribute("data-updated", NUMBER)
        if name == "changes":
            expect(page.locator("table.changes tbody tr").first).to_contain_text(":")
            shots.take(page, "changes")
        assert seen.problems() == [], name
    response = page.goto(site.url)
    assert response is not None
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "unsafe-inline" not in csp


# -- live progress --------------------------------------------------------------------------------------------------
def test_the_overview_follows_files_being_added_without_a_reload(
    page: Page, site: Site, shots: Screenshots
) -> None:
    page.goto(site.url)
    live = page.locator("#live")
    expect(live).to_have_attribute("data-updated", NUMBER)
    expect(page.locator("#phase")).to_have_text("up to date")
    page.evaluate("window.__sameDocument = true")  # gone if the page were loaded again
    chunks, indexed = shown_int(page, "#chunks"), indexed_count(page, site.root)
    updated = live.get_attribute("data-updated")

    site.api.delay = 0.25  # each request of 4 texts: the new files are indexed over a few seconds
    seen: set[tuple[int, int, str]] = set()

    def shown(added: int) -> bool:
        now = (shown_int(page, "#chunks"), indexed_count(page, site.root), page.inner_text("#phase"))
        if now not in seen and chunks < now[0] < chunks + HUNDREDS and now[2] == "working on changes":
            shots.take(page, "overview")  # the latest one taken while indexing stays
        seen.add(now)
        return now[:2] == (chunks + added, indexed + added)

    # in three waves, each waited for: the page must show the counts in between, however the agent batches a wave
    wave = HUNDREDS // 3
    try:
        for first in range(0, HUNDREDS, wave):
            for n in range(first, first + wave):
                write_doc(site.root / "incoming" / f"batch-{n % 6}" / f"note-{n}.md", f"incoming{n}x")
            poll(
                lambda added=first + wave: shown(added),
                timeout=90,
                what=f"the overview to show {first + wave} more documents",
            )
    finally:
        site.api.delay = 0.0
    during = sorted({c for c, _, _ in seen if chunks < c < chunks + HUNDREDS})
    assert during, seen  # counts between the old and the final one: shown while the files were being indexed
    assert "working on changes" in {phase for _, _, phase in seen}
    expect(page.locator("#phase")).to_have_text("up to date")
    assert page.evaluate("window.__sameDocument") is True
    assert live.get_attribute("data-updated") != updated
    assert live.get_attribute("data-stale") is None
    site.agent.wait_idle()


# -- a token --------------------------------------------------------------------------------------------------------
def test_a_token_link_signs_in_and_leaves_no_token_in_the_address(
    page: Page, guarded: Site, shots: Screenshots
) -> None:
    page.goto(f"{guarded.url}failures")
    expect(page).to_have_url(f"{guarded.url}login?next=%2Fui%2Ffailures")
    expect(page.locator("#token")).to_be_focused()
    shots.take(page, "login")

    response = page.goto(f"{guarded.url}search?q=reset&token=not-the-token")
    assert response is not None and response.status == 401
    expect(page.locator("p.error")).to_contain_text("not one this agent accepts")

    page.goto(f"{guarded.url}search?q=reset&token={TOKEN}")
    # the token is not left in the address (nor in the history)
    expect(page).to_have_url(f"{guarded.url}search?q=reset")
    expect(page.locator("li.result a.open").first).to_have_text("notes/router.md")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    cookie = next(c for c in page.context.cookies() if c["name"] == "ragd_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and TOKEN not in cookie["value"]
    page.goto(guarded.url)
    expect(page.locator("#agent-state")).to_have_text("idle")  # signed in: no sign-in page any more


def test_the_sign_in_form_refuses_a_wrong_token_and_accepts_the_right_one(page: Page, guarded: Site) -> None:
    page.goto(f"{guarded.url}failures")
    page.fill("#token", "not-the-token")
    with page.expect_navigation() as answer:
        page.press("#token", "Enter")
    assert answer.value is not None and answer.value.status == 401, answer.value and answer.value.status
    expect(page.locator("p.error")).to_have_text("That is not a token this agent accepts.")
    page.fill("#token", TOKEN)
    page.press("#token", "Enter")
    expect(page).to_have_url(f"{guarded.url}failures")
    expect(page.locator("#problem-count")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{guarded.url}login")
    page.goto(guarded.url)
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))


# -- retrying a failed file -----------------------------------------------------------------------------------------
def test_retry_now_runs_a_failed_file_again(page: Page, site: Site) -> None:
    flaky, broken = site.root / "notes" / "flaky.md", site.root / "scans" / "broken.pdf"
    site.api.poison(POISON)  # a passing fault of the embeddings API: the edited note fails
    try:
        flaky.write_text(CORPUS["notes/flaky.md"] + "\nAsk at the desk for the 5 GHz one.\n")
        poll(lambda: any(f["path"] == str(flaky) for f in site.agent.call("status")["roots"][0]["failures"]),
             what="the edited note to fail")  # fmt: skip
        page.goto(f"{site.url}failures?state=FAILED")
        row = page.locator(f'tr[data-path="{flaky}"]')
        expect(row.locator("td.reason")).to_contain_text(
            "returned 2 zero vectors"
        )  # its chunk's and its lead's
    finally:
        site.api.unpoison()  # the fault has passed: the next run embeds it (its own retry is a minute away)
    with page.expect_navigation() as answer:
        row.get_by_role("button", name="Retry flaky.md now").click()
    assert answer.value is not None and answer.value.status == 200, answer.value and answer.value.status
    expect(page.locator(".notice")).to_contain_text(f"Retrying {flaky} now")

    def embedded() -> bool:
        page.goto(site.doc("notes/flaky.md"))
        return page.inner_text("#doc-state") == "embedded"

    poll(embedded, timeout=30, what="the note to be embedded after Retry now")
    page.goto(f"{site.url}failures?state=FAILED")
    expect(page.locator(f'tr[data-path="{flaky}"]')).to_have_count(0)

    # a file still broken is tried again, and stays FAILED with its reason
    entry = sidecar.entry_path(broken.parent, broken.name)
    before = entry.read_bytes()
    page.locator(f'tr[data-path="{broken}"]').get_by_role("button", name="Retry broken.pdf now").click()
    expect(page.locator(".notice")).to_contain_text(f"Retrying {broken} now")
    poll(lambda: entry.read_bytes() != before, what="broken.pdf to be read again")
    site.agent.wait_idle()
    page.reload()
    row = page.locator(f'tr[data-path="{broken}"]')
    expect(row.locator(".badge.failed")).to_have_text("failed")
    expect(row.locator("td.reason")).to_contain_text("corrupt PDF")


# -- another site ---------------------------------------------------------------------------------------------------
class OtherSite:
    """Someone else's web site on another port of 127.0.0.1, serving the pages given (path -> HTML)."""

    def __init__(self, pages: dict[str, str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages.get(self.path, "").encode()
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> OtherSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def other_pages(agent: str, path: Path) -> dict[str, str]:
    post = f"""<!doctype html><title>You won</title>
<form id="f" method="post" action="{agent}retry"><input name="path" value="{path}">
<input name="back" value="/ui/failures"></form>
<script>document.getElementById("f").submit();</script>"""
    read = f"""<!doctype html><title>Reader</title><pre id="out"></pre>
<script>
const out = (line) => {{ document.getElementById("out").textContent += line + "\\n"; }};
fetch("{agent}failures", {{credentials: "include"}})
  .then((r) => r.text()).then((t) => out("read " + t.length), (e) => out("cors " + e.name))
  .then(() => fetch("{agent}failures", {{mode: "no-cors", credentials: "include"}}))
  .then((r) => out("no-cors " + r.type + " " + r.status), (e) => out("no-cors " + e.name))
  .then(() => out("done"));
</script>"""
    # a page that hides where it comes from: its form is sent with `Origin: null`
    hidden = post.replace("<title>", '<meta name="referrer" content="no-referrer"><title>')
    return {"/post.html": post, "/post-no-referrer.html": hidden, "/read.html": read}


def test_another_site_can_neither_send_a_form_nor_read_a_page(page: Page, site: Site) -> None:
    broken = site.root / "scans" / "broken.pdf"
    entry = sidecar.entry_path(broken.parent, broken.name)
    before = entry.read_bytes()
    with OtherSite(other_pages(site.url, broken)) as other:
        with page.expect_navigation(url=f"{site.url}retry") as answer:
            page.goto(f"{other.url}/post.html")
        assert answer.value is not None and answer.value.status == 403
        expect(page.locator("body")).to_contain_text(f"a page of {other.url} may not use the agent's page")
        with page.expect_navigation(url=f"{site.url}retry") as answer:
            page.goto(f"{other.url}/post-no-referrer.html")
        assert answer.value is not None and answer.value.status == 403

        page.goto(f"{other.url}/read.html")
        expect(page.locator("#out")).to_contain_text("done")
        assert page.inner_text("#out").split("\n")[:2] == ["cors TypeError", "no-cors TypeError"]
    site.agent.wait_idle()
    assert entry.read_bytes() == before  # nothing was retried: the file's entry is as it was

    port = site.url.split(":")[2].split("/")[0]
    response = page.goto(f"http://{REBIND}:{port}/ui/")  # a name that points at the agent: not its page
    assert response is not None and response.status == 421
