"""Passages of real documentation embedded by the bundled model, for measuring search at scale on real vectors.

    python -m bench.real_vectors OUT [--count 1000000] [--chars 300] [--processes 2] [SOURCE ...]

bench_scale's own vectors (`bench_index.synth`: Gaussian clusters in 512 dimensions) are a hard case for a graph
index: inside a cluster every direction is noise, so a query's ten nearest are near ties. The model's vectors of
real text are not like that. This script reads the text files under each SOURCE (default: the documentation and
the Python standard library on this machine: /usr/share/doc, the stdlib's directory), cuts them into passages of
about `--chars` characters at spaces, keeps each distinct passage once, in an order shuffled with a fixed seed,
until it has `--count`, and embeds them with the bundled model in `--processes` processes. It writes
OUT/vectors.npy (float32, count x 512) and OUT/texts.json (the passages, in the same order).
`python -m bench.bench_scale --vectors OUT` then indexes them. Prints progress; asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import random
import re
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

TEXT_SUFFIXES = {
    "",
    ".txt",
    ".md",
    ".rst",
    ".py",
    ".html",
    ".htm",
    ".xml",
    ".json",
    ".cfg",
    ".ini",
    ".conf",
    ".1",
}
_SPACE = re.compile(r"\s+")
_TAG = re.compile(r"<[^>]{0,200}>")
_LETTER = re.compile(r"[^\W\d_]")


def files(sources: list[Path]) -> Iterator[Path]:
    for source in sources:
        for path in sorted(source.rglob("*")):
            if path.suffix.lower() in TEXT_SUFFIXES and path.is_file() and not path.is_symlink():
                yield path


def passages(path: Path, chars: int) -> Iterator[str]:
    try:
        data = path.read_bytes()
    except OSError:
        return
    if len(data) > 4 * 2**20 or b"\0" in data[:4096]:
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    if path.suffix.lower() in {".html", ".htm", ".xml"}:
        text = _TAG.sub(" ", text)
    text = _SPACE.sub(" ", text).strip()
    start = 0
    while start < len(text):
        end = min(len(text), start + chars)
        if end < len(text):
            space = text.rfind(" ", start + chars // 2, end)
            end = space if space > 0 else end
        piece = text[start:end].strip()
        start = end
        if len(_LETTER.findall(piece)) >= chars // 5:
            yield piece


def collect(sources: list[Path], count: int, chars: int) -> list[str]:
    seen: set[bytes] = set()
    out: list[str] = []
    for path in files(sources):
        for piece in passages(path, chars):
            digest = hashlib.md5(piece.encode()).digest()
            if digest not in seen:
                seen.add(digest)
                out.append(piece)
        if len(out) >= 2 * count:  # enough to choose from
            break
    random.Random(7).shuffle(out)
    return out[:count]


_MODEL = None


def _embed(texts: list[str]) -> np.ndarray:
    global _MODEL
    if _MODEL is None:
        from ragd.pipeline.embed.local import LocalEmbedder

        _MODEL = LocalEmbedder(threads=1)
    return np.asarray(_MODEL.embed(texts), dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("sources", type=Path, nargs="*")
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--chars", type=int, default=300)
    ap.add_argument("--processes", type=int, default=2)
    a = ap.parse_intermixed_args()
    sources = a.sources or [Path("/usr/share/doc"), Path(sysconfig.get_paths()["stdlib"])]
    t0 = time.perf_counter()
    texts = collect(sources, a.count, a.chars)
    print(f"{len(texts):,} distinct passages of about {a.chars} characters from {', '.join(map(str, sources))} "
          f"in {time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    if len(texts) < a.count:
        print(f"(fewer than the {a.count:,} asked for: add sources)", file=sys.stderr)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
    vectors = np.lib.format.open_memmap(
        a.out / "vectors.npy", mode="w+", dtype=np.float32, shape=(len(texts), 512)
    )
    batches = [texts[i : i + 256] for i in range(0, len(texts), 256)]
    t0, done = time.perf_counter(), 0
    with multiprocessing.get_context("spawn").Pool(a.processes) as pool:
        for i, got in enumerate(pool.imap(_embed, batches)):
            vectors[i * 256 : i * 256 + len(got)] = got
            done += len(got)
            if i % 200 == 0:
                rate = done / (time.perf_counter() - t0)
                print(f"  {done:,} embedded, {rate:,.0f} passages/s", flush=True)
    vectors.flush()
    print(f"{done:,} passages embedded in {time.perf_counter() - t0:.0f} s -> {a.out}/vectors.npy")


if __name__ == "__main__":
    main()
