"""Does the OCR engine import here? Asked in a child process, so that the agent's own process does not keep the
engine's modules (about 55 MB) only to say whether OCR works (parse/ocr.py: `unavailable`).

Run as `python -m ragd.pipeline.parse.ocr_probe` (or `ragd --ragd-ocr-probe` when frozen). It prints one line:
`ok`, or the import's error (`ImportError: libxcb.so.1: cannot open shared object file: ...`).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

ENGINE_MODULE = "rapidocr_onnxruntime"
FLAG = "--ragd-ocr-probe"  # how a frozen `ragd` binary is asked to run this probe
TIMEOUT_S = 120.0


def command() -> list[str]:
    """This interpreter running this module, or the frozen `ragd` binary."""
    if getattr(sys, "frozen", False):
        return [sys.executable, FLAG]
    return [sys.executable, "-m", "ragd.pipeline.parse.ocr_probe"]


def run() -> str | None:
    """None when the engine imports in a child process; else why not."""
    package_parent = str(
        Path(__file__).resolve().parents[3]
    )  # the child imports the same ragd as this process
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_parent, path) if p)}
    try:
        done = subprocess.run(
            command(), capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"the check could not run: {err}"
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines and lines[-1] == "ok":
        return None
    return lines[-1] if lines else f"the check exited {done.returncode}: {done.stderr.strip()[-300:]}"


def main() -> int:
    try:
        importlib.import_module(ENGINE_MODULE)
    except Exception as exc:  # ImportError, OSError from a native library, or the package's own
        print(f"{type(exc).__name__}: {exc}".replace("\n", " "), flush=True)
        return 1
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
