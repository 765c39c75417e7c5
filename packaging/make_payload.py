"""Assemble the installer's payload from the PyInstaller one-directory build (called by packaging/build.sh).

    python packaging/make_payload.py BUILD_DIR PAYLOAD_DIR ARCHIVE
BUILD_DIR (build/dist/ragd: ragd, ragctl, _internal/) is moved to PAYLOAD_DIR/bin; the unit templates, the
sysctl example and docs/operations.md go to PAYLOAD_DIR/share; ragd-payload.json records the version, the
Python, the platform and the glibc baseline (the newest GLIBC_x.y symbol version any bundled ELF file needs).
ARCHIVE is a .tar.gz of PAYLOAD_DIR with the manifest as its first member.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "agent"), str(ROOT / "packaging" / "installer")]

from ragd import __version__  # noqa: E402
from ragd_installer.payload import MANIFEST_NAME  # noqa: E402

SHARE = {
    "share/systemd/ragd.service": ROOT / "systemd" / "ragd.service",
    "share/systemd/ragd-system.service": ROOT / "systemd" / "ragd-system.service",
    "share/systemd/60-ragd-inotify.conf": ROOT / "systemd" / "60-ragd-inotify.conf",
    "share/doc/ragd/operations.md": ROOT / "docs" / "operations.md",
}
_GLIBC = re.compile(rb"GLIBC_(2\.[0-9]+(?:\.[0-9]+)?)\x00")


def glibc_baseline(tree: Path) -> str:
    """The newest GLIBC_ symbol version referenced by an ELF file of the tree (what the build needs at least)."""
    best: tuple[int, ...] = (0,)
    for path in tree.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
            data = f.read()
        for m in _GLIBC.finditer(data):
            best = max(best, tuple(int(x) for x in m.group(1).decode().split(".")))
    return ".".join(map(str, best)) if best != (0,) else ""


def assemble(build_dir: Path, payload: Path) -> dict[str, str]:
    if payload.exists():
        shutil.rmtree(payload)
    payload.mkdir(parents=True)
    shutil.move(str(build_dir), payload / "bin")
    for rel, src in SHARE.items():
        (payload / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, payload / rel)
    manifest = {
        "name": "ragd",
        "version": __version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "glibc": glibc_baseline(payload / "bin"),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (payload / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def archive(payload: Path, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz", compresslevel=6) as tar:
        tar.add(payload / MANIFEST_NAME, arcname=MANIFEST_NAME)  # first: `--version` stops reading here
        for entry in sorted(payload.iterdir()):
            if entry.name != MANIFEST_NAME:
                tar.add(entry, arcname=entry.name)


def main() -> int:
    build_dir, payload, out = (Path(a) for a in sys.argv[1:4])
    manifest = assemble(build_dir, payload)
    archive(payload, out)
    print(json.dumps(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
