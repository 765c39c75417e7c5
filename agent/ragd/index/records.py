"""What every backend stores the same way: document ids (the ragjson tool's scheme), file extensions for filters,
heading paths as text, and the check every vector passes before it is written or searched with."""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from ..errors import IndexError_
from ..model import fields_json, vector_problems
from .backend import SourceSummary
from .where import terms

HEADING_SEP = " > "


def doc_id(source_path: str, chunk_index: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{source_path}#{chunk_index}"))


def extension(path: str) -> str:
    """The lower-case suffix without its dot (`"md"` for `a/B.MD`), "" when there is none."""
    return os.path.splitext(os.path.basename(path))[1].lstrip(".").lower()


def summaries(rows: Iterable[tuple[str, str, int]]) -> dict[str, SourceSummary]:
    """What the index holds per source, from its chunks' (path, source md5, chunk index), read as they come (a
    listing's parts are dropped as they are summed): the md5 is "" when the chunks disagree or leave a gap (a write
    a crash interrupted), so that such a source never matches its sidecar.

    Kept per source while the rows come: its md5, and its chunks' count and lowest and highest index (a chunk's id
    is its source's path and index, so no index comes twice: 0 to count - 1 is whole). A set of md5s and one of
    indices for each source held ~470 bytes a source while summing, against ~110 (tests/unit/index/test_records.py;
    100,000 sources at the verification after a big folder's job)."""
    seen: dict[str, list[Any]] = {}  # path: [md5, or None when they differ; count; lowest index; highest]
    for path, md5, index in rows:
        one = seen.get(path)
        if one is None:
            seen[path] = [md5, 1, index, index]
            continue
        if one[0] != md5:
            one[0] = None
        one[1] += 1
        if index < one[2]:
            one[2] = index
        elif index > one[3]:
            one[3] = index
    return {
        path: SourceSummary(path, md5 if md5 is not None and lo == 0 and hi == count - 1 else "", count)
        for path, (md5, count, lo, hi) in seen.items()
    }


def extensions(raw: Sequence[str]) -> list[str]:
    """File extensions as a filter compares them: without the dot, lower case, empty ones dropped."""
    return [e.strip().lstrip(".").lower() for e in raw if e.strip().lstrip(".")]


def check_vector(vec: np.ndarray, dimension: int, where: str) -> np.ndarray:
    return check_vectors([vec], dimension, [where])[0]


def check_vectors(vecs: Sequence[np.ndarray], dimension: int, wheres: Sequence[str]) -> list[np.ndarray]:
    """The vectors as float32 rows the index takes, each of `dimension` and neither zero nor non-finite (an
    IndexError_ naming the first that is not, by its `wheres`); their norms computed in one pass (model.py)."""
    arrs = [np.asarray(vec, dtype=np.float32).reshape(-1) for vec in vecs]
    for arr, where in zip(arrs, wheres, strict=True):
        if arr.shape[0] != dimension:
            raise IndexError_(
                f"vector of {where} has dimension {arr.shape[0]}, the index expects {dimension}",
                "re-embed the file with the configured model",
            )
    if arrs:
        for problem, where in zip(vector_problems(np.stack(arrs)), wheres, strict=True):
            if problem is not None:
                raise IndexError_(f"vector of {where} is zero or not finite", "re-embed the file")
    return arrs


def encode_lead(vec: np.ndarray | None, dimension: int, where: str) -> str:
    """A document's lead vector as every chunk row of it holds it: unit length, little-endian float16, base64
    (cosines to it are good to about 1e-3, plenty to rank a question's candidate documents); "" for none."""
    if vec is None:
        return ""
    arr = check_vector(vec, dimension, f"the lead of {where}")
    return base64.b64encode((arr / np.linalg.norm(arr)).astype("<f2").tobytes()).decode("ascii")


def lead_bytes(raw: object, dimension: int) -> bytes | None:
    """The half floats of the lead vector a row holds, None for none or for one of another size (damage)."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        data = base64.b64decode(raw, validate=True)
    except ValueError:  # (binascii.Error)
        return None
    return data if len(data) == 2 * dimension else None


def decode_lead(raw: object, dimension: int) -> np.ndarray | None:
    """The lead vector a row holds (float32), None for none or for one of another dimension or not finite."""
    data = lead_bytes(raw, dimension)
    if data is None:
        return None
    arr = np.frombuffer(data, dtype="<f2").astype(np.float32)
    return arr if np.isfinite(arr).all() else None


def metadata_columns(fields: Mapping[str, Sequence[str]]) -> tuple[str, str]:
    """A document's fields as the index holds them: (filter terms, JSON for results)."""
    if not fields:
        return "", ""
    return terms(fields), orjson.dumps(fields_json(fields)).decode("utf-8")


def read_metadata(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        found = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}
