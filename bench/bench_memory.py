"""The resident agent's memory (issue 14): what each library costs, and whether the agent grows over a soak.

    python -m bench.bench_memory [--libraries] [--soak CORPUS --minutes 60 --every 5]

1. `--libraries`: each of the agent's heavy pieces in a fresh interpreter (best of 3), as the resident RSS it adds
   to a bare Python: imports (numpy, pydantic with ragd's config, watchdog, zvec, the MCP server stack, the openai
   client; and markitdown and langchain, which live in the parse workers), zvec with a collection and its keyword
   index open, rjieba with its dictionary, the bundled question model loaded, CC-CEDICT parsed into memory and looked up in its table file.
   Also the time of each.
2. `--soak CORPUS`: the agent (`ragd run`, defaults, the bundled model) on a copy of CORPUS; once it is idle, for
   `--minutes`: an edit every 2 s (a file rewritten with new text, now and then a new file or a file removed) and
   a search every 0.5 s (Chinese, English, mixed; hybrid, keyword, vector; some with `files`); every `--every`
   minutes a row: the agent's RSS, the agent with its workers, files, chunks, edits and searches so far, the
   searches' p50 and p95. A flat RSS column is what "no growth" means.

Prints figures; asserts nothing. The figures in docs/benchmarks.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_agent import Agent, pct
from bench.bench_workers import tree_rss_mib

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = """
import json, re, sys, time
sys.path[:0] = {paths!r}
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
base = rss()
t0 = time.perf_counter()
{setup}
print(json.dumps({{"base": base, "rss": rss(), "s": time.perf_counter() - t0}}))
"""

_OPEN_INDEX = """
import tempfile
from pathlib import Path
from ragd.config import Config, IndexConfig
from ragd.index import open_index
index = open_index(Path(tempfile.mkdtemp()), Config().identity, IndexConfig())
index.count()
"""

_LEXICON = """
import tempfile
from pathlib import Path
from ragd.index.keyword.lexicon import Lexicon, prepare
table = Path(tempfile.mkdtemp()) / "cedict.sqlite"
prepare(table)
base, t0 = rss(), time.perf_counter()  # what the agent's first question pays: the file is made at its start
Lexicon(cache=table).english("怎么查看一个目录占用了多少磁盘空间")
"""

PIECES: list[tuple[str, str, str]] = [  # (what, where it lives, the statements)
    ("numpy", "agent", "import numpy"),
    ("pydantic and ragd's configuration", "agent", "import ragd.config"),
    ("watchdog (inotify observer)", "agent", "import watchdog.observers"),
    ("zvec, imported", "agent", "import zvec"),
    ("zvec, a collection open (and its keyword index: tantivy)", "agent", _OPEN_INDEX),
    (
        "rjieba, its dictionary loaded (the keyword index's Chinese cut)",
        "agent, first Chinese text",
        "from ragd.index.keyword.words import cut\ncut('配置文件')",
    ),
    ("the MCP server (mcp, starlette, uvicorn)", "agent", "import ragd.mcp.app"),
    ("the agent's modules (ragd.resident.agent)", "agent", "import ragd.resident.agent"),
    (
        "the question model, loaded",
        "agent, first search",
        "from ragd.pipeline.embed.local import LocalEmbedder\nLocalEmbedder().embed(['x'])",
    ),
    (
        "CC-CEDICT parsed into memory",
        "a process without a data directory",
        "from ragd.index.keyword.lexicon import parse\nparse()",
    ),
    ("CC-CEDICT looked up in its table file", "agent, first Chinese question", _LEXICON),
    ("the openai client", "agent, with an API embedder", "import openai"),
    ("markitdown (with magika, pdfium)", "parse workers", "import markitdown"),
    ("langchain-text-splitters", "parse workers", "import langchain_text_splitters"),
]


def measure(setup: str) -> tuple[float, float]:
    """RSS the statements add to a bare interpreter (MiB) and their time (s): best of 3 fresh processes."""
    paths = [str(ROOT / "agent"), str(ROOT / "cli")]
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", _MEASURE.format(paths=paths, setup=setup)],
                             capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
        r = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append((r["rss"] - r["base"], r["s"]))
    return min(m for m, _ in runs), min(s for _, s in runs)


def libraries() -> None:
    print("| piece | where | resident MiB added | time |")
    print("|---|---|---|---|")
    for what, where, setup in PIECES:
        try:
            mib, secs = measure(setup)
        except subprocess.CalledProcessError as err:
            print(f"| {what} | {where} | failed: {err.stderr.strip().splitlines()[-1]} | |")
            continue
        print(f"| {what} | {where} | {mib:.0f} | {secs * 1000:.0f} ms |")


QUESTIONS = [
    ("如何查看磁盘空间", "hybrid"), ("disk usage of a directory", "hybrid"), ("配置文件 config file", "hybrid"),
    ("copyright license", "keyword"), ("网络接口", "keyword"), ("how to report a bug", "vector"),
    ("压缩文件", "vector"), ("release notes", "hybrid"), ("--help", "keyword"), ("环境变量 PATH", "hybrid"),
]  # fmt: skip


def soak(corpus: Path, minutes: float, every: float) -> None:
    with tempfile.TemporaryDirectory(prefix="ragd-soak-") as tmp:
        base = Path(tmp)
        kb = base / "kb"
        shutil.copytree(corpus, kb, symlinks=True)
        agent = Agent(base, kb, None)
        try:
            t0 = time.perf_counter()
            agent.wait()
            time.sleep(1.0)  # the agent gives freed memory back on its next tick once idle
            status = agent.call("status")
            files = sum(sum(r["files"].values()) for r in status["roots"])
            print(f"indexed {files} files, {status['index']['chunks']} chunks in {time.perf_counter() - t0:.0f} s; "
                  f"RSS {agent.rss_mib():.0f} MiB idle")  # fmt: skip
            t = time.perf_counter()
            agent.call("search", {"query": "如何查看磁盘空间 disk usage"})
            print(f"first search {1000 * (time.perf_counter() - t):.0f} ms; RSS {agent.rss_mib():.0f} MiB")
            run_soak(agent, kb, minutes, every)
        finally:
            agent.stop()


def run_soak(agent: Agent, kb: Path, minutes: float, every: float) -> None:
    rng = random.Random(7)
    docs = sorted(p for p in kb.rglob("*") if p.is_file() and ".rag" not in p.parts and not p.is_symlink())
    words = [
        "磁盘",
        "空间",
        "网络",
        "配置",
        "文件",
        "disk",
        "space",
        "network",
        "config",
        "file",
        "release",
        "notes",
    ]
    added: list[Path] = []
    print("| minutes | agent RSS MiB | with workers MiB | chunks | edits | searches | search p50 / p95 ms |")
    print("|---|---|---|---|---|---|---|")
    start = time.monotonic()
    next_row, next_edit, edits, latencies = 0.0, 0.0, 0, list[float]()
    while True:
        now = time.monotonic() - start
        if now >= next_row:
            chunks = agent.call("status")["index"]["chunks"]
            lat = f"{statistics.median(latencies):.0f} / {pct(latencies, 95):.0f}" if latencies else "-"
            print(f"| {now / 60:.1f} | {agent.rss_mib():.0f} | {tree_rss_mib(agent.proc.pid):.0f} | {chunks} | "
                  f"{edits} | {len(latencies)} | {lat} |", flush=True)  # fmt: skip
            latencies = []
            next_row += every * 60
            if now >= minutes * 60:
                return
        if now >= next_edit:
            edit(rng, docs, added, kb, words)
            edits += 1
            next_edit = now + 2.0
        query, mode = rng.choice(QUESTIONS)
        t = time.perf_counter()
        agent.call("search", {"query": query, "mode": mode, "files": rng.random() < 0.2})
        latencies.append(1000 * (time.perf_counter() - t))
        time.sleep(0.5)


def edit(rng: random.Random, docs: list[Path], added: list[Path], kb: Path, words: list[str]) -> None:
    roll = rng.random()
    if roll < 0.1 and added:
        added.pop(rng.randrange(len(added))).unlink(missing_ok=True)
    elif roll < 0.2:
        p = kb / f"soak-{rng.randrange(10**9)}.md"
        p.write_text("# soak\n\n" + " ".join(rng.choice(words) for _ in range(400)))
        added.append(p)
    else:
        p = rng.choice(docs)
        text = p.read_text(errors="replace")
        p.write_text(text[: max(0, len(text) - 200)] + "\n" + " ".join(rng.choice(words) for _ in range(40)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libraries", action="store_true", help="the resident cost of each library (part 1)")
    ap.add_argument(
        "--soak", type=Path, help="a folder of documents: the soak of edits and searches (part 2)"
    )
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=5.0, help="minutes between rows")
    args = ap.parse_args(argv)
    print(f"# {platform.machine()}, Python {platform.python_version()}, {platform.platform()}")
    if args.libraries or not args.soak:
        libraries()
    if args.soak:
        soak(args.soak, args.minutes, args.every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
