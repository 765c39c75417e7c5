"""Mallard help pages (GNOME's `.page` XML) as Markdown, deterministically: what a help browser shows, as text.

`# Title`, the page's one-line description, paragraphs, `##` per section, steps and lists as Markdown lists, tables
as Markdown tables, code blocks fenced. Left out: the `<info>` block (credits, licence, revision history, the
links that build the guide pages' topic lists), comments, and images and videos with their captions. A link
without text shows the title of the page it points to, as a help browser does; of conditional content
(`if:choose`), the first branch.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

NS = "{http://projectmallard.org/1.0/}"
SKIPPED = {"info", "comment", "media", "links", "title", "desc", "include"}
CONTAINERS = {"figure", "example", "listing", "synopsis", "quote", "div", "if"}  # if:if: shown
_SPACE = re.compile(r"\s+")


def local(el: ET.Element) -> str:
    return el.tag.rsplit("}", 1)[-1]


def page_title(root: ET.Element, titles: dict[str, str] | None = None) -> str:
    title = root.find(f"{NS}title")
    return inline(title, titles or {}) if title is not None else ""


def inline(el: ET.Element, titles: dict[str, str]) -> str:
    """The element's text on one line, inline markup resolved."""
    return _SPACE.sub(" ", _inline(el, titles)).strip()


def _inline(el: ET.Element, titles: dict[str, str]) -> str:
    name = local(el)
    if name in ("keyseq", "guiseq"):
        parts = [inline(c, titles) for c in el if local(c) in ("key", "gui", "link", "input", "span")]
        return ("+" if name == "keyseq" else " ▸ ").join(parts) if parts else (el.text or "")
    if name in ("comment", "media"):
        return ""
    text = (el.text or "") + "".join(_inline(c, titles) + (c.tail or "") for c in el)
    if name == "link" and not text.strip():
        target = el.get("xref", "")
        return titles.get(target.split("#")[0], target) if target else el.get("href", "")
    return text


def blocks(el: ET.Element, titles: dict[str, str], depth: int, out: list[str]) -> None:
    """Append the Markdown blocks of `el`'s children to `out`."""
    for child in el:
        block(child, titles, depth, out)


def block(el: ET.Element, titles: dict[str, str], depth: int, out: list[str]) -> None:
    name = local(el)
    if name in SKIPPED or el.tag.startswith("{http://www.w3.org/"):
        return
    if name == "choose":
        first = next(iter(el), None)
        if first is not None:
            blocks(first, titles, depth, out)
    elif name == "section":
        title = el.find(f"{NS}title")
        if title is not None:
            out.append("#" * min(depth + 1, 6) + " " + inline(title, titles))
        blocks(el, titles, depth + 1, out)
    elif name in ("list", "steps", "tree", "terms"):
        out.append("\n".join(items(el, titles, numbered=name == "steps", indent="")))
    elif name == "table":
        out.append(table(el, titles))
    elif name in ("screen", "code"):
        out.append("```\n" + "".join(el.itertext()).strip("\n") + "\n```")
    elif name == "note":
        inner: list[str] = []
        blocks(el, titles, depth, inner)
        out.append("\n>\n".join("> " + b.replace("\n", "\n> ") for b in inner))
    elif name in CONTAINERS:
        title = el.find(f"{NS}title")
        if title is not None:
            out.append(f"**{inline(title, titles)}**")
        blocks(el, titles, depth, out)
    elif text := inline(el, titles):
        out.append(text)


def items(el: ET.Element, titles: dict[str, str], numbered: bool, indent: str) -> list[str]:
    lines: list[str] = []
    number = 0
    for item in el:
        if local(item) != "item":
            continue
        number += 1
        mark = f"{number}. " if numbered else "- "
        head: list[str] = []
        nested: list[str] = []
        title = item.find(f"{NS}title")
        if title is not None:
            head.append(f"**{inline(title, titles)}**:")
        if item.text and item.text.strip():
            head.append(_SPACE.sub(" ", item.text).strip())
        for c in item:
            kind = local(c)
            if kind == "item":  # a tree's sub-item
                nested += items(_wrap(c), titles, False, indent + "  ")
            elif kind in ("list", "steps", "terms", "tree"):
                nested += items(c, titles, kind == "steps", indent + "  ")
            elif kind not in ("title", "comment", "media") and (text := inline(c, titles)):
                head.append(text)
        lines.append(indent + mark + " ".join(head))
        lines += nested
    return lines


def _wrap(item: ET.Element) -> ET.Element:
    holder = ET.Element(f"{NS}list")
    holder.append(item)
    return holder


def table(el: ET.Element, titles: dict[str, str]) -> str:
    rows = [
        [inline(cell, titles).replace("|", "\\|") for cell in row if local(cell) in ("td", "th")]
        for row in el.iter(f"{NS}tr")
    ]
    rows = [r for r in rows if r]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


def to_markdown(root: ET.Element, titles: dict[str, str]) -> str:
    out = [f"# {page_title(root, titles)}"]
    desc = root.find(f"{NS}info/{NS}desc")
    if desc is not None and (text := inline(desc, titles)):
        out.append(text)
    blocks(root, titles, 1, out)
    return "\n\n".join(b for b in out if b.strip()) + "\n"
