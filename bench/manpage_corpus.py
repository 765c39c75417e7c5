"""The referee's corpus of the ragjson comparison (issue 39): 200 Chinese and 200 English plain-text man pages.

    python -m bench.manpage_corpus OUT [--per-lang 200] [--debs DIR]

The pages come from Debian's `manpages-zh` (Simplified Chinese, every section) and `manpages` (the Linux
man-pages project, English), the pinned `.deb` files of the development set (bench/devset/build.py: fetched with
`apt-get download`, sha256-checked, read without dpkg). Each page is rendered by the same groff as the
development set into plain text, as `man` shows it (`OUT/zh/man1/du.1.txt`), so the tools parse text files, not
Markdown. The pages are taken evenly spaced from each package's sorted list of pages, so sizes and sections
vary as in a real manual; the same packages and groff give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from bench.devset.build import GROFF, PINS, deb_members, fetch, write_corpus

PACKAGES = {"zh": ("manpages-zh", "/zh_CN/man"), "en": ("manpages", "/man/man")}


def _pages(deb: Path, marker: str) -> list[tuple[str, bytes]]:
    """(section/name, roff) of every man page in `deb` under `marker` (a symbolic link is not a regular file)."""
    pages = []
    for name, data in deb_members(deb):
        p = PurePosixPath(name)
        if marker in "/" + name and p.suffix == ".gz" and p.parts[-2].startswith("man"):
            pages.append((f"{p.parts[-2]}/{p.name.removesuffix('.gz')}", gzip.decompress(data)))
    return sorted(pages)


def _spaced(items: list[tuple[str, bytes]], n: int) -> list[tuple[str, bytes]]:
    if n >= len(items):
        return items
    return [items[i * len(items) // n] for i in range(n)]


def _plain(roff: bytes) -> bytes:
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    return subprocess.run(GROFF, input=roff, capture_output=True, check=True, env=env).stdout


def build(out: Path, per_lang: int = 200, debs_dir: Path | None = None) -> list[Path]:
    """Write the corpus under `out` (replaced if it exists) and return its files."""
    pins = {pkg: (ver, sha) for pkg, ver, sha in PINS}
    debs = (debs_dir or Path.home() / ".cache" / "ragd-devset" / "debs").expanduser()
    chosen: list[tuple[str, bytes]] = []
    for lang, (package, marker) in PACKAGES.items():
        deb = fetch(debs, package, *pins[package])
        chosen += [(f"{lang}/{rel}.txt", roff) for rel, roff in _spaced(_pages(deb, marker), per_lang)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        texts = list(pool.map(_plain, [roff for _, roff in chosen]))
    written = write_corpus(out, ((rel, text) for (rel, _), text in zip(chosen, texts, strict=True)))
    return [out / rel for rel in written]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--per-lang", type=int, default=200)
    ap.add_argument(
        "--debs", type=Path, help="where the .deb files are kept (default ~/.cache/ragd-devset/debs)"
    )
    a = ap.parse_args()
    files = build(a.out, a.per_lang, a.debs)
    print(f"{len(files)} pages, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB in {a.out}")


if __name__ == "__main__":
    main()
