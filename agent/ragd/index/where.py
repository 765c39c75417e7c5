"""Metadata filters (`--where tag=invoice`, `--where version^=2.`): their syntax, and how the index holds and
matches a document's fields.

Each chunk carries its document's fields as one string of terms, `|key=value|key=value|…|`, each value case-folded
and encoded so that it holds none of the characters either backend's filter language treats specially: an ASCII
character outside `[A-Za-z0-9 .,:;!?@#$&()*+/<>[\\]^{}-]` (the quote marks, the backslash, `%`, `_`, `|`, `=`, `~`,
control characters) becomes `~` and its two hex digits; any other character stands for itself. The encoding of a
prefix is the prefix of the encoding (each character is encoded alone, and no code is the beginning of another),
so both matches are one `LIKE` pattern built from encoded text only, with nothing in it to escape:

- `key=value`: `'%|key=<value>|%'`, the value exactly (after case folding);
- `key^=prefix`: `'%|key=<prefix>%'`, values starting with the prefix (the `|` before the key and the `=` after
  it keep the match inside one term of that key).

Measured on zvec 0.8 and Milvus Lite 3.2 (tests/contract): leading-wildcard `LIKE` on a field without an index
matches as expected, CJK and emoji included; an escaped backslash never occurs in these patterns (zvec's scan
ignores it before a wildcard: docs/zvec-notes.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import RagdError
from ..metakeys import canonical_key
from ..pipeline.metadata import term

_SYNTAX = re.compile(r"^\s*([^=^\s]+)\s*(\^?=)(.*)$", re.DOTALL)
MAX_WHERE = 16  # filters in one search
MAX_WHERE_CHARS = 500


def terms(fields: Mapping[str, Sequence[str]]) -> str:
    """A document's fields as the index's filter string: `|key=value|…|`, "" when it has none."""
    found = [term(k, v) for k, values in fields.items() for v in values]
    return "|" + "|".join(found) + "|" if found else ""


@dataclass(frozen=True)
class Where:
    """One metadata filter: `key` equals `value`, or (prefix) starts with it; both after case folding."""

    key: str
    value: str
    prefix: bool = False

    def term(self) -> str:
        """The encoded `key=value` (a prefix of the terms it matches, when `prefix`)."""
        return term(self.key, self.value)

    def pattern(self) -> str:
        """The LIKE pattern (nothing in it needs escaping: see the module docstring)."""
        encoded = term(self.key, self.value)
        return f"%|{encoded}%" if self.prefix else f"%|{encoded}|%"

    def __str__(self) -> str:
        return f"{self.key}{'^=' if self.prefix else '='}{self.value}"


def usage(message: str) -> RagdError:
    return RagdError(message, "write it as KEY=VALUE (exact) or KEY^=PREFIX (starts with), e.g. tag=invoice, "
                     "version^=2.; see docs/metadata.md", code="usage")  # fmt: skip


def parse_where(raw: str) -> Where:
    """`tag=invoice`, `product = X`, `version^=2.` -> Where; RagdError(code="usage") otherwise. Keys are
    case-insensitive and take their aliases (`tag` is `tags`, `date` is `created`)."""
    if not isinstance(raw, str):
        raise usage(f"a metadata filter must be text, not {type(raw).__name__}")
    m = _SYNTAX.match(raw)
    if m is None or len(raw) > MAX_WHERE_CHARS:
        raise usage(f"not a metadata filter: {raw[:80]!r}")
    key = canonical_key(m.group(1))
    if key is None:
        raise usage(f"{m.group(1)[:80]!r} is not a metadata key (letters, digits, _ . -)")
    value, prefix = m.group(3).strip(), m.group(2) == "^="
    if not value and not prefix:
        raise usage(f"the filter {raw!r} gives no value (KEY^= matches every document that has the key)")
    return Where(key, value, prefix)


def parse_all(raw: Iterable[str]) -> tuple[Where, ...]:
    found = tuple(dict.fromkeys(parse_where(r) for r in raw))
    if len(found) > MAX_WHERE:
        raise usage(f"{len(found)} metadata filters; at most {MAX_WHERE}")
    return found


def matches(fields: Mapping[str, Sequence[str]], where: Where) -> bool:
    """The Python twin of `pattern` (for tests and re-checks)."""
    values = fields.get(where.key, ())
    want = where.value.casefold()
    return any(v.casefold().startswith(want) if where.prefix else v.casefold() == want for v in values)
