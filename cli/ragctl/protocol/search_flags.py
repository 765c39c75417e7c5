"""The `search` verb on a command line: its flags, defined once for `ragctl search` and `ragd search`, and the
request they make (docs/protocol.md, `search`). Standard library only, like the rest of the wire protocol.

The flags carry the protocol's names: `--top-k`, `--path-prefix`, `--reach`. The names of the version before
(`--path`, `--scope`) are still accepted for one version, with a warning on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import TOP_K

MODES = ("hybrid", "vector", "keyword")
REACHES = ("agent", "all")  # this agent's files, or every agent's on an index shared by several (Milvus)

# old name -> new name, on the wire and on the command line (accepted for one version; docs/protocol.md)
RENAMED_ARGS = {"k": "top_k", "path": "path_prefix", "scope": "reach"}


def deprecated(prog: str, old: str, new: str) -> str:
    return f"{prog}: warning: {old} is deprecated and will be removed with the next version: use {new}"


class Renamed(argparse.Action):
    """An old flag: does what its new name does, and says so on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, append: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(option_strings, dest, **kwargs)
        self.new, self.append = new, append

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option: str | None = None) -> None:  # fmt: skip
        print(deprecated(parser.prog.split()[0], option or self.option_strings[0], self.new), file=sys.stderr)
        if self.append:
            values = [*(getattr(ns, self.dest, None) or []), values]
        setattr(ns, self.dest, values)


def add_search_flags(p: argparse.ArgumentParser) -> None:
    """The query and the flags of `search`, as both command lines take them."""
    p.add_argument("query")
    p.add_argument("-k", "--top-k", dest="top_k", type=int, default=TOP_K, metavar="N",
                   help=f"how many results (default {TOP_K})")  # fmt: skip
    p.add_argument("--path-prefix", dest="path_prefix", action="append", default=[], metavar="DIR",
                   help="only under this folder (repeatable)")  # fmt: skip
    p.add_argument("--path", dest="path_prefix", action=Renamed, new="--path-prefix", append=True,
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--mode", choices=MODES, default=MODES[0])
    p.add_argument("--ext", action="append", default=[], help="only files with this extension (repeatable)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only documents whose metadata matches: tag=invoice, version^=2. (prefix); repeatable, "
                   "all must match (docs/metadata.md)")  # fmt: skip
    p.add_argument("--one-per-file", action="store_true", help="at most one result per file")
    p.add_argument("--files", action="store_true",
                   help="documents rather than passages: each with its best passages and how many matched")  # fmt: skip
    p.add_argument("--reach", choices=REACHES, default=REACHES[0],
                   help="on a shared Milvus index: this agent's files (default) or every agent's")  # fmt: skip
    p.add_argument("--scope", dest="reach", choices=REACHES, action=Renamed, new="--reach",
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--explain", action="store_true",
                   help="why each result is where it is: its rank and score on each side and how they were fused")  # fmt: skip


def search_request(ns: argparse.Namespace) -> dict[str, Any]:
    """The `search` request's args from the parsed flags; folders resolved against the working directory. The
    newer arguments are sent only when asked for (an agent of an older version does not know them)."""
    return {
        "query": ns.query,
        "top_k": ns.top_k,
        "mode": ns.mode,
        "path_prefix": [str(Path(p).expanduser().resolve()) for p in ns.path_prefix],
        "ext": list(ns.ext),
        "one_per_file": ns.one_per_file,
        **({"files": True} if ns.files else {}),
        **({"reach": ns.reach} if ns.reach != REACHES[0] else {}),
        **({"where": list(ns.where)} if ns.where else {}),
        **({"explain": True} if ns.explain else {}),
    }
