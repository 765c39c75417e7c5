"""ragctl entry point (the control-socket verbs arrive with the resident agent)."""

from __future__ import annotations

import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        print(f"ragctl {__version__}")
        return 0
    print(
        "ragctl: the resident agent's control verbs are not available yet; use `ragd run --once` and "
        "`ragd status`",
        file=sys.stderr,
    )
    return 2
