"""A huge folder appearing under a watched root (issue 36: a mail export, a notes dump). Prints figures; asserts
nothing.

    python -m bench.bench_bigfolder [--files 30000] [--every 5] [--no-alone] [--rested] [--smaps]
                                    [--edit] [--rename] [--move]

The agent (`ragd run`, defaults: the bundled model) watches an empty root; N small distinct notes (a few hundred
bytes of English, Chinese or both, each with its own token, all with a common one) are written beside the root and
moved into it as one folder. Then, until the agent is idle:

- when the first file of the folder is searchable (keyword search for the common token, polled every 0.2 s);
- samples of `ragctl status --json`: the phase's files done, its time left, texts embedded and requests made;
- the agent's RSS (its own process) and its workers' (the child processes), peak during and once idle;
- texts per embed request (the status' `embedder.texts / embedder.requests`).

Then, unless `--no-alone`, the embedder alone: the bundled model in the same number of worker processes embeds the
texts the agent embedded (each file's chunks and lead, read back from the sidecars), in batches as large as the
agent's queue makes them, and the ratio of the agent's files per second to the embedder's.

With `--edit`, once idle, one note is edited and the agent waits for idle again: the folder's job lists it once
more, and the stat cache then holds every entry (as after any later change in it, or a restart), which a rename or
move finds again. With `--rename`, once idle the folder is renamed within the root (`notes` → `notes renamed`, as a
person renames a folder in a file manager): when its first file is found under the new name, the longest time it was
found under neither name meanwhile (a search polled every 0.05 s), when the agent is idle again, the CPU the agent
and its workers used for it (nothing is embedded again: the sidecars moved with the files), and whether a search
still finds any of its files under the old name. With `--move`, then (after the rename, if asked) the folder is
moved into another folder of the root (`elsewhere/`, made before the agent starts): the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_agent import Agent
from bench.bench_first_minute import resting
from bench.corpus import EN, ZH

COMMON = "bigfoldertoken"


def note(rng: random.Random, i: int) -> str:
    kind = rng.choice(("en", "zh", "mixed"))
    pool = ZH if kind == "zh" else EN if kind == "en" else ZH + EN
    sep = "" if kind == "zh" else " "
    lines = [sep.join(rng.choice(pool) for _ in range(rng.randint(2, 5))) for _ in range(rng.randint(1, 3))]
    return f"# Note {i} {COMMON}\n\nkey nt{i:06d}q {rng.randrange(10**9)}\n\n" + "\n\n".join(lines) + "\n"


def make_folder(where: Path, n: int) -> Path:
    rng = random.Random(36)
    folder = where / "notes"
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"note{i:06d}.md").write_text(note(rng, i), encoding="utf-8")
    return folder


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory (VmRSS), or a part of it: RssAnon (its own), RssFile (mapped files: the index's,
    the model's weights, the libraries)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    """`pid`'s children, theirs, and so on: the workers are forked by a fork server, a child of the agent."""
    out, todo = [], children(pid)
    while todo:
        c = todo.pop()
        out.append(c)
        try:
            todo += children(c)
        except OSError:  # gone meanwhile
            continue
    return out


class Cpu:
    """CPU seconds of the agent's process and of its worker processes, from `/proc/PID/stat`, counted from when it is
    made. The workers are the agent's children (the fork server, the resource tracker) with their own descendants:
    each direct child's reading is its CPU, what its children it has waited for used (a worker replaced during the
    job, every `MAX_TASKS` files, keeps what it used), and its living descendants'; its last reading is kept."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = self._read(pid)[:2]
        self.children: dict[int, float] = {}
        self.before = {c: self._tree(c) for c in children(pid)}  # workers already running

    def _read(self, pid: int) -> tuple[float, float, float]:
        """(utime, stime, the CPU of the children it has waited for)."""
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return (0.0, 0.0, 0.0)
        return (int(fields[11]) / self.TICK, int(fields[12]) / self.TICK,
                (int(fields[13]) + int(fields[14])) / self.TICK)  # fmt: skip

    def _tree(self, pid: int) -> float:
        return sum(sum(self._read(p)) for p in [pid, *descendants(pid)])

    def sample(self) -> None:
        for c in children(self.pid):
            got = self._tree(c)
            if got > self.children.get(c, 0.0):
                self.children[c] = got

    def report(self, files: int) -> str:
        user, kernel = (now - then for now, then in zip(self._read(self.pid)[:2], self.start, strict=True))
        workers = sum(t - self.before.get(c, 0.0) for c, t in self.children.items())
        return (f"CPU during the job: agent {user + kernel:.1f} s (user {user:.1f}, kernel {kernel:.1f}), "
                f"workers {workers:.1f} s (the agent's {len(self.children)} child processes and theirs); per file: agent "
                f"{1000 * (user + kernel) / files:.2f} ms, workers {1000 * workers / files:.2f} ms")  # fmt: skip


def memory(pid: int) -> tuple[float, float]:
    """(the agent's RSS, its worker processes' RSS together), in MiB."""
    return rss_kib(pid) / 1024, sum(rss_kib(c) for c in descendants(pid)) / 1024


def smaps(pid: int, top: int = 12) -> None:
    """Print a process's resident memory by what it maps (its own memory, glibc's heap, each mapped file), largest
    first (`/proc/PID/smaps`)."""
    for line in smaps_lines(pid, top):
        print(line)


def smaps_lines(pid: int, top: int = 12) -> list[str]:
    rows: dict[str, int] = {}
    name = "[anon]"
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return []
    for line in text.splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            name = parts[5] if len(parts) > 5 else "[anon]"
        elif parts and parts[0] == "Rss:":
            rows[name] = rows.get(name, 0) + int(parts[1])
    return [
        f"    {kib / 1024:7.1f} MiB  {name}"
        for name, kib in sorted(rows.items(), key=lambda kv: -kv[1])[:top]
    ]


def status(env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "ragctl", "status", "--json"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    try:
        return json.loads(out.stdout)  # type: ignore[no-any-return]
    except ValueError:
        return {}


class IdleClock:
    """When the agent became idle, to a few milliseconds: a `ragctl wait` blocks on the agent's socket from when
    `start` is called (the folder's first file searchable: the agent has seen the folder) until the agent is idle,
    and the time it returned is kept. The status samples, every `--every` seconds, would place it only that
    finely (30 s in 240 at 30,000 notes)."""

    def __init__(self, env: dict[str, str], moved_at: float) -> None:
        self.env, self.moved_at = env, moved_at
        self.at: float | None = None
        self._thread = threading.Thread(target=self._wait, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _wait(self) -> None:
        done = subprocess.run([sys.executable, "-m", "ragctl", "wait", "--timeout", "7200"], env=self.env,
                              capture_output=True, check=False)  # fmt: skip
        if done.returncode == 0:
            self.at = time.monotonic() - self.moved_at

    def seconds(self, fallback: float) -> float:
        """The idle time `ragctl wait` saw, else (it failed or never ran) `fallback`, the sample's."""
        if self._thread.ident is not None:
            self._thread.join(timeout=10)
        return self.at if self.at is not None else fallback


def watch(
    agent: Agent, moved_at: float, every: float, n_files: int, *, by_map: bool = False
) -> dict[str, Any]:
    """Poll until idle: first searchable, status samples, memory (`by_map`: the agent's memory by map at its peak,
    printed once idle), and the CPU the agent and its workers used for the `n_files` files. The time to idle is
    `ragctl wait`'s (IdleClock)."""
    first: float | None = None
    clock = IdleClock(agent.env, moved_at)
    peak_agent = peak_workers = 0.0
    peak_at = 0.0
    peak_maps: list[str] = []
    next_sample = moved_at
    samples = []
    cpu = Cpu(agent.proc.pid)
    while True:
        now = time.monotonic()
        a, w = memory(agent.proc.pid)
        cpu.sample()
        if a > peak_agent:
            peak_agent, peak_at = a, now - moved_at
            if by_map:
                peak_maps = smaps_lines(agent.proc.pid)
        peak_workers = max(peak_workers, w)
        if first is None:
            hits = agent.call("search", {"query": COMMON, "mode": "keyword", "top_k": 1})["results"]
            if hits:
                first = now - moved_at
                clock.start()
                print(f"first file searchable after {first:.1f} s", flush=True)
        if now >= next_sample:
            next_sample += every
            st = status(agent.env)
            prog, emb = st.get("progress", {}), st.get("embedder", {})
            files = sum(sum(r.get("files", {}).values()) for r in st.get("roots", []))
            line = (f"  +{now - moved_at:6.1f} s  files_done {prog.get('files_done')}/{prog.get('files_total')}"
                    f"  time left {prog.get('eta_s')}  files in status {files}  texts {emb.get('texts')}"
                    f"  requests {emb.get('requests')}  agent {a:.0f} MiB (anonymous "
                    f"{rss_kib(agent.proc.pid, 'RssAnon') / 1024:.0f})  workers {w:.0f} MiB")  # fmt: skip
            print(line, flush=True)
            samples.append(st)
            if st.get("agent", {}).get("idle") and now - moved_at > 5:
                break
        time.sleep(0.2)
    sampled = time.monotonic() - moved_at
    idle = clock.seconds(sampled)
    print(f"idle after {idle:.1f} s by `ragctl wait` (seen by the status sample at +{sampled:.1f} s)")
    cpu.sample()
    print(cpu.report(n_files))
    if by_map:
        print(f"  the agent's resident memory by map at its peak ({peak_agent:.0f} MiB, +{peak_at:.0f} s):")
        print("\n".join(peak_maps))
    time.sleep(3)  # the agent trims its memory once idle
    a, w = memory(agent.proc.pid)
    print(
        f"  idle: agent {a:.0f} MiB (anonymous {rss_kib(agent.proc.pid, 'RssAnon') / 1024:.0f}), workers {w:.0f} MiB"
    )
    st = status(agent.env)
    emb = st.get("embedder", {})
    print(
        f"  the index: {st.get('index', {}).get('chunks')} chunks (a note is one chunk; its lead is a field of it)"
    )
    return {"first_s": first, "idle_s": idle, "peak_agent": peak_agent, "peak_at": peak_at, "peak_workers": peak_workers,
            "idle_agent": a, "idle_workers": w, "texts": emb.get("texts", 0),
            "requests": emb.get("requests", 0)}  # fmt: skip


def edited(agent: Agent, folder: Path) -> None:
    """Edit the folder's first note and wait until the agent is idle again; print the time and the agent's RSS."""
    t0 = time.monotonic()
    with (folder / "note000000.md").open("a", encoding="utf-8") as fh:
        fh.write("\nedited once indexed\n")
    time.sleep(1.0)  # past the watcher's quiet time, so that the wait sees the job
    agent.wait()
    print(
        f"one note edited: idle after {time.monotonic() - t0:.1f} s; agent {memory(agent.proc.pid)[0]:.0f} MiB"
    )


def renamed(agent: Agent, folder: Path, new: Path, n_files: int, how: str) -> None:
    """Rename `folder` to `new` (`how`: in its folder, or into another); print when its first note is found under
    the new name (and for how long it was found under neither), when the agent is idle again, the CPU used, and how
    many hits are left elsewhere."""
    chunks = status(agent.env).get("index", {}).get("chunks")
    cpu = Cpu(agent.proc.pid)
    peak = [0.0, 0.0]  # the agent's RSS at its peak, and the anonymous part of it then
    done = threading.Event()

    def sample() -> None:  # the agent's RSS every 0.1 s while the rename is applied
        while not done.wait(0.1):
            rss = memory(agent.proc.pid)[0]
            if rss > peak[0]:
                peak[:] = [rss, rss_kib(agent.proc.pid, "RssAnon") / 1024]

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    folder.rename(new)
    first = None
    lost_at: float | None = None  # since when the note is found under neither name
    lost = 0.0  # the longest such stretch
    while first is None:
        hits = agent.call("search", {"query": "nt000000q", "mode": "keyword", "top_k": 1})["results"]
        now = time.monotonic() - t0
        if hits and Path(hits[0]["path"]).parent == new:
            first = now
        elif now > 600:
            raise SystemExit("the renamed folder's first note was not found within 600 s")
        elif not hits and lost_at is None:
            lost_at = now
        elif hits and lost_at is not None:
            lost, lost_at = max(lost, now - lost_at), None
        if first is None:
            time.sleep(0.05)
    if lost_at is not None:
        lost = max(lost, first - lost_at)
    agent.wait()
    idle = time.monotonic() - t0
    done.set()
    sampler.join()
    cpu.sample()
    time.sleep(3)  # the agent trims its memory once idle
    st = status(agent.env)
    left = [h["path"] for h in agent.call("search", {"query": COMMON, "mode": "keyword", "top_k": 50})["results"]
            if Path(h["path"]).parent != new]  # fmt: skip
    print(f"{how}: first note found under the new name after {first:.2f} s (found under neither "
          f"name for {lost:.2f} s of it); idle after {idle:.1f} s; "
          f"the index {chunks} → {st.get('index', {}).get('chunks')} chunks; of 50 hits, {len(left)} under another "
          f"name")  # fmt: skip
    print(
        f"  agent RSS meanwhile: peak {peak[0]:.0f} MiB (anonymous {peak[1]:.0f}); idle after it "
        f"{memory(agent.proc.pid)[0]:.0f} MiB (anonymous {rss_kib(agent.proc.pid, 'RssAnon') / 1024:.0f})"
    )
    print(cpu.report(n_files))
    # past memory.COMPACT_EVERY_S since the job's idle moment, before run.rest_after
    time.sleep(max(0.0, 65.0 - (time.monotonic() - t0 - idle)))
    print(f"  a minute after it: agent {memory(agent.proc.pid)[0]:.0f} MiB "
          f"(anonymous {rss_kib(agent.proc.pid, 'RssAnon') / 1024:.0f})")  # fmt: skip


def rested(agent: Agent) -> None:
    """Wait for the agent to rest (`run.rest_after` without a search or a change: the index closed, the question
    model dropped, memory given back), then print its RSS: the idle agent as a user's machine mostly has it."""
    t0 = time.monotonic()
    while not resting(status(agent.env)):
        if time.monotonic() - t0 > 600:
            raise SystemExit("the agent did not rest within 600 s")
        time.sleep(2)
    time.sleep(3)
    a, w = memory(agent.proc.pid)
    anon = rss_kib(agent.proc.pid, "RssAnon") / 1024
    print(f"  rested after {time.monotonic() - t0:.0f} s more: agent {a:.0f} MiB (anonymous {anon:.0f}), "
          f"workers {w:.0f} MiB")  # fmt: skip


def texts_of(folder: Path) -> list[str]:
    """What the agent embedded: each file's chunks and lead, from its sidecar."""
    out = []
    for entry in sorted((folder / ".rag").glob("*.ragjson")):
        data = json.loads(entry.read_text(encoding="utf-8"))
        out += [c["content"] for c in data.get("chunks", [])]
        lead = data.get("lead") or {}
        if lead.get("content"):
            out.append(lead["content"])
    return out


def embedder_alone(texts: list[str], batch: int) -> float:
    """Seconds the bundled model, in the agent's number of worker processes, takes to embed `texts`."""
    from ragd.config import Config
    from ragd.pipeline.embed import LazyEmbedQueue

    cfg = Config()
    with tempfile.TemporaryDirectory(prefix="ragd-bench-models-") as models:
        queue = LazyEmbedQueue(cfg.embedding, run=cfg.run, models=Path(models))
        try:
            queue.embed(texts[:batch])  # the workers started and their models loaded
            t0 = time.perf_counter()
            futures = [queue.submit(texts[i : i + batch]) for i in range(0, len(texts), batch)]
            for f in futures:
                f.result()
            return time.perf_counter() - t0
        finally:
            queue.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=30000)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between status samples")
    ap.add_argument("--no-alone", action="store_true", help="skip the embedder-alone figure")
    ap.add_argument(
        "--smaps",
        action="store_true",
        help="print the agent's resident memory by map (its own, the heap, each mapped file) at its peak and once idle",
    )
    ap.add_argument(
        "--rename",
        action="store_true",
        help="once idle, rename the folder within the root and say how long until it is idle again, and its CPU",
    )
    ap.add_argument(
        "--edit",
        action="store_true",
        help="once idle, edit one note and wait for idle again (the folder's job lists it once more and the stat "
        "cache then holds its entries, as after any later change in it or a restart), before a rename or move",
    )
    ap.add_argument(
        "--move",
        action="store_true",
        help="once idle (and renamed), move the folder into another folder of the root: the same figures",
    )
    ap.add_argument(
        "--rested",
        action="store_true",
        help="once idle, wait for the agent to rest (run.rest_after) and say its RSS",
    )
    args = ap.parse_args(argv)
    print(f"load: {os.getloadavg()}, cores: {len(os.sched_getaffinity(0))}, files: {args.files}")
    with tempfile.TemporaryDirectory(prefix="ragd-bigfolder-") as tmp:
        base = Path(tmp)
        root, outside = base / "kb", base / "outside"
        root.mkdir()
        if args.move:
            (root / "elsewhere").mkdir()
        t0 = time.perf_counter()
        folder = make_folder(outside, args.files)
        print(f"{args.files} notes written in {time.perf_counter() - t0:.1f} s")
        agent = Agent(base, root, None)
        try:
            agent.wait()
            a, w = memory(agent.proc.pid)
            print(f"agent idle on an empty root: agent {a:.0f} MiB, workers {w:.0f} MiB")
            moved = root / folder.name
            shutil.move(folder, moved)
            r = watch(agent, time.monotonic(), args.every, args.files, by_map=args.smaps)
            if args.smaps:
                print("  the idle agent's resident memory by map:")
                smaps(agent.proc.pid)
            if args.edit:
                edited(agent, moved)
            if args.rename:
                new = moved.with_name(moved.name + " renamed")
                renamed(agent, moved, new, args.files, "renamed within the root")
                moved = new
            if args.move:
                new = root / "elsewhere" / moved.name
                renamed(agent, moved, new, args.files, "moved into another folder")
                moved = new
            if args.rested:
                rested(agent)
        finally:
            agent.stop()
        per_request = r["texts"] / r["requests"] if r["requests"] else 0.0
        print(f"first searchable: {r['first_s']:.1f} s; idle after {r['idle_s']:.1f} s "
              f"({args.files / r['idle_s']:.1f} files/s)")  # fmt: skip
        print(f"agent RSS: peak {r['peak_agent']:.0f} MiB (at +{r['peak_at']:.0f} s), idle {r['idle_agent']:.0f} MiB; workers: peak "
              f"{r['peak_workers']:.0f} MiB, idle {r['idle_workers']:.0f} MiB")  # fmt: skip
        print(
            f"embedder: {r['texts']} texts in {r['requests']} requests ({per_request:.1f} texts per request)"
        )
        if not args.no_alone:
            texts = texts_of(moved)
            alone = embedder_alone(texts, 32)
            ratio = alone / r["idle_s"]
            print(
                f"embedder alone: {len(texts)} texts in {alone:.1f} s ({len(texts) / alone:.1f} texts/s, "
                f"{args.files / alone:.1f} files/s); the agent's throughput is {100 * ratio:.0f} % of it"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
