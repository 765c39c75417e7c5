"""Headless Chromium for the web page's tests: the system's own (Debian's `chromium` package) driven by Playwright.
Nothing is ever downloaded: Playwright is only pointed at the executable that is there.

    with chromium(env=environ(isolation(home))) as browser:    # e.g. in a module-scoped fixture
        page = browser.new_page()
        seen = Watched(page)                                    # console errors, uncaught errors, CSP violations
        ...
        assert seen.problems() == []

The executable is $RAGD_CHROMIUM, else /usr/bin/chromium. Without it (or without Playwright) the test is skipped,
saying why, unless RAGD_REQUIRE_BROWSER=1 (CI sets it): then it fails, so the browser tests never silently don't
run there. The variables are read when `chromium()` is entered: enter it in a fixture wider than one test (those
start before tests/conftest.py's per-test isolation unsets every RAGD_* variable).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page

DEFAULT_EXECUTABLE = "/usr/bin/chromium"
ARGS = (
    "--no-sandbox",  # tests may run as root (CI containers), where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
# Collects what the page reports about itself; installed before any script of the page runs.
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


def executable() -> Path | None:
    """The Chromium to drive ($RAGD_CHROMIUM, else the system's), or None when it is not there."""
    path = Path(os.environ.get("RAGD_CHROMIUM") or DEFAULT_EXECUTABLE)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def unavailable(reason: str) -> NoReturn:
    """Skip the test for `reason`, or fail it where a browser is required (RAGD_REQUIRE_BROWSER=1)."""
    if os.environ.get("RAGD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, and RAGD_REQUIRE_BROWSER=1 requires the browser tests to run", pytrace=False)
    pytest.skip(f"{reason} (install Debian's chromium, or set RAGD_CHROMIUM to a Chromium executable)")


@contextmanager
def chromium(*, env: Mapping[str, str] | None = None, args: Sequence[str] = ()) -> Iterator[Browser]:
    """Headless Chromium (ARGS and `args`), run with environment `env`; closed at the end."""
    path = executable()
    if path is None:
        unavailable(f"no Chromium at {os.environ.get('RAGD_CHROMIUM') or DEFAULT_EXECUTABLE}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (it is in the dev extra: pip install -e '.[dev]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(path), headless=True, args=[*ARGS, *args],
                                     env=dict(env) if env is not None else None)  # fmt: skip
        try:
            yield browser
        finally:
            browser.close()


class Watched:
    """A page's console errors, uncaught exceptions and Content-Security-Policy violations, as they happen."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.add_init_script(CSP_LISTENER)
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught on {page.url}: {exc}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console error on {self.page.url}: {message.text}")

    def problems(self) -> list[str]:
        """Everything reported so far, with the CSP violations of the page shown now."""
        violations: Any = self.page.evaluate("window.__cspViolations || []")
        return [*self.errors, *(f"CSP violation on {self.page.url}: {v}" for v in violations)]
