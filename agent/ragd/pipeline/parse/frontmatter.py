"""Front matter of a Markdown file: YAML between `---` lines, or TOML between `+++` lines, at the very top.

YAML is read with PyYAML's base loader: every scalar stays the text it is written as (`version: 2.10` is "2.10",
not the number 2.1; `date: 2024-03-01` is that text, made ISO 8601 by metadata.scalar), and no tag can construct
an object. The block is at most MAX_LINES lines and MAX_BYTES long. A block that does not parse, or is not a
mapping, gives a note and no metadata: the file itself is indexed as always (its text keeps the block).
"""

from __future__ import annotations

import tomllib
from typing import Any

from ...model import Extracted
from ..metadata import normalise

MAX_LINES = 500
MAX_BYTES = 64 * 1024
ORIGIN = "front matter"


def block(text: str) -> tuple[str, str] | None:
    """("yaml" | "toml", the block's text) of a front matter at the top of `text`; None when there is none."""
    first, _, rest = text.partition("\n")
    fence = first.rstrip()
    if fence not in ("---", "+++"):
        return None
    lines = rest.split("\n", MAX_LINES)[:MAX_LINES]
    ends = ("---", "...") if fence == "---" else ("+++",)
    for i, line in enumerate(lines):
        if line.rstrip() in ends:
            return ("yaml" if fence == "---" else "toml"), "\n".join(lines[:i])
    return None


def body(text: str) -> str:
    """`text` after its front matter (all of it when it has none)."""
    found = block(text)
    if found is None:
        return text
    skip = found[1].count("\n") + (3 if found[1] else 2)  # the opening line, the block, the closing line
    return text.split("\n", skip)[-1] if text.count("\n") >= skip else ""


def read(text: str) -> Extracted | None:
    """The metadata of the front matter of `text`, with notes for what was left out; None without one."""
    found = block(text)
    if found is None:
        return _unclosed(text)
    kind, body = found
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return Extracted(notes=(f"{ORIGIN}: larger than {MAX_BYTES // 1024} KiB; not read",))
    try:
        data = _load(kind, body)
    except Exception as err:  # the parsers' errors (yaml.YAMLError, TOMLDecodeError, RecursionError...)
        detail = " ".join(str(err).split())[:200]
        return Extracted(notes=(f"{ORIGIN}: not valid {kind.upper()} ({detail}); not read",))
    if data is None:
        return None
    if not isinstance(data, dict):
        return Extracted(notes=(f"{ORIGIN}: a {type(data).__name__}, not a mapping of keys; not read",))
    return normalise(data, ORIGIN)


def _load(kind: str, body: str) -> Any:
    if kind == "toml":
        return tomllib.loads(body)
    import yaml

    loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    return yaml.load(body, Loader=loader)  # the base loader makes only str, list and dict


def _unclosed(text: str) -> Extracted | None:
    """A note for a front matter that opens and never closes (within MAX_LINES lines)."""
    first = text.partition("\n")[0].rstrip()
    if first in ("---", "+++") and text.count("\n") > 0:
        return Extracted(notes=(f"{ORIGIN}: opened with {first!r} but not closed within {MAX_LINES} lines; "
                                "not read",))  # fmt: skip
    return None
