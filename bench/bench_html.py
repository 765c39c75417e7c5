"""How fast HTML pages become markdown (pipeline/parse/html.py), what a parse worker does for each HTML file.

    python -m bench.bench_html DIR [DIR ...] [--rounds 3]

Every `.html` and `.htm` file under the DIRs (the development set's 28 pages for docs/benchmarks.md) is decoded
as the parser decodes it, then converted: prints the pages, their size, and per round the CPU seconds of the
conversion, split into building the tree and turning it into markdown, and which parser built it. Run it in
two checkouts to compare them. Asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from pathlib import Path

from ragd.pipeline.parse import html
from ragd.pipeline.parse.office import decode


def pages(dirs: list[Path]) -> list[str]:
    found = sorted(
        p for d in dirs for p in d.rglob("*") if p.suffix.lower() in (".html", ".htm") and p.is_file()
    )
    return [decode(p.read_bytes())[0] for p in found]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    warnings.simplefilter("ignore")  # BeautifulSoup's XHTML notice, once per page
    texts = pages(a.dirs)
    # a checkout from before `_soup` built every tree with BeautifulSoup(text, "html.parser")
    soup = getattr(html, "_soup", None)
    parser = "lxml" if soup is not None and getattr(html, "_LXML", False) else "html.parser"
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; {len(texts)} pages, "
          f"{sum(map(len, texts)) / 1e6:.1f} M characters; tree built by {parser}")  # fmt: skip
    for r in range(a.rounds):
        t0 = time.process_time()
        for t in texts:
            html.html_to_markdown(t)
        whole = time.process_time() - t0
        t0 = time.process_time()
        for t in texts:
            soup(t) if soup is not None else html.BeautifulSoup(t, "html.parser")
        tree = time.process_time() - t0
        print(f"round {r + 1}: {whole:.2f} CPU-s to markdown (the tree alone: {tree:.2f})")


if __name__ == "__main__":
    main()
