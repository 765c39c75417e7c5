"""What every backend stores the same way: document ids (the ragjson tool's scheme), file extensions for filters,
heading paths as text, and the check every vector passes before it is written or searched with."""

from __future__ import annotations

import math
import os
import uuid

import numpy as np

from ..errors import IndexError_

HEADING_SEP = " > "


def doc_id(source_path: str, chunk_index: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{source_path}#{chunk_index}"))


def extension(path: str) -> str:
    """The lower-case suffix without its dot (`"md"` for `a/B.MD`), "" when there is none."""
    return os.path.splitext(os.path.basename(path))[1].lstrip(".").lower()


def check_vector(vec: np.ndarray, dimension: int, where: str) -> np.ndarray:
    arr = np.asarray(vec, dtype=np.float32).reshape(-1)
    if arr.shape[0] != dimension:
        raise IndexError_(
            f"vector of {where} has dimension {arr.shape[0]}, the index expects {dimension}",
            "re-embed the file with the configured model",
        )
    norm = float(np.linalg.norm(arr))
    if not math.isfinite(norm) or norm == 0.0:
        raise IndexError_(f"vector of {where} is zero or not finite", "re-embed the file")
    return arr
