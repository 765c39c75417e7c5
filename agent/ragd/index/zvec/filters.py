"""Filter expressions for zvec, built only from escaped values.

Measured on zvec 0.8.0 (see docs/zvec-notes.md): inside `=`/`IN` string literals a backslash is kept verbatim
except before a quote, so a value that ends in a backslash (or holds one before a quote) cannot be written there.
Inside `LIKE` patterns a backslash escapes any character (`\\\\`, `\\'`, `\\%`, `\\_`), and a pattern without
wildcards matches exactly and case-sensitively. So every value here goes through `LIKE` with every special
character escaped: equality is `f LIKE 'v'`; "this directory or below" is `f LIKE 'd' OR f LIKE 'd/%'`
(a bare `LIKE 'd%'` would also match the sibling `dz`).

One exception: when zvec scans instead of using the inverted index (it chooses per query, e.g. for an `OR`),
an escaped backslash followed later by a wildcard does not match. So `under` never puts a backslash into a
pattern: for a path holding one it returns a wider expression (see `under_is_exact`) and the caller re-checks
each match with `is_under`.

An empty filter makes `delete_by_filter` delete everything, so `for_delete` refuses one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LIKE_SPECIAL = re.compile(r"([\\%_'])")


def like_literal(value: str) -> str:
    """`value` escaped for use inside a single-quoted LIKE pattern, matching only itself."""
    if not isinstance(value, str):
        raise TypeError(f"filter value must be a string, not {type(value).__name__}")
    return _LIKE_SPECIAL.sub(r"\\\1", value)


def _field(name: str) -> str:
    if not _FIELD.match(name):
        raise ValueError(f"not a field name: {name!r}")
    return name


def equals(field: str, value: str) -> str:
    """`field` equals `value` exactly (any characters, including quotes, backslashes, % and _)."""
    return f"{_field(field)} LIKE '{like_literal(value)}'"


def like(field: str, pattern: str) -> str:
    """`field LIKE 'pattern'` for a pattern that holds no quote nor backslash (where.py's, built from encoded
    text): its `%` and `_` are wildcards. Refuses any other."""
    if "'" in pattern or "\\" in pattern:
        raise ValueError(f"not a safe LIKE pattern: {pattern!r}")
    return f"{_field(field)} LIKE '{pattern}'"


def any_of(field: str, values: Iterable[str]) -> str:
    """`field` equals one of `values` (at least one value is required)."""
    terms = [equals(field, v) for v in dict.fromkeys(values)]
    if not terms:
        raise ValueError("any_of needs at least one value")
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"


def _dir_path(path: str) -> str:
    if not path or not path.startswith("/"):
        raise ValueError(f"a path filter needs an absolute path, not {path!r}")
    return path.rstrip("/")  # "/" becomes "" and matches everything below the file-system root


def under_is_exact(path: str) -> bool:
    """Whether `under(field, path)` and `equals(field, path)` match exactly (else: re-check each match; `equals`
    of a value with a backslash followed by a double quote matched nothing, so callers use `under` then)."""
    return "\\" not in path


def under(field: str, path: str) -> str:
    """`field` is the path `path` itself or a path below it: `a` matches `a` and `a/x`, never `ab` or `a_b`.

    Exact unless `path` holds a backslash; then every path starting with the part before it (see module doc).
    """
    base = _dir_path(path)
    if not under_is_exact(base):
        head = base.split("\\", 1)[0]
        return f"{_field(field)} LIKE '{like_literal(head)}%'"
    wide = below(field, path)
    return wide if not base else f"({equals(field, base)} OR {wide})"


def below(field: str, path: str) -> str:
    """`field` is a path below the directory `path`, never `path` itself: `a` matches `a/x`, not `a`, `ab` or
    `a_b`. Exact unless `path` holds a backslash (then as `under`: the caller re-checks each match)."""
    base = _dir_path(path)
    if not under_is_exact(base):
        return under(field, path)
    return f"{_field(field)} LIKE '{like_literal(base)}/%'"


def under_any(field: str, paths: Iterable[str]) -> str:
    terms = [under(field, p) for p in dict.fromkeys(paths)]
    if not terms:
        raise ValueError("under_any needs at least one path")
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"


def all_of(*exprs: str | None) -> str:
    """The conjunction of the non-empty expressions ("" when there are none)."""
    parts = [e for e in exprs if e]
    if len(parts) <= 1:
        return parts[0] if parts else ""
    return " AND ".join(f"({p})" for p in parts)


def for_delete(expr: str) -> str:
    """Guard for `delete_by_filter`: an empty expression would delete every document."""
    if not expr or not expr.strip():
        raise ValueError("refusing to delete with an empty filter (it would delete everything)")
    return expr


def is_under(value: str, path: str) -> bool:
    """The Python twin of `under`: `value` is `path` or below it (both absolute; the index stores its paths as
    the agent made them, without `//`, `.` or a trailing slash). A string test: it runs once per chunk of a scan."""
    top = _dir_path(path)
    return value == top or value.startswith(top + "/")
