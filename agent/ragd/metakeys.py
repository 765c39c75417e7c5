"""Metadata keys (docs/metadata.md): the built-in keys every document may carry, the aliases folded onto them, and
what a key may look like. Core: the configuration's `[metadata] keys` and the pipeline's metadata both check keys
here."""

from __future__ import annotations

import re

STANDARD = ("title", "tags", "product", "version", "type", "author", "created")
ALIASES = {"tag": "tags", "date": "created", "authors": "author", "creator": "author"}
KEY = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def canonical_key(raw: str) -> str | None:
    """`Tags` -> `tags`, `tag` -> `tags`, `date` -> `created`; None for a key that cannot be a field."""
    key = raw.strip().lower()
    key = ALIASES.get(key, key)
    return key if KEY.match(key) else None
