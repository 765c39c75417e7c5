"""Soak of the model-based test of the live agent (DESIGN §9). Prints figures; asserts nothing itself.

    python -m bench.soak_sync [--examples 200] [--steps 60] [--seed N] [--exclude rule,rule] [--verbose]

Runs `tests/e2e/test_model_sync.py` under pytest with the soak profile (RAGD_MODEL_PROFILE=soak): hypothesis
drives a real `ragd run` through `--examples` random sequences of up to `--steps` steps each, and compares the
agent with the model at every quiet point. A divergence is shrunk to a minimal failing sequence, which pytest
prints; the run then stops (hypothesis reports the distinct failures it found). The figures (examples, steps, quiet
point checks, examples that diverged, seed, time) come from the test's RAGD_MODEL_STATS file.

`--exclude` leaves rules out (names as in the test: move_dir, roots_add, ...; `non_utf8_names` drops file names
that are not UTF-8), to look past a divergence already known and being fixed. The test is run, not imported: bench/
does not import tests/.
"""

from __future__ import annotations

import argparse
import json
import os
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
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ragd-soak-") as tmp:
        stats = Path(tmp) / "stats.json"
        env = {**os.environ, "RAGD_MODEL_PROFILE": "soak", "RAGD_MODEL_EXAMPLES": str(args.examples),
               "RAGD_MODEL_STEPS": str(args.steps), "RAGD_MODEL_STATS": str(stats),
               "RAGD_MODEL_EXCLUDE": args.exclude, "RAGD_MODEL_VERBOSE": "1" if args.verbose else ""}  # fmt: skip
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
        code = subprocess.run(cmd, cwd=REPO, env=env).returncode
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
    print(
        "  result            " + ("no divergence" if code == 0 else f"divergence found (pytest exit {code})")
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
