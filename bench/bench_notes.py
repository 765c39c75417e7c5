"""Retrieval quality on the small-knowledge-base set (bench/notesset/README.md). Prints figures; asserts nothing.

    python -m bench.bench_notes [--cache DIR] [--devset DIR] [--worst 10]

The notes among a few hundred man pages (`bench.notesset.build`, from the development set's corpus, built first
when missing), indexed by `ragd run --once` with the default configuration in an isolated HOME under DIR, then
`ragd eval bench/notesset/queries.jsonl` in vector, keyword and hybrid mode, per group.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from bench import bench_eval
from bench.notesset import build

QUERIES = Path(__file__).parent / "notesset" / "queries.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("~/.cache/ragd-notesset"), help="corpus and index")
    ap.add_argument("--devset", type=Path, default=Path("~/.cache/ragd-devset"),
                    help="the development set's cache (its corpus is built there when missing)")  # fmt: skip
    ap.add_argument("--worst", type=int, default=10, help="worst hybrid queries listed")
    args = ap.parse_args(argv)
    cache, devset = args.cache.expanduser().resolve(), args.devset.expanduser().resolve()
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    pages, _ = bench_eval.corpus(devset, fresh=False)
    root = cache / "corpus"
    docs = build.build(root, pages)
    queries = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    print(f"corpus: {docs} documents; {len(queries)} queries")
    env = bench_eval.environment(cache)
    bench_eval.index(root, env, None)
    t0 = time.perf_counter()
    report = bench_eval.ragd(env, None, "eval", str(QUERIES), "--base", str(root), "--worst", str(args.worst))
    print(
        f"ragd eval: {len(queries)} queries x {len(report['modes'])} modes in {time.perf_counter() - t0:.1f} s"
    )
    bench_eval.table(report)
    bench_eval.worst(report, root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
