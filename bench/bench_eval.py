"""Retrieval quality on the development sets (issues 13, 38). Prints figures; asserts nothing.

    python -m bench.bench_eval [--set man|desktop|handbook|all] [--cache DIR] [--fresh] [--worst 10] [--config FILE]

For each set (docs/evaluation.md, "The development sets"; default `man`, `all` runs every one):
1. The corpus (bench/devset*/README.md) built into DIR/corpus from pinned Debian packages, or reused when
   DIR/manifest.json has the same pins (`--fresh` rebuilds it, and so re-indexes everything).
2. Indexed by `ragd run --once` with the default configuration (the bundled model) in an isolated HOME under DIR:
   wall time, files, chunks.
3. `ragd eval bench/devset/queries.jsonl` in vector, keyword and hybrid mode: recall@1, recall@5, hit@5, MRR@10 and
   nDCG@10 per mode and group, the median query time, and the hybrid mode's worst queries.

`--config FILE` indexes and searches with that ragd configuration instead of the defaults (e.g. another
`[splitter] chunk_size`): give each configuration its own `--cache` DIR, since the sidecars live in the corpus.
Each set has its own DIR (default ~/.cache/ragd-devset, ~/.cache/ragd-devset-desktop, …; with `--cache DIR` and
more than one set, DIR/NAME). With more than one set, a summary closes the run: hybrid hit@5 and MRR@10 per set
and per group.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.devset import build as man_build
from bench.devset_desktop import build as desktop_build
from bench.devset_handbook import build as handbook_build

BENCH = Path(__file__).parent
METRICS = ("recall@1", "recall@5", "hit@5", "mrr@10", "ndcg@10")


@dataclass(frozen=True)
class DevSet:
    name: str
    what: str
    folder: Path  # holds queries.jsonl and the builder's README
    build: ModuleType  # has PINS and main(argv)

    @property
    def queries(self) -> Path:
        return self.folder / "queries.jsonl"

    def default_cache(self) -> Path:
        return Path("~/.cache/ragd-devset" + ("" if self.name == "man" else f"-{self.name}"))


SETS = {
    s.name: s
    for s in (
        DevSet("man", "man pages and the Debian Reference", BENCH / "devset", man_build),
        DevSet("desktop", "GNOME desktop and application help", BENCH / "devset_desktop", desktop_build),
        DevSet("handbook", "The Debian Administrator's Handbook", BENCH / "devset_handbook", handbook_build),
    )
}


def corpus(cache: Path, fresh: bool, build: ModuleType = man_build) -> tuple[Path, bool]:
    """(corpus dir, whether it was built now)."""
    out, manifest = cache / "corpus", cache / "manifest.json"
    pins = [list(p) for p in build.PINS]
    if (
        not fresh
        and out.is_dir()
        and manifest.is_file()
        and json.loads(manifest.read_text()).get("pins") == pins
    ):
        return out, False
    t0 = time.perf_counter()
    build.main([str(out), "--debs", str(cache / "debs")])
    print(f"corpus built in {time.perf_counter() - t0:.1f} s")
    return out, True


def environment(cache: Path) -> dict[str, str]:
    home = cache / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    env.update(HOME=str(home))
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"),
                     ("XDG_CACHE_HOME", "cache"), ("XDG_RUNTIME_DIR", "run")):  # fmt: skip
        (home / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        env[var] = str(home / sub)
    return env


def ragd(env: dict[str, str], config: Path | None, *args: str) -> Any:
    chosen = ["--config", str(config)] if config else []
    proc = subprocess.run([sys.executable, "-m", "ragd", "-q", *chosen, *args, "--json"], env=env,
                          capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"ragd {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def index(root: Path, env: dict[str, str], config: Path | None) -> None:
    t0 = time.perf_counter()
    s = ragd(env, config, "run", "--once", str(root))
    wall = time.perf_counter() - t0
    print(f"ragd run --once: {s['embedded']} files embedded, {s['unchanged']} unchanged, {len(s['failed'])} failed; "
          f"{s['index'].get('chunks')} chunks in the index; {wall:.1f} s wall")  # fmt: skip
    for path, reason in s["failed"]:
        print(f"  FAILED {path}: {reason}")


def table(report: dict[str, Any]) -> None:
    modes = list(report["modes"])
    groups = list(report["modes"][modes[0]]["groups"])
    head = "".join(f" | {m:^37}" for m in modes)
    print(f"\n{'group':<11} {'n':>3}{head}")
    print(f"{'':<11} {'':>3}" + " | R@1   R@5   H@5   MRR   nDCG " * len(modes))
    for g in groups:
        n = report["modes"][modes[0]]["groups"][g]["queries"]
        cells = "".join(" | " + " ".join(f"{report['modes'][m]['groups'][g][k]:.3f}" for k in METRICS) + "  "
                        for m in modes)  # fmt: skip
        print(f"{g:<11} {n:>3}{cells}")
    print("\nmedian query time: " + ", ".join(f"{m} {report['modes'][m]['median_ms']:.1f} ms (p95 "
                                            f"{report['modes'][m]['p95_ms']:.1f})" for m in modes))  # fmt: skip


def worst(report: dict[str, Any], base: Path, mode: str = "hybrid") -> None:
    print(f"\nworst queries ({mode}): answer ranks (- = not in the top 10) and the top hit")
    for w in report["modes"][mode]["worst"]:
        ranks = ",".join("-" if r is None else str(r) for r in w["ranks"])
        top = os.path.relpath(w["top"], base) if w["top"] else "(nothing)"
        print(f"  [{w['group']}] {w['query']}  ranks {ranks}; top {top}")


def run_set(devset: DevSet, cache: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Build, index and evaluate one set; print its tables; return `ragd eval`'s report."""
    print(f"\n=== {devset.name}: {devset.what} ({cache})")
    root, _ = corpus(cache, args.fresh, devset.build)
    docs = sum(1 for p in root.rglob("*") if p.is_file() and ".rag" not in p.parts)
    queries = [json.loads(line) for line in devset.queries.read_text().splitlines() if line.strip()]
    print(f"corpus: {docs} documents; {len(queries)} queries")
    env = environment(cache)
    config = args.config.expanduser().resolve() if args.config else None
    if config:
        print(f"configuration: {config}")
    index(root, env, config)
    t0 = time.perf_counter()
    report: dict[str, Any] = ragd(env, config, "eval", str(devset.queries), "--base", str(root),
                                  "--worst", str(args.worst))  # fmt: skip
    print(
        f"ragd eval: {len(queries)} queries x {len(report['modes'])} modes in {time.perf_counter() - t0:.1f} s"
    )
    table(report)
    worst(report, root)
    return report


def summary(reports: dict[str, dict[str, Any]], mode: str = "hybrid") -> None:
    """hit@5 and MRR@10 of one mode, per set and per group, with the machine's load."""
    print(f"\nsummary ({mode}): hit@5 / MRR@10 per set and group; load average {os.getloadavg()[0]:.2f}")
    for name, report in reports.items():
        groups = report["modes"][mode]["groups"]
        cells = ", ".join(
            f"{g} ({v['queries']}) {v['hit@5']:.3f}/{v['mrr@10']:.3f}" for g, v in groups.items()
        )
        print(f"  {name:<9} {cells}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--set", choices=[*SETS, "all"], default="man", help="which development set (default man)"
    )
    ap.add_argument("--cache", type=Path, help="corpus, packages and index (default per set)")
    ap.add_argument("--fresh", action="store_true", help="rebuild the corpus (and so the whole index)")
    ap.add_argument("--worst", type=int, default=10, help="worst hybrid queries listed")
    ap.add_argument("--config", type=Path, help="a ragd configuration file to index and search with")
    args = ap.parse_args(argv)
    chosen = list(SETS.values()) if args.set == "all" else [SETS[args.set]]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    reports: dict[str, dict[str, Any]] = {}
    for devset in chosen:
        cache = (
            (args.cache / devset.name if len(chosen) > 1 else args.cache)
            if args.cache
            else devset.default_cache()
        )
        reports[devset.name] = run_set(devset, cache.expanduser().resolve(), args)
    if len(reports) > 1:
        summary(reports)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
