"""HTML to markdown with BeautifulSoup and markdownify, without importing markitdown.

`import markitdown` (or any of its converters) loads every converter's libraries: magika and onnxruntime, pandas,
openpyxl, python-pptx; 0.5 s on a quiet machine, 1.2-2.5 s on a busy one, in each parse worker that meets its first
HTML file, where a run waits for it. BeautifulSoup and markdownify, which markitdown's HTML converter is made of,
load in 0.06 s. The conversion follows what that converter does, so the markdown of a page is the same:

- scripts and styles are dropped; only the body is converted (the whole document when there is none); the title is
  the `<title>`;
- ATX headings (`## Title`);
- a link keeps its target only when it is http, https, file or relative (a `javascript:` or `mailto:` link is its
  text), with its path percent-encoded where it is not already;
- an image is `![alt](src)`, in a table cell or a heading too; one with a `data:` URI keeps only the URI's head
  (`data:image/png;base64...`);
- a page nested too deeply for markdownify's recursion is converted to its plain text instead.

Two things make it cheaper than that converter (docs/benchmarks.md): lxml's parser builds the tree, where that
converter uses Python's `html.parser` (still used for what lxml refuses, text with lone surrogates, and when lxml
is missing); and the tree's tags answer markdownify's `find_parent('pre')`, asked of every tag, by walking up
their parents instead of through BeautifulSoup's general matching (0.4 of the conversion's time). The markdown is
the same for well-formed pages (273 of 278 pages of /usr/share/doc and the development set); on malformed ones
(an unclosed `<li>` or `<p>`) lxml mends the tree as a browser does, where `html.parser` nests what follows
inside the unclosed element.
"""

from __future__ import annotations

import re
import warnings
from typing import Any
from urllib.parse import quote, urlparse, urlunparse

import markdownify
from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, Tag, XMLParsedAsHTMLWarning, builder_registry

_LXML = builder_registry.lookup("lxml") is not None
# Advice for programmers, printed once per process into the agent's log: an XHTML page is read as HTML on purpose,
# and a tiny page whose text looks like a file name or a URL is still a page.
warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)
warnings.filterwarnings("ignore", category=MarkupResemblesLocatorWarning)
_ESCAPED = re.compile(r"%[0-9A-Fa-f]{2}")
_LINK_SCHEMES = frozenset({"http", "https", "file"})


def _quote_path(path: str) -> str:
    """Percent-encode `path`, leaving the `%XX` escapes it already has as they are."""
    out, last = [], 0
    for m in _ESCAPED.finditer(path):
        out += [quote(path[last : m.start()]), m.group(0)]
        last = m.end()
    return "".join([*out, quote(path[last:])])


def _titled(title: str | None) -> str:
    """A link's or image's title as markdown puts it after the target: ` "title"` (quotes escaped), or nothing."""
    return ' "{}"'.format(title.replace('"', r"\"")) if title else ""


class _Markdown(markdownify.MarkdownConverter):
    def __init__(self) -> None:
        super().__init__(heading_style=markdownify.ATX)

    def convert_a(self, el: Any, text: str, parent_tags: set[str]) -> str:
        prefix, suffix, text = markdownify.chomp(text)  # type: ignore[attr-defined]  # (not in its stub)
        if not text:
            return ""
        if "pre" in parent_tags:  # the tags above it, up to the converted body
            return str(text)
        href, title = el.get("href"), el.get("title")
        if href:
            try:
                url = urlparse(href)
                if url.scheme and url.scheme.lower() not in _LINK_SCHEMES:
                    return f"{prefix}{text}{suffix}"
                href = urlunparse(url._replace(path=_quote_path(url.path)))
            except ValueError:
                return f"{prefix}{text}{suffix}"
        autolinks = self.options["autolinks"]  # type: ignore[attr-defined]  # (not in its stub)
        if autolinks and text.replace(r"\_", "_") == href and not title:
            return f"<{href}>"
        return f"{prefix}[{text}]({href}{_titled(title)}){suffix}" if href else str(text)

    def convert_img(self, el: Any, text: str, parent_tags: set[str]) -> str:
        alt = (el.attrs.get("alt") or "").replace("\n", " ")
        src = el.attrs.get("src") or ""
        data_src = el.attrs.get("data-src") or ""
        if data_src and (not src or src[:5].lower() == "data:"):
            src = data_src
        if src[:5].lower() == "data:":
            src = src.split(",")[0] + "..."
        title = el.attrs.get("title") or ""
        return f"![{alt}]({src}{_titled(title)})"

    def convert_input(self, el: Any, text: str, parent_tags: set[str]) -> str:
        if el.get("type") == "checkbox":
            return "[x] " if el.has_attr("checked") else "[ ] "
        return ""


class _Tag(Tag):
    def find_parent(self, name: Any = None, attrs: Any = None, **kwargs: Any) -> Any:
        """The nearest ancestor named `name` when only a plain name is asked for (markdownify asks it of every
        tag); anything else as BeautifulSoup finds it."""
        if not isinstance(name, str) or attrs or kwargs:
            return super().find_parent(name, attrs or {}, **kwargs)
        parent = self.parent
        while parent is not None and parent.name != name:
            parent = parent.parent
        return parent


def _soup(html: str) -> BeautifulSoup:
    if _LXML:
        try:
            return BeautifulSoup(html, "lxml", element_classes={Tag: _Tag})
        except ValueError:  # (UnicodeEncodeError is one) lone surrogates, which lxml cannot take
            pass
    return BeautifulSoup(html, "html.parser", element_classes={Tag: _Tag})


def html_to_markdown(html: str) -> tuple[str, str | None]:
    """(markdown, title) of an HTML document."""
    soup = _soup(html)
    for el in soup(["script", "style"]):
        el.extract()
    body = soup.find("body") or soup
    try:
        markdown = _Markdown().convert_soup(body)
    except RecursionError:
        warnings.warn("HTML nested too deeply for markdown: converted to plain text", stacklevel=2)
        markdown = body.get_text("\n", strip=True)
    title = soup.title.string if soup.title is not None else None
    return str(markdown).strip(), (str(title) if title is not None else None)
