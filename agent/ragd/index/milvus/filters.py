"""Filter expressions for Milvus, built only from escaped values, with no `like` at all.

Milvus's expression language reads a double-quoted string with C escapes (`\\"`, `\\\\`, `\\n`, `\\r`; a raw
line break ends the literal), and gives `%` and `_` a meaning only inside `like`. So a value is written as an
escaped literal compared with `==`, `in`, `>=` or `<`, never as a pattern: "this directory or below" is
`f == "d" or (f >= "d/" and f < "d0")` ("0" is the character after "/", so the range holds exactly the strings
that start with "d/", in code-point and in UTF-8 byte order alike; never `dz`, `d_x` or `d%`). Expression
templates (`filter_params`) would need no escaping, but Milvus Lite 3.2 does not read them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}
_SPECIAL = re.compile(r'[\\"\n\r]')


def literal(value: str) -> str:
    """`value` as a Milvus string literal that reads back as exactly `value`."""
    if not isinstance(value, str):
        raise TypeError(f"filter value must be a string, not {type(value).__name__}")
    return '"' + _SPECIAL.sub(lambda m: _ESCAPES[m.group(0)], value) + '"'


def _field(name: str) -> str:
    if not _FIELD.match(name):
        raise ValueError(f"not a field name: {name!r}")
    return name


def equals(field: str, value: str) -> str:
    return f"{_field(field)} == {literal(value)}"


def like(field: str, pattern: str) -> str:
    """`field like "pattern"` for a pattern built from where.py's encoded text only (its `%` are wildcards; it holds
    no quote, backslash, `_` or line break, so it reads back unchanged). Refuses any other: `like` is never given
    a user's value as it is."""
    if _SPECIAL.search(pattern) or "_" in pattern:
        raise ValueError(f"not a safe like pattern: {pattern!r}")
    return f"{_field(field)} like {literal(pattern)}"


def any_of(field: str, values: Iterable[str]) -> str:
    unique = list(dict.fromkeys(values))
    if not unique:
        raise ValueError("any_of needs at least one value")
    return f"{_field(field)} in [{', '.join(literal(v) for v in unique)}]"


def under(field: str, path: str) -> str:
    """`field` is `path` itself or a path below it: `/a` matches `/a` and `/a/x`, never `/ab` or `/a_b`."""
    wide = below(field, path)
    base = path.rstrip("/")
    return wide if not base else f"({_field(field)} == {literal(base)} or {wide})"


def below(field: str, path: str) -> str:
    """`field` is a path below the directory `path`, never `path` itself: `/a` matches `/a/x`, not `/a` or `/ab`."""
    if not path.startswith("/"):
        raise ValueError(f"a path filter needs an absolute path, not {path!r}")
    base = path.rstrip("/")
    name = _field(field)
    return f"({name} >= {literal(base + '/')} and {name} < {literal(base + '0')})"


def under_any(field: str, paths: Iterable[str]) -> str:
    terms = [under(field, p) for p in dict.fromkeys(paths)]
    if not terms:
        raise ValueError("under_any needs at least one path")
    return terms[0] if len(terms) == 1 else "(" + " or ".join(terms) + ")"


def all_of(*exprs: str | None) -> str:
    parts = [e for e in exprs if e]
    if len(parts) <= 1:
        return parts[0] if parts else ""
    return " and ".join(f"({p})" for p in parts)
