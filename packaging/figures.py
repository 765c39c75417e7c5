"""The size figures of docs/operations.md ("The frozen program"), measured on the built artefacts, never typed.

    .venv/bin/python packaging/figures.py [INSTALLER]     (default: the newest dist/ragd-installer-*)

Installs with the one-file installer into a temp DESTDIR (`install --root DEST --no-start`) with $TMPDIR pointing
at an empty folder, whose size is sampled every 20 ms while the installer runs: the peak is the space the
installer unpacks itself into. Then measures the installed program (bytes and files below lib/ragd/<version>).
Prints one JSON line and the rows of the table in docs/operations.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MB = 1_000_000
SAMPLE = 0.02


def tree_size(root: Path) -> tuple[int, int]:
    """Bytes (apparent sizes, as du -sb) and number of regular files below `root`; files vanishing meanwhile
    (the installer removes its temp folder as it ends) are skipped."""
    total = files = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            try:
                st = os.lstat(os.path.join(folder, name))
            except FileNotFoundError:
                continue
            total += st.st_size
            files += 1
    return total, files


def install(installer: Path, work: Path) -> tuple[Path, int, float]:
    """The installed program's directory, the installer's peak temp space (bytes), its wall time (s)."""
    tmp, dest = work / "tmp", work / "dest"
    tmp.mkdir()
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_size(tmp)[0])
            time.sleep(SAMPLE)

    env = {**os.environ, "TMPDIR": str(tmp), "HOME": "/home/figures"}
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        subprocess.run([str(installer), "install", "--root", str(dest), "--no-start"], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    finally:
        took = time.monotonic() - started
        done.set()
        sampler.join()
    lib = dest / "home/figures/.local/lib/ragd"
    return (lib / os.readlink(lib / "current")), peak, took


def main(argv: list[str]) -> int:
    if argv:
        installer = Path(argv[0])
    else:
        found = sorted(Path("dist").glob("ragd-installer-*-*"), key=lambda p: p.stat().st_mtime)
        if not found:
            print("figures.py: no dist/ragd-installer-*: run make dist", file=sys.stderr)
            return 2
        installer = found[-1]
    payloads = sorted(installer.parent.glob("ragd-*.tar.gz"), key=lambda p: p.stat().st_mtime)
    with tempfile.TemporaryDirectory(prefix="ragd-figures.") as work:
        program, peak_tmp, took = install(installer, Path(work))
        installed, files = tree_size(program)
    out = {
        "installer": installer.name,
        "installer_bytes": installer.stat().st_size,
        "payload_tar_bytes": payloads[-1].stat().st_size if payloads else None,
        "installed_bytes": installed,
        "installed_files": files,
        "peak_tmp_bytes": peak_tmp,
        "install_s": round(took, 1),
    }
    print(json.dumps(out))
    print(f"| installer file | {out['installer_bytes'] / MB:.0f} MB |")
    tar = f" (payload `.tar.gz`: {out['payload_tar_bytes'] / MB:.0f} MB)" if payloads else ""
    print(f"| installed program | {installed / MB:.0f} MB, {files} files{tar} |")
    print(f"| temporary space while installing (`$TMPDIR`, peak) | {peak_tmp / MB:.0f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
