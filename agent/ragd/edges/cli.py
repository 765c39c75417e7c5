"""The `ragd` command: run the agent (`run --once` for a single pass), offline status, config check."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ragctl.protocol import BAD_REQUEST
from ragctl.protocol.search_flags import Renamed, add_search_flags

from .. import __version__, heap
from ..errors import RagdError

if TYPE_CHECKING:
    from ..config import Config

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_RUNNING = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragd", description="Keep folders of documents searchable, offline.")
    p.add_argument("--version", action="version", version=f"ragd {__version__}")
    p.add_argument("--config", type=Path, help="config file (default: $RAGD_CONFIG or the user config dir)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    p.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run the agent: watch the roots and keep them indexed (--once: one pass)"
    )
    run.add_argument("roots", nargs="*", type=Path, help="folders to index (default: roots from the config)")
    run.add_argument("--root", dest="extra_roots", action="append", type=Path, default=[], help="add a root")
    run.add_argument(
        "--once", action="store_true", help="reconcile every directory once, print a summary, exit"
    )
    run.add_argument(
        "-j", "--jobs", type=int, help="directories processed in parallel (default: run.jobs; 0: auto)"
    )
    run.add_argument("--force", action="store_true", help="re-process every file even when unchanged")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument(
        "--rebuild-index", action="store_true", help="drop the index and rebuild it from the sidecars"
    )
    run.add_argument("--no-index", action="store_true", help="write sidecars and change notes only")
    se = sub.add_parser("search", help="search the index (when no agent holds it)")
    add_search_flags(se)  # as `ragctl search` takes them
    se.add_argument("--json", action="store_true")
    ev = sub.add_parser("eval", help="measure search on known answers: recall, MRR, nDCG per mode and group")
    ev.add_argument("queries", type=Path, help='JSON or JSON-lines file of {"query", "answers", "group"}')
    ev.add_argument("--mode", choices=("vector", "keyword", "hybrid", "all"), default="all")
    ev.add_argument(
        "-k", "--top-k", dest="k", type=int, default=10, help="documents ranked per query (default 10)"
    )
    ev.add_argument("--k", dest="k", type=int, action=Renamed, new="--top-k", help=argparse.SUPPRESS)
    ev.add_argument(
        "--base", type=Path, help="folder that relative answer paths are under (default: the roots)"
    )
    ev.add_argument("--worst", type=int, default=10, help="worst queries listed per mode (default 10)")
    ev.add_argument("--json", action="store_true")
    ev.add_argument(
        "--config", type=Path, default=argparse.SUPPRESS, help="config file (as before the command)"
    )
    orph = sub.add_parser("orphans", help="indexed sources whose file or sidecar is gone")
    orph.add_argument("path", nargs="?", type=Path, help="only under this directory")
    orph.add_argument("--clean", action="store_true", help="remove them from the index")
    orph.add_argument("--json", action="store_true")
    st = sub.add_parser("status", help="per-file state from the sidecars (works without the agent)")
    st.add_argument("paths", nargs="*", type=Path, default=[Path(".")], metavar="PATH",
                    help="folders and files (default: the current folder); a symbolic link shows its own entry")  # fmt: skip
    st.add_argument("-r", "--recursive", action="store_true")
    st.add_argument("--json", action="store_true")
    ix = sub.add_parser("index", help="the index itself: migrate it to another backend")
    ix_sub = ix.add_subparsers(dest="index_command", required=True)
    mig = ix_sub.add_parser("migrate", help="fill the other backend (zvec or milvus) from the sidecars; nothing is "
                            "embedded again")  # fmt: skip
    mig.add_argument("--to", required=True, choices=("zvec", "milvus"), help="the backend to fill")
    mig.add_argument("--uri", help="with --to milvus: the server or Milvus Lite file (default: [index] uri)")
    mig.add_argument("roots", nargs="*", type=Path, help="folders besides the configured roots")
    mig.add_argument("--json", action="store_true")
    cfg = sub.add_parser("config", help="configuration")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    check = cfg_sub.add_parser("check", help="validate and print the effective config (secrets redacted)")
    check.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        heap.manage()  # the agent's process: its imports kept out of the collector's passes once done (heap.py)
        if args.once:
            _start_workers_early(args)
    # (imported now, not with this module: for `run --once`, after the parse workers' fork server has started)
    from ..config import load_config
    from .console import setup_logging

    setup_logging(-1 if args.quiet else args.verbose)
    try:
        config = load_config(args.config)
        return _dispatch(args, config)
    except RagdError as err:
        print(f"ragd: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return EXIT_USAGE if err.code in ("config", "usage", BAD_REQUEST) else EXIT_FAILED
    except KeyboardInterrupt:
        print("ragd: interrupted", file=sys.stderr)
        return 130


def _start_workers_early(args: argparse.Namespace) -> None:
    """`run --once` parses what changed: the parse workers' fork server is started before this process imports its
    config and pipeline (~0.6 s), with what the workers import (for the zvec index, the default: its keyword cut;
    a Milvus index does without it), so that its imports (~0.8 s) overlap this process's. A run with nothing to
    parse has it end with the process, unused. Never a reason for the run to fail: the first pool starts it."""
    from ..pipeline import pool, preload

    try:
        pool.start_server(preload.PARSE + (() if args.no_index else (preload.CUT_MODULE,)))
    except Exception as err:  # the first pool starts it again, and reports what fails then
        logging.getLogger(__name__).debug("the parse workers' fork server did not start ahead: %s", err)


def _dispatch(args: argparse.Namespace, config: Config) -> int:
    if args.command == "run":
        return _cmd_run(args, config)
    if args.command == "status":
        return _cmd_status(args, config)
    if args.command == "search":
        from .console import run_search

        return run_search(args, config)
    if args.command == "eval":
        from .console import run_eval

        return run_eval(args, config)
    if args.command == "orphans":
        from .console import run_orphans

        return run_orphans(args, config)
    if args.command == "index":
        from .console import run_migrate

        return run_migrate(args, config)
    return _cmd_config_check(args, config)


def _cmd_run(args: argparse.Namespace, config: Config) -> int:
    roots = [*args.roots, *args.extra_roots]
    if not args.once:  # the agent watches these on top of the config's roots (and keeps them across reloads)
        from ..pipeline.parse.ocr import probe_ahead

        # whether OCR loads, for its status: found out while the agent starts up, not in its way
        probe_ahead(config.parse)
        return _cmd_agent(args, config, roots)
    if roots:
        config = config.with_roots(roots)
    from ..resident.once import run_once
    from .console import Progress, print_summary

    if args.rebuild_index:
        from ..config import data_dir
        from ..index import destroy_index

        destroy_index(data_dir(config), config.identity)
    summary = run_once(
        config,
        jobs=args.jobs,
        force=args.force,
        progress=None if args.json or args.quiet else Progress(),
        index=not args.no_index,
    )
    if args.json:
        print(json.dumps(summary.to_json(), ensure_ascii=False))
    else:
        print_summary(summary)
    return EXIT_OK if summary.ok else EXIT_FAILED


def _cmd_agent(args: argparse.Namespace, config: Config, roots: list[Path]) -> int:
    from ..resident.instance import AlreadyRunning
    from .lifecycle import run_agent

    for flag in ("json", "force", "rebuild_index", "no_index"):
        if getattr(args, flag):
            raise RagdError(f"--{flag.replace('_', '-')} needs --once", "the resident agent runs without it",
                            code="usage")  # fmt: skip
    try:
        return run_agent(config, args.config, roots)
    except AlreadyRunning as err:
        print(f"ragd: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return EXIT_RUNNING


def _cmd_status(args: argparse.Namespace, config: Config) -> int:
    from ..pipeline.scan import unreadable
    from ..resident.jobs import policies
    from .console import print_states
    from .filestatus import collect, counts

    missing = [
        p for p in args.paths if not os.path.lexists(p) and not unreadable(p)
    ]  # (one in a closed folder: FAILED)
    if missing and len(missing) == len(args.paths):
        verb = "does" if len(missing) == 1 else "do"
        raise RagdError(f"{', '.join(map(str, missing))} {verb} not exist", "name a tracked folder or file",
                        code="usage")  # fmt: skip
    for path in missing:  # as `ls A B`: what exists is shown, and the exit code says something was not
        print(f"ragd: {path} does not exist", file=sys.stderr)
    policy = policies(config)
    states = [s for p in args.paths if p not in missing for s in collect(p, config, recursive=args.recursive,
                                                                          policy=policy)]  # fmt: skip
    if args.json:
        print(
            json.dumps(
                {"entries": [s.to_json() for s in states], "counts": counts(states)}, ensure_ascii=False
            )
        )
    else:
        print_states(states)
    return EXIT_USAGE if missing else EXIT_OK


def _cmd_config_check(args: argparse.Namespace, config: Config) -> int:
    data = config.redacted()
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(f"# effective configuration (from {config.source}); secrets redacted")
        print(json.dumps(data, ensure_ascii=False, indent=2))
    # a Milvus server's version and its collection: a server ragd cannot use is refused here, not at start
    from ..config import data_dir
    from ..index import check_index

    said = check_index(data_dir(config), config.identity, config.index)
    if said is not None:
        print(f"# index: {said}", file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK
