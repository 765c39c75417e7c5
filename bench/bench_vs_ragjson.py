"""`ragd run --once` against the ragjson tool through one embeddings API (issue 14). Prints figures; asserts nothing.

    python3.12 -m venv /tmp/rjvenv && /tmp/rjvenv/bin/pip install ragjson==0.5.1   # the tool needs Python >= 3.12
    PYTHONPATH=agent:cli:. python -m bench.bench_vs_ragjson --rag /tmp/rjvenv/bin/rag [--repeat 3] [--delay 0.03]
        [--ragd-old DIR]     # also an older ragd, e.g. DIR filled by `git archive COMMIT | tar -x -C DIR`
        [--ragd-jobs N]      # ragd with N directory jobs (`run --once --jobs N`) instead of run.jobs's

The corpus (`--corpus`): `manpages` (the default, the referee's run of issue 39): 200 Chinese and 200 English
plain-text man pages from Debian's `manpages-zh` and `manpages` (`bench/manpage_corpus.py`; the pinned `.deb` files
are fetched once with `apt-get download` into `--debs`); or `synthetic`: 200 Chinese and 200 English documents
(md/txt/html from `bench/corpus.py`, 20 folders). `--load N` runs N busy loops (one process each) throughout, the
"under load" figure. One local OpenAI-compatible server (`bench/fake_api.py`, 512-d, `--delay` seconds added to every request), and per
round a fresh copy of the tree for each tool:

- the ragjson tool: `rag update -r TREE` (parse, split, embed into `.rag/*.ragjson`), then `rag index -r TREE`
  (the mushrooms into its zvec collection), configured only by `~/.rag.config` in a HOME of its own;
- ragd: `ragd run --once --json TREE` (the same sidecars, then the index sync), from the same `~/.rag.config`
  (same model name, dimension, splitter) in a HOME of its own, so every other setting is ragd's default.

Every other round runs the tools in reverse order. For each run: wall time (the whole process), requests and texts
the server answered, texts per request, files and chunks written, the load average; then the ratios of the best
walls, against ragjson's update + index (the same end state as `ragd run --once`) and its update alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import manpage_corpus
from bench.corpus import document
from bench.fake_api import EmbeddingsAPI

MODEL = "fake-embed-512"


@dataclass
class Run:
    tool: str
    wall: float  # the whole command (both commands for ragjson)
    requests: int
    texts: int
    files: int  # EMBEDDED sidecars
    chunks: int
    load: float  # 1-minute load average when the run started
    parts: str = ""  # how the wall divides
    update: float = 0.0  # ragjson: `rag update` alone (the sidecars, no index)

    def line(self) -> str:
        per = self.texts / self.requests if self.requests else 0.0
        return (
            f"{self.tool:8s} {self.wall:7.2f} s  requests {self.requests:5d}  texts {self.texts:6d}  "
            f"texts/request {per:5.1f}  files {self.files}  chunks {self.chunks}  load {self.load:.1f}"
            + (f"  ({self.parts})" if self.parts else "")
        )


def make_corpus(out: Path, per_lang: int, folders: int, seed: int = 14) -> None:
    """`per_lang` Chinese and `per_lang` English documents in `folders` folders per language."""
    rng = random.Random(seed)
    for kind in ("zh", "en"):
        for n in range(per_lang):
            folder = out / kind / f"d{n % folders:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            ext = rng.choice((".md", ".md", ".txt", ".html"))
            size = int(rng.expovariate(1 / 5000)) + 200
            (folder / f"{kind}{n:04d}{ext}").write_text(document(rng, ext, size, kind), encoding="utf-8")


def rag_config(server: EmbeddingsAPI, home: Path) -> None:
    """The ragjson tool's `~/.rag.config`; ragd reads the same file when it has no config of its own."""
    home.mkdir(parents=True)
    config = {
        "embedding_model": {
            "base_url": server.base_url,
            "api_key": "x",
            "model_name": MODEL,
            "dimension": server.dim,
        },
        "splitter": {"chunk_size": 1000, "chunk_overlap": 200},
        "vector_database": {"db_url": f"zvec:{home / 'db'}", "index_type": "flat"},
    }
    (home / ".rag.config").write_text(json.dumps(config, indent=2))


def isolated_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGD_", "XDG_", "OPENAI_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "cfg"), XDG_DATA_HOME=str(home / "data"))
    env["XDG_RUNTIME_DIR"] = str(home / "run")
    (home / "run").mkdir(mode=0o700)
    return env


def sidecar_counts(tree: Path) -> tuple[int, int]:
    files = chunks = 0
    for path in tree.rglob(".rag/*.ragjson"):
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("processing", {}).get("status") == "EMBEDDED":
            files += 1
            chunks += len(entry.get("chunks", []))
    return files, chunks


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    if "Error" in proc.stderr:
        print(f"  {cmd[1]} reported errors:\n{proc.stderr[-2000:]}", file=sys.stderr)
    return wall, proc.stdout


def run_ragjson(rag: str, server: EmbeddingsAPI, tree: Path, home: Path) -> Run:
    rag_config(server, home)
    env, load = isolated_env(home), os.getloadavg()[0]
    r0, t0 = server.requests, server.texts
    update, _ = timed([rag, "update", "-r", str(tree)], env, home)
    index, _ = timed([rag, "index", "-r", str(tree)], env, home)
    files, chunks = sidecar_counts(tree)
    parts = f"update {update:.2f} s + index {index:.2f} s"
    return Run(
        "ragjson", update + index, server.requests - r0, server.texts - t0, files, chunks, load, parts, update
    )


def run_ragd(
    server: EmbeddingsAPI, tree: Path, home: Path, source: Path | None = None, jobs: int | None = None
) -> Run:
    rag_config(server, home)
    env, load = isolated_env(home), os.getloadavg()[0]
    if source is not None:  # another version of ragd, e.g. `git archive COMMIT | tar -x -C DIR`
        env["PYTHONPATH"] = os.pathsep.join(str(source / p) for p in ("agent", "cli", "."))
    r0, t0 = server.requests, server.texts
    cmd = [sys.executable, "-m", "ragd", "-q", "run", "--once", "--json", str(tree)]
    cmd += ["--jobs", str(jobs)] if jobs is not None else []
    wall, out = timed(cmd, env, home)
    summary = json.loads(out)
    if summary["failed"] or summary["failed_dirs"]:
        print(f"  ragd failures: {summary['failed'][:3]} {summary['failed_dirs'][:3]}", file=sys.stderr)
    files, chunks = sidecar_counts(tree)
    index = summary.get("index", {})
    parts = f"in-process {summary['elapsed_s']:.2f} s; index {index.get('chunks')} chunks"
    return Run(
        "ragd" if source is None else "ragd-old",
        wall,
        server.requests - r0,
        server.texts - t0,
        files,
        chunks,
        load,
        parts,
    )


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """`n` processes that each keep one core busy until the block ends."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rag", default=shutil.which("rag") or "/tmp/rjvenv/bin/rag", help="the ragjson tool's `rag`"
    )
    ap.add_argument("--corpus", choices=("manpages", "synthetic"), default="manpages", help="see above")
    ap.add_argument("--debs", type=Path, help="where the man pages' .deb files are kept (manpages corpus)")
    ap.add_argument("--load", type=int, default=0, help="busy loops running throughout (a loaded machine)")
    ap.add_argument("--per-lang", type=int, default=200, help="documents per language")
    ap.add_argument("--folders", type=int, default=10, help="folders per language")
    ap.add_argument("--delay", type=float, default=0.03, help="seconds the server adds to every request")
    ap.add_argument(
        "--repeat", type=int, default=2, help="rounds; each runs both tools, alternating the order"
    )
    ap.add_argument("--only", choices=("ragjson", "ragd"), help="run one tool only")
    ap.add_argument("--ragd-old", type=Path, help="also run the ragd whose source tree is DIR (before/after)")
    ap.add_argument(
        "--ragd-jobs", type=int, help="ragd's directory jobs (`run --once --jobs N`; default: run.jobs)"
    )
    a = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}; ragjson: {a.rag}"
    )
    runs: list[Run] = []
    with (
        contextlib.ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="ragd-vs-ragjson-") as t,
        EmbeddingsAPI(dim=512, delay=a.delay) as api,
    ):
        tmp = Path(t)
        if a.corpus == "manpages":
            manpage_corpus.build(tmp / "corpus", a.per_lang, a.debs)
        else:
            make_corpus(tmp / "corpus", a.per_lang, a.folders)
        sources = [p for p in (tmp / "corpus").rglob("*") if p.is_file()]
        mb = sum(p.stat().st_size for p in sources) / 1e6
        print(
            f"corpus: {a.corpus}, {len(sources)} files ({a.per_lang} zh + {a.per_lang} en), {mb:.1f} MB; "
            f"+{a.delay * 1000:.0f} ms a request; {a.load} busy loops"
        )
        stack.enter_context(busy_loops(a.load))
        tools = [a.only] if a.only else ["ragjson", "ragd"]
        tools += ["ragd-old"] if a.ragd_old else []
        for i in range(a.repeat):
            for tool in tools if i % 2 == 0 else tools[::-1]:
                tree, home = tmp / f"{tool}-{i}" / "tree", tmp / f"{tool}-{i}" / "home"
                shutil.copytree(tmp / "corpus", tree)
                if tool == "ragjson":
                    run = run_ragjson(a.rag, api, tree, home)
                else:
                    run = run_ragd(api, tree, home, a.ragd_old if tool == "ragd-old" else None, a.ragd_jobs)
                print(run.line(), flush=True)
                runs.append(run)
                shutil.rmtree(tree.parent)
    summarise(runs)


def summarise(runs: list[Run]) -> None:
    best = {}
    for tool in ("ragjson", "ragd", "ragd-old"):
        walls = [r.wall for r in runs if r.tool == tool]
        if walls:
            best[tool] = min(walls)
            print(
                f"{tool}: best {min(walls):.2f} s, median {statistics.median(walls):.2f} s over {len(walls)} runs"
            )
    updates = [r.update for r in runs if r.tool == "ragjson"]
    for tool in ("ragd", "ragd-old"):
        if "ragjson" in best and tool in best:
            print(
                f"ratio (best ragjson update + index / best {tool}): {best['ragjson'] / best[tool]:.2f}x; "
                f"(best ragjson update alone / best {tool}): {min(updates) / best[tool]:.2f}x"
            )


if __name__ == "__main__":
    main()
