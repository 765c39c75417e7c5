"""The small-knowledge-base set: personal notes among a few hundred real documents (README.md).

    python -m bench.notesset.build OUT [--devset DIR]

OUT receives `notes/` (the notes committed beside this file, copied as they are) and `man/` (the man pages of
sections 1 of the development set's corpus, both languages, and three pages of section 7 that mention SGML
catalogs and directories), taken from the development set's corpus DIR (`python -m bench.devset.build DIR`
first; default ~/.cache/ragd-devset/corpus). Deterministic: the same corpus gives the same tree.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

HERE = Path(__file__).parent
NOTES = HERE / "notes"
PAGES = ("en/man1", "zh/man1")  # every page of these folders
EXTRA = ("en/man7/hier.7.md", "en/man7/suffixes.7.md", "zh/man7/suffix.7.md")


def build(out: Path, devset: Path) -> int:
    """Write the tree to `out` (emptied first); the number of documents."""
    if not (devset / PAGES[0]).is_dir():
        raise SystemExit(
            f"no development-set corpus at {devset}: run `python -m bench.devset.build {devset}`"
        )
    shutil.rmtree(out / "notes", ignore_errors=True)
    shutil.rmtree(out / "man", ignore_errors=True)
    shutil.copytree(NOTES, out / "notes")
    for folder in PAGES:
        shutil.copytree(devset / folder, out / "man" / folder)
    for page in EXTRA:
        (out / "man" / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(devset / page, out / "man" / page)
    return sum(1 for p in out.rglob("*") if p.is_file() and ".rag" not in p.parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--devset", type=Path, default=Path("~/.cache/ragd-devset/corpus"))
    args = ap.parse_args(argv)
    print(
        f"{build(args.out.expanduser().resolve(), args.devset.expanduser().resolve())} documents in {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
