"""Document metadata (docs/metadata.md): values normalised, folder defaults and a document's own values merged
into the fields search filters on, and the sidecar entry's `metadata` key.

Every field is a key (lower case, `[a-z0-9][a-z0-9_.-]*`) with one or more string values: tags are a list, a date
is ISO 8601, a number or a flag is its text. Odd input never fails a file: what cannot be used (a nested mapping,
a value too long, too many keys) is left out with a note, kept in the entry's `metadata.notes`.

Precedence: the document's own value of a key wins over the folder defaults, a nearer folder's over a farther
one's; `tags` are the union of all of them. The fields searched on are the built-in keys (`STANDARD`) and those
listed in `[metadata] keys`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..metakeys import STANDARD, canonical_key
from ..model import Extracted, Fields, fields_json

MAX_KEYS = 64  # of a document's own, or of one folder defaults file
MAX_VALUES = 64  # values of one key (tags)
MAX_VALUE_CHARS = 500  # a longer value is left out (never cut: a cut value would match what it does not say)
MAX_TERMS_BYTES = (
    16_000  # the index's filter terms of one document (UTF-8 bytes; index/where.py encodes them)
)
MAX_NOTES = 20
_PLAIN = re.compile(
    r"[A-Za-z0-9 .,:;!?@#$&()*+/<>\[\]^{}-]"
)  # index/where.py: what a filter term keeps as is
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_PDF_DATE = re.compile(r"^D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(Z|[+-]\d{2}'?\d{2}'?)?")


def normalise(raw: Mapping[Any, Any], origin: str) -> Extracted:
    """The usable fields of `raw` (a parsed mapping), with a note for each thing left out. `origin` names the
    source in the notes ("front matter", "PDF properties", "/kb/.ragd-meta.toml")."""
    fields: Fields = {}
    notes: list[str] = []
    for raw_key, raw_value in raw.items():
        key = canonical_key(raw_key) if isinstance(raw_key, str) else None
        if key is None:
            notes.append(f"{origin}: key {str(raw_key)[:80]!r} is not a field name (letters, digits, _ . -)")
            continue
        if key in fields:  # `tag` and `tags` both given: the values together
            values, why = _values(raw_value, key)
            fields[key] = _unique(fields[key] + values)
        else:
            values, why = _values(raw_value, key)
            if values:
                if len(fields) >= MAX_KEYS:
                    notes.append(f"{origin}: more than {MAX_KEYS} keys; {key!r} and later ones left out")
                    break
                fields[key] = values
        if why:
            notes.append(f"{origin}: {key!r} {why}")
    return Extracted(fields, tuple(notes[:MAX_NOTES]))


def _values(raw: Any, key: str) -> tuple[tuple[str, ...], str]:
    """The values of one key, and why some were left out ("" if none were)."""
    items = raw if isinstance(raw, list | tuple) else [raw]
    if key == "tags" and isinstance(raw, str):
        items = raw.split(",")
    out: list[str] = []
    why = ""
    for item in items:
        value = scalar(item, date=key == "created")
        if value is None:
            if item is not None:
                why = why or f"holds a {type(item).__name__}, not text; left out"
            continue
        if key == "tags":
            value = value.lstrip("#").strip()
        if len(value) > MAX_VALUE_CHARS:
            why = why or f"has a value of {len(value)} characters (at most {MAX_VALUE_CHARS}); left out"
        elif value:
            out.append(value)
    if len(out) > MAX_VALUES:
        why, out = f"has {len(out)} values; the first {MAX_VALUES} kept", out[:MAX_VALUES]
    return _unique(out), why


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for v in values:
        seen.setdefault(v.casefold(), v)
    return tuple(seen.values())


def scalar(value: Any, *, date: bool = False) -> str | None:
    """A scalar as text (None for a mapping, a list, None, or a number that is not finite). Dates become ISO 8601;
    with `date`, so does text that is a date (`2024-03-01`, a PDF date `D:20240301…`, `2024-03-01T10:00:00Z`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, dt.datetime | dt.date):
        return iso(value)
    if not isinstance(value, str):
        return None
    text = " ".join(_CONTROL.sub(" ", unicodedata.normalize("NFC", value)).split())
    if not _utf8(text):
        return None
    return (iso_text(text) or text) if date else text


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def iso(value: dt.date | dt.datetime) -> str:
    """`2024-03-01`, or `2024-03-01T10:00:00` (no zone given) / `2024-03-01T09:00:00Z` (converted to UTC)."""
    if not isinstance(value, dt.datetime):
        return value.isoformat()
    if value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
    return value.isoformat(timespec="seconds")


def iso_text(text: str) -> str | None:
    """A date written as text in ISO 8601 (or as a PDF date) in ragd's ISO form; None if it is not one."""
    m = _PDF_DATE.match(text)
    if m:
        parts = [int(p) if p else d for p, d in zip(m.groups()[:6], (0, 1, 1, 0, 0, 0), strict=True)]
        zone = (m.group(7) or "").replace("'", "")
        try:
            when = dt.datetime(*parts)  # type: ignore[arg-type]
            if zone:
                when = when.replace(tzinfo=dt.UTC if zone == "Z" else dt.datetime.strptime(zone, "%z").tzinfo)
        except ValueError:
            return None
        return iso(when) if (zone or m.group(4)) else iso(when.date())
    try:
        if len(text) == 10:
            return iso(dt.date.fromisoformat(text))
        return iso(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def fields_from_json(raw: Any) -> Fields:
    """The inverse of `fields_json`, tolerant: what is not text is left out."""
    if not isinstance(raw, Mapping):
        return {}
    out: Fields = {}
    for key, value in raw.items():
        items = value if isinstance(value, list) else [value]
        values = tuple(v for v in items if isinstance(v, str) and v)
        if isinstance(key, str) and values:
            out[key] = values
    return out


# -- the index's filter terms (index/where.py says why this encoding) ------------------------------------------------
def encode(text: str) -> str:
    """`text` with each ASCII character outside the plain set as `~XX`."""
    return "".join(ch if ord(ch) > 0x7F or _PLAIN.match(ch) else f"~{ord(ch):02X}" for ch in text)


def term(key: str, value: str) -> str:
    """One field value as the index holds it (without the `|` around it): case-folded, encoded."""
    return f"{encode(key)}={encode(value.casefold())}"


# -- merging -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Defaults:
    """The folder defaults in force in one directory (folder_meta.py), nearest file last in `files`."""

    fields: Fields = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def merge_defaults(layers: Sequence[Extracted], files: Sequence[str] = ()) -> Defaults:
    """Folder defaults from the farthest folder's (first) to the nearest's (last): a nearer value wins; tags add."""
    fields: Fields = {}
    notes: list[str] = []
    for layer in layers:
        for key, values in layer.fields.items():
            fields[key] = _unique(fields.get(key, ()) + values) if key == "tags" else values
        notes += layer.notes
    return Defaults(fields, tuple(notes), tuple(files))


def basis(defaults: Defaults, keys: Sequence[str]) -> str | None:
    """A digest of what an entry's fields depend on besides its document: the folder defaults in force and the
    configured keys. None when there is neither (then an entry needs no `metadata.basis`)."""
    if not defaults.fields and not defaults.notes and not keys:
        return None
    payload = {"defaults": fields_json(defaults.fields), "notes": list(defaults.notes), "keys": sorted(keys)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class EntryMetadata:
    """The sidecar entry's `metadata` key (docs/storage-format.md)."""

    fields: Fields  # what search filters on and results show
    document: Fields  # the document's own values, as its parse found them
    notes: tuple[str, ...] = ()
    basis: str | None = None  # `basis()` of the defaults and keys `fields` were made with

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"fields": fields_json(self.fields), "document": fields_json(self.document)}
        if self.notes:
            data["notes"] = list(self.notes)
        if self.basis:
            data["basis"] = self.basis
        return data

    @classmethod
    def from_json(cls, raw: Any) -> EntryMetadata | None:
        if not isinstance(raw, Mapping):
            return None
        notes = raw.get("notes")
        notes = tuple(str(n) for n in notes) if isinstance(notes, list) else ()
        found = raw.get("basis")
        return cls(fields_from_json(raw.get("fields")), fields_from_json(raw.get("document")), notes,
                   found if isinstance(found, str) else None)  # fmt: skip

    @property
    def title(self) -> str | None:
        values = self.fields.get("title")
        return values[0] if values else None


def label(document: Extracted | None, defaults: Defaults, keys: Sequence[str]) -> EntryMetadata | None:
    """The entry's metadata: the document's own values over the folder defaults, for the built-in and configured
    keys, within the index's budget. None when there is nothing to record."""
    own = document.fields if document else {}
    notes = list(document.notes if document else ()) + list(defaults.notes)
    fields: Fields = {}
    for key in dict.fromkeys((*STANDARD, *keys)):
        if key == "tags":
            values = _unique(defaults.fields.get(key, ()) + own.get(key, ()))
        else:
            values = own.get(key) or defaults.fields.get(key, ())
        if values:
            fields[key] = values
    fields = _within_budget(fields, notes)
    found = basis(defaults, keys)
    if not fields and not own and not notes and found is None:
        return None
    return EntryMetadata(fields, dict(own), tuple(notes[:MAX_NOTES]), found)


def _within_budget(fields: Fields, notes: list[str]) -> Fields:
    """The fields whose filter terms fit in MAX_TERMS_BYTES (later keys' values left out, with a note)."""
    used, out = 0, Fields()
    for key, values in fields.items():
        kept: list[str] = []
        for v in values:
            used += len(term(key, v).encode("utf-8")) + 1
            if used > MAX_TERMS_BYTES:
                notes.append(
                    f"metadata over {MAX_TERMS_BYTES} bytes: {key!r} = {v[:40]!r} and later values left out"
                )
                return out | ({key: tuple(kept)} if kept else {})
            kept.append(v)
        out[key] = tuple(kept)
    return out


def relabel(old: EntryMetadata | None, defaults: Defaults, keys: Sequence[str]) -> EntryMetadata | None:
    """An entry's metadata with the folder defaults and keys in force now; its document's values stay as parsed."""
    document = Extracted(old.document if old else {}, _own_notes(old))
    return label(document, defaults, keys)


def _own_notes(old: EntryMetadata | None) -> tuple[str, ...]:
    """The notes an entry's document gave: not those of folder defaults files (their origin is the file's absolute
    path; they are made again from the files) nor the budget's (made again by `label`)."""
    if old is None:
        return ()
    return tuple(n for n in old.notes if not n.startswith(("/", "metadata over ")))


@dataclass(frozen=True)
class Labels:
    """What labels the entries of one directory: the folder defaults in force there and the configured keys."""

    defaults: Defaults = field(default_factory=Defaults)
    keys: tuple[str, ...] = ()

    @property
    def basis(self) -> str | None:
        return basis(self.defaults, self.keys)

    def entry(self, document: Extracted | None) -> EntryMetadata | None:
        """The metadata of an entry whose document was just parsed."""
        return label(document, self.defaults, self.keys)

    def again(self, old: EntryMetadata | None) -> EntryMetadata | None:
        """The metadata of an unchanged entry, with the defaults and keys in force now."""
        return relabel(old, self.defaults, self.keys)
