"""The first minute as a user meets it (issue 39). Prints figures; asserts nothing.

    python -m bench.bench_first_minute [--fresh 5] [--rested 10] [--rest-after 5] [--load N]

1. fresh: a new data directory and a folder with one small note; `ragd run DIR` started (the bundled model, the
   defaults), then `ragctl search WORD` (a new process each time, as a user types it) every 0.1 s until the note is
   found: seconds from the start of `ragd run`. Beside it, `ragctl wait` started right after `ragd run`: its exit
   status and seconds (it waits for an agent that is starting, within its timeout).
2. rested: an agent over 50 notes, idle, then resting (`run.rest_after` = --rest-after seconds; `ragctl status`
   says so); a note rewritten with a new word, `ragctl search` polled every 0.05 s until it is found; each edit
   after the agent rested again: p50, p95 and max over --rested edits.

`--load N` keeps N busy loops running throughout (the "loaded" figures). The 1-minute load average is printed with
each figure.
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
import uuid
from pathlib import Path

from bench.bench_agent import agent_env, pct
from bench.bench_vs_ragjson import busy_loops

RAGD = [sys.executable, "-m", "ragd"]
RAGCTL = [sys.executable, "-m", "ragctl"]


def found(word: str, env: dict[str, str]) -> bool:
    out = subprocess.run([*RAGCTL, "search", word, "--mode", "keyword", "--json"], env=env, capture_output=True,
                         text=True)  # fmt: skip
    return out.returncode == 0 and bool(json.loads(out.stdout).get("results"))


def fresh(base: Path) -> tuple[float, float, int]:
    """Seconds from `ragd run` to the note found; `ragctl wait`'s seconds and exit status."""
    root = base / "kb"
    root.mkdir(parents=True)
    word = "fm" + uuid.uuid4().hex[:10]
    (root / "note.md").write_text(f"# A note\n\nThe word {word} is in this note.\n")
    env = agent_env(base)
    t0 = time.monotonic()
    agent = subprocess.Popen([*RAGD, "-q", "run", str(root)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    waiter = subprocess.Popen([*RAGCTL, "wait", "--timeout", "120"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        while not found(word, env):
            if time.monotonic() - t0 > 180:
                raise SystemExit("fresh: the note was not found within 180 s")
            time.sleep(0.1)
        first = time.monotonic() - t0
        code = waiter.wait(timeout=180)
        waited = time.monotonic() - t0
        return first, waited, code
    finally:
        agent.terminate()
        agent.wait(timeout=60)
        if waiter.poll() is None:
            waiter.kill()


def status(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run([*RAGCTL, "status", "--json"], env=env, capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def resting(st: dict[str, object]) -> bool:
    index = st.get("index")
    return isinstance(index, dict) and bool(index.get("resting"))


def rested(base: Path, edits: int, rest_after: float) -> list[float]:
    root = base / "kb"
    root.mkdir(parents=True)
    for i in range(50):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nSome text of note {i}, about nothing in particular.\n")
    env = agent_env(base, f"[run]\nrest_after = {rest_after}\n")
    agent = subprocess.Popen([*RAGD, "-q", "run", str(root)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    times = []
    try:
        subprocess.run([*RAGCTL, "wait", "--timeout", "300"], env=env, check=True, capture_output=True)
        for n in range(edits):
            deadline = time.monotonic() + rest_after * 4 + 60
            while not resting(status(env)):
                if time.monotonic() > deadline:
                    raise SystemExit(f"rested: the agent did not rest within {rest_after * 4 + 60:.0f} s")
                time.sleep(0.5)
            word = "ed" + uuid.uuid4().hex[:10]
            t0 = time.monotonic()
            (root / f"n{n % 50}.md").write_text(f"# Note {n}\n\nEdited: the word {word} is new here.\n")
            while not found(word, env):
                if time.monotonic() - t0 > 120:
                    raise SystemExit("rested: an edit was not found within 120 s")
                time.sleep(0.05)
            times.append(time.monotonic() - t0)
            print(f"  edit {n + 1}: {times[-1]:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        agent.terminate()
        agent.wait(timeout=60)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh", type=int, default=5, help="fresh agents started")
    ap.add_argument("--rested", type=int, default=10, help="edits made to a rested agent")
    ap.add_argument("--rest-after", type=float, default=5.0, help="run.rest_after of the rested agent (s)")
    ap.add_argument("--load", type=int, default=0, help="busy loops running throughout")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{a.load} busy loops")  # fmt: skip
    with busy_loops(a.load), tempfile.TemporaryDirectory(prefix="ragd-first-minute-") as t:
        firsts = []
        for i in range(a.fresh):
            first, waited, code = fresh(Path(t) / f"fresh{i}")
            firsts.append(first)
            print(f"fresh agent {i + 1}: note found after {first:.2f} s; `ragctl wait` exit {code} after "
                  f"{waited:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
        if firsts:
            print(f"fresh agent -> first note found: p50 {pct(firsts, 50):.2f} s, max {max(firsts):.2f} s")
        if a.rested:
            times = rested(Path(t) / "rested", a.rested, a.rest_after)
            print(f"rested agent -> edit found: p50 {pct(times, 50):.2f} s, p95 {pct(times, 95):.2f} s, "
                  f"max {max(times):.2f} s over {len(times)} edits")  # fmt: skip


if __name__ == "__main__":
    main()
