"""How fast text is cut into the keyword index's words (index/keyword/words.py), on the chunks of an indexed tree.

    python -m bench.bench_words DIR [--rounds 3]

DIR: a tree `ragd run --once` indexed (its sidecars are read for the chunks' texts; the development set's, for
the figures in docs/benchmarks.md). Prints the chunks, their characters, and the best of `--rounds` times to cut
them all (`words.joined`, what an index sync does for every chunk), Chinese and other chunks apart. Asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import re
import time
from pathlib import Path

from ragd.index.keyword import words
from ragd.pipeline.sidecar import read_entry


def best(texts: list[str], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for t in texts:
            words.joined(t)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    texts = [c.content for p in sorted(a.tree.rglob("*.ragjson")) if (e := read_entry(p)) for c in e.chunks]
    words.cut("热身")  # the dictionary, built once
    cjk = re.compile(r"[\u4e00-\u9fff]")
    zh = [t for t in texts if cjk.search(t)]
    other = [t for t in texts if not cjk.search(t)]
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(f"{len(texts):,} chunks, {sum(map(len, texts)):,} characters")
    for label, group in (("all", texts), ("Chinese", zh), ("other", other)):
        took = best(group, a.rounds)
        print(
            f"  {label:8s} {len(group):6,} chunks in {took:.2f} s ({sum(map(len, group)) / took / 1e6:.1f} M chars/s)"
        )


if __name__ == "__main__":
    main()
