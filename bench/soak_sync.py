"""Soak of the model-based test of the live agent (DESIGN §9). Prints figures; asserts nothing itself.

    python -m bench.soak_sync [--examples 200] [--steps 60] [--seed N] [--exclude rule,rule] [--verbose]

Runs `tests/e2e/test_model_sync.py` under pytest with the soak profile (RAGD_MODEL_PROFILE=soak): hypothesis
drives a real `ragd run` through `--examples` random sequences of up to `--steps` steps each, and compares the
agent with the model at every quiet point. A divergence is shrunk to a minimal failing sequence, which pytest
prints; the run then stops (hypothesis reports the distinct failures it found). The figures (examples, steps, quiet
point checks, examples that diverged, seed, time) come from the test's RAGD_MODEL_STATS file.

The agent's log of every example that failed is kept (`--keep-logs DIR`, named in the summary): hypothesis shrinks
a divergence by running it again, and one that depends on timing may then pass, leaving no other trace.

`--exclude` leaves rules out (names as in the test: move_dir, roots_add, ...; `non_utf8_names` drops file names
that are not UTF-8), to look past a divergence already known and being fixed. The test is run, not imported: bench/
does not import tests/.

SIGTERM (or a SIGINT sent to this script alone) stops the soak early with its figures: the example running is finished and checked, the test
stops before the next one and writes what it ran, and the summary is printed as for a whole run. A second signal
interrupts pytest at once (the example running is then cut short and may count as diverged). This works for a soak
started in the background too, where a shell leaves SIGINT ignored (pytest gets it restored).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST = "tests/e2e/test_model_sync.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="soak the model-based test of the live agent")
    parser.add_argument("--examples", type=int, default=200, help="random sequences (default 200)")
    parser.add_argument("--steps", type=int, default=60, help="steps per sequence at most (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="replay this seed (default: a random one)")
    parser.add_argument("--exclude", default="", help="rules to leave out, comma-separated")
    parser.add_argument("--verbose", action="store_true", help="print every step as it runs")
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="where the agent's log of each failed example is kept (default: a new folder in the "
                             "system's temp folder, named in the summary)")  # fmt: skip
    args = parser.parse_args(argv)
    keep = args.keep_logs or Path(tempfile.gettempdir()) / f"ragd-soak-logs-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="ragd-soak-") as tmp:
        stats = Path(tmp) / "stats.json"
        stop = Path(tmp) / "stop"
        env = {**os.environ, "RAGD_MODEL_PROFILE": "soak", "RAGD_MODEL_EXAMPLES": str(args.examples),
               "RAGD_MODEL_STEPS": str(args.steps), "RAGD_MODEL_STATS": str(stats),
               "RAGD_MODEL_EXCLUDE": args.exclude, "RAGD_MODEL_VERBOSE": "1" if args.verbose else "",
               "RAGD_MODEL_STOP": str(stop), "RAGD_MODEL_KEEP": str(keep)}  # fmt: skip
        if args.seed is not None:
            env["RAGD_MODEL_SEED"] = str(args.seed)
        paths = [str(REPO / "agent"), str(REPO / "cli"), str(REPO), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        started = time.monotonic()
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            TEST,
            "-q",
            "-p",
            "no:cacheprovider",
            *(["-s"] if args.verbose else []),
        ]
        code, stopped = _run_stoppable(cmd, env, stop)
        wall = time.monotonic() - started
        figures = json.loads(stats.read_text()) if stats.exists() else {}
    print()
    print(f"soak: {args.examples} examples x {args.steps} steps asked; excluded: {args.exclude or 'none'}")
    print(f"  examples run      {figures.get('examples', '?')}")
    print(f"  steps run         {figures.get('steps', '?')}")
    print(f"  quiet-point checks {figures.get('checks', '?')}")
    print(f"  examples diverged {figures.get('failures', '?')} (shrinking runs count too)")
    print(f"  examples dropped  {figures.get('dropped', '?')} (by hypothesis: out of data, not checked)")
    print(f"  seed              {figures.get('seed', '?')}")
    print(f"  time              {wall:.0f} s")
    if code == 0:
        result = "no divergence"
    elif stopped and not figures.get("failures"):
        result = "stopped early; no divergence in what ran"
    else:
        result = f"divergence found (pytest exit {code})"
    print(f"  result            {result}")
    if keep.is_dir():
        print(f"  failed examples' agent logs: {keep}")
    return 0 if stopped and not figures.get("failures") else code


def _run_stoppable(cmd: list[str], env: dict[str, str], stop: Path) -> tuple[int, bool]:
    """Run pytest; a first SIGINT or SIGTERM to this script makes `stop` (the test stops before its next example),
    a second reaches pytest as a SIGINT."""
    # A background job starts with SIGINT ignored, and an ignored signal stays ignored across exec: Python would
    # then install no KeyboardInterrupt handler in pytest. Its child gets the default back.
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    )

    stopped = []

    def forward(signum: int, frame: object) -> None:
        stopped.append(signum)
        if len(stopped) == 1:
            stop.touch()
            print(
                f"\nsoak: signal {signum}: stopping after this example (again: at once)",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(f"\nsoak: signal {signum}: interrupting pytest", file=sys.stderr, flush=True)
            proc.send_signal(signal.SIGINT)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait(), bool(stopped)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
