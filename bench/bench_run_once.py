"""Benchmarks of `ragd run --once` (issue 2). Prints figures; asserts nothing.

    python -m bench.bench_run_once [--files 1000] [--noop-files 10000] [--noop-dirs 100] [--skip-local]

1. A generated corpus (md/txt/html, Chinese/English/mixed, ~5 MB): files/s, chunks/s, peak RSS of the ragd
   process — with the bundled local model, and with a local OpenAI-compatible server adding 50 ms per request.
2. One paragraph edited in a 50-chunk file: texts sent to the embedder.
3. A no-op re-run over N unchanged files in D directories: wall time (many directories, little in each, weigh
   the per-directory cost: the scheduler, the tracker, the outcome handler); the first re-run fills the stat
   cache, and one more run goes without it and without the index check record (what a first re-run costs).

`--skip-local` leaves out the bundled model (minutes to load and run on 2 cores); the rest takes about two
minutes there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.corpus import generate
from bench.fake_api import EmbeddingsAPI


def ragd_once(root: Path, env: dict[str, str], *extra: str) -> tuple[dict, float, float]:
    """Run `ragd run --once --json`; return (summary, wall seconds, peak RSS MiB of that process)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragd", "-q", "run", "--once", "--json", *extra, str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read() if proc.stdout else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"ragd failed: {proc.stderr.read() if proc.stderr else ''}")
    return json.loads(out), wall, usage.ru_maxrss / 1024


def env_for(base: Path, config: str | None) -> dict[str, str]:
    base.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    env.update(HOME=str(base), XDG_CONFIG_HOME=str(base / "cfg"), XDG_DATA_HOME=str(base / "data"))
    if config:
        (base / "ragd.toml").write_text(config)
        env["RAGD_CONFIG"] = str(base / "ragd.toml")
    return env


def api_config(server: EmbeddingsAPI, batch: int = 64) -> str:
    return (
        f'[embedding]\nprovider = "openai"\nmodel = "fake-embed-512"\ndimension = {server.dim}\n'
        f'base_url = "{server.base_url}"\napi_key = "x"\nbatch_size = {batch}\nconcurrency = 4\n'
    )


def report(label: str, s: dict, wall: float, rss: float) -> None:
    print(
        f"{label}: {s['embedded']} files, {s['chunks']} chunks in {wall:.1f} s -> "
        f"{s['embedded'] / wall:.1f} files/s, {s['chunks'] / wall:.1f} chunks/s, peak RSS {rss:.0f} MiB"
    )


def bench_corpus(tmp: Path, files: int, skip_local: bool) -> None:
    corpus = tmp / "corpus"
    paths = generate(corpus, files, 40)
    mb = sum(p.stat().st_size for p in paths) / 1e6
    print(f"corpus: {files} files, {mb:.1f} MB")
    if not skip_local:
        s, wall, rss = ragd_once(corpus, env_for(tmp / "local", None))
        report("local model (use-multilingual-v3, 1 thread)", s, wall, rss)
        for p in corpus.rglob(".rag"):
            subprocess.run(["rm", "-rf", str(p)], check=True)
    with EmbeddingsAPI(dim=512, delay=0.05) as server:
        s, wall, rss = ragd_once(corpus, env_for(tmp / "api", api_config(server)))
        report("OpenAI-compatible server on 127.0.0.1, +50 ms/request", s, wall, rss)
        print(f"  requests: {server.requests}, texts: {server.texts}")


def bench_edit(tmp: Path) -> None:
    root = tmp / "edit"
    root.mkdir()
    paras = [
        f"Paragraph {i}. " + "The agent keeps folders searchable; 代理让文件夹可以搜索。 " * 12
        for i in range(50)
    ]
    doc = root / "long.md"
    doc.write_text("# Long document\n\n" + "\n\n".join(paras) + "\n")
    with EmbeddingsAPI(dim=512) as server:
        env = env_for(tmp / "edit-env", api_config(server))
        first, _, _ = ragd_once(root, env)
        before = server.texts
        doc.write_text(doc.read_text().replace("Paragraph 25.", "Paragraph 25 (edited, with new words)."))
        second, _, _ = ragd_once(root, env)
        sent = server.texts - before
    print(
        f"edit one paragraph of a {first['chunks']}-chunk file: {sent} texts sent to the embedder, "
        f"{second['vectors_reused']} vectors reused"
    )


def bench_noop(tmp: Path, n: int, dirs: int) -> None:
    root = tmp / "noop"
    generate(root, n, dirs, seed=11, mean_bytes=600)
    with EmbeddingsAPI(dim=512) as server:
        env = env_for(tmp / "noop-env", api_config(server, batch=256))
        _, wall1, _ = ragd_once(root, env)
        walls = []
        for _ in range(3):
            s, wall, _ = ragd_once(root, env)
            assert s["embedded"] == 0, s
            walls.append(wall)
        data = Path(env["XDG_DATA_HOME"]) / "ragd"  # derived state: the stat cache, the index check record
        for p in [data / "sidecars.cache", *(data / "index").glob("*.checked")]:
            p.unlink(missing_ok=True)
        _, cold, _ = ragd_once(root, env)
    print(
        f"no-op re-run over {s['unchanged']} unchanged files in {s['dirs']} directories: best {min(walls):.2f} s, "
        f"runs {', '.join(f'{w:.2f}' for w in walls)} s (first indexing took {wall1:.1f} s); without the stat "
        f"cache and the index record {cold:.2f} s; index opened in the last run: {s['index'].get('opened')}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--noop-files", type=int, default=10000)
    ap.add_argument("--noop-dirs", type=int, default=100)
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--parts", default="corpus,edit,noop", help="comma-separated subset of corpus,edit,noop")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    with tempfile.TemporaryDirectory(prefix="ragd-bench-") as t:
        tmp = Path(t)
        if "corpus" in parts:
            bench_corpus(tmp, a.files, a.skip_local)
        if "edit" in parts:
            bench_edit(tmp)
        if "noop" in parts:
            bench_noop(tmp, a.noop_files, a.noop_dirs)


if __name__ == "__main__":
    main()
