"""Human output of the `ragd` command: progress bar on a terminal, plain lines otherwise, summaries."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ragctl.protocol import answer

from ..config import Config
from ..pipeline.dirjob import DirResult
from ..resident.once import RunSummary
from ..vocabulary import FileState as State
from .filestatus import FileStatus, counts

# syslog priorities (sd-daemon(3)): a line that starts with one is filed by journald at that priority
PRIORITIES = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}
# libraries that log every request at INFO (httpx2 is the one newer `openai` releases use): -v shows them
CHATTY = ("httpx", "httpx2")


class JournalFormatter(logging.Formatter):
    """Each line of a record (a traceback's too) prefixed with the record's syslog priority, `<3>` for an error,
    as the units' default `SyslogLevelPrefix=yes` reads them: `journalctl -p warning` then shows the agent's
    warnings and errors, not every line filed as info."""

    def format(self, record: logging.LogRecord) -> str:
        level = next((p for lv, p in sorted(PRIORITIES.items()) if record.levelno <= lv), 2)
        prefix = f"<{level}>"
        return "\n".join(prefix + line for line in super().format(record).splitlines())


def to_journal(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """`stream` is the journal's stream: systemd's JOURNAL_STREAM names its device and inode (systemd.exec(5));
    a stderr redirected elsewhere by the unit or by a shell does not match."""
    want = environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return want == f"{st.st_dev}:{st.st_ino}"


def setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity < 0 else logging.INFO if verbosity == 0 else logging.DEBUG
    journal = to_journal(sys.stderr)
    under_systemd = journal or "INVOCATION_ID" in os.environ  # journald stamps the time itself
    fmt = "%(levelname)s %(name)s: %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    formatter = JournalFormatter if journal else logging.Formatter
    handler.setFormatter(formatter(fmt if under_systemd else "%(asctime)s " + fmt))
    logging.basicConfig(level=level, handlers=[handler])
    threading.excepthook = log_thread_death
    if level > logging.DEBUG:
        for name in CHATTY:
            logging.getLogger(name).setLevel(logging.WARNING)


def log_thread_death(args: threading.ExceptHookArgs) -> None:
    """A thread ended by an exception (a library's: ragd's own threads catch theirs) is logged as an error with its
    traceback, where Python's default printed it to stderr unlevelled (journald filed it as info)."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    logging.getLogger(__name__).error("thread %s ended by an exception", name, exc_info=exc_info)


class Progress:
    """Redraws one status line on a TTY (at most ~10 times a second); prints changed directories otherwise."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self._last = 0.0

    def __call__(self, summary: RunSummary, result: DirResult | None) -> None:
        if self.tty:
            now = time.monotonic()
            if now - self._last >= 0.1 or summary.dirs_done == summary.dirs:
                self._last = now
                self._draw(summary)
        elif result is not None:
            self._plain(result)

    def _draw(self, s: RunSummary) -> None:
        width = max(10, min(40, shutil.get_terminal_size().columns - 70))
        done = s.dirs_done / s.dirs if s.dirs else 1.0
        bar = "#" * int(done * width) + "." * (width - int(done * width))
        line = (
            f"\r[{bar}] {s.dirs_done}/{s.dirs} dirs  {s.embedded} embedded  {s.unchanged} unchanged  "
            f"{s.skipped} skipped  {len(s.failed)} failed"
        )
        self.stream.write(line)
        if s.dirs_done == s.dirs:
            self.stream.write("\n")
        self.stream.flush()

    def _plain(self, r: DirResult) -> None:
        changed = [f for f in r.files if f.state in (State.EMBEDDED, State.SKIPPED, State.FAILED)]
        if not changed and not r.events:
            return
        n = {st: sum(f.state == st for f in changed) for st in (State.EMBEDDED, State.SKIPPED, State.FAILED)}
        self.stream.write(
            f"{r.directory}: {n[State.EMBEDDED]} embedded, {n[State.SKIPPED]} skipped, {n[State.FAILED]} failed, "
            f"{len(r.events)} events\n"
        )
        self.stream.flush()


def _index_line(index: dict[str, object]) -> str:
    if not index:
        return ""
    if index.get("held_by_agent"):
        return "index: held by the running agent, which applies these changes itself\n"
    if index.get("unavailable"):
        return f"index: {index.get('message')}; the change notes wait for it (the next run or the agent applies them)\n"
    failed = index.get("mushrooms_failed") or []
    line = (f"index: {_n(_int(index.get('chunks')), 'chunk')}; "
            f"{_n(_int(index.get('mushrooms_applied')), 'change note')} applied, "
            f"{_n(_int(index.get('repaired')), 'source')} repaired")  # fmt: skip
    if index.get("rebuilt"):
        line += "; rebuilt from the sidecars"
    elif _int(index.get("filled")):
        line += f"; a new index, filled from the sidecars ({_n(_int(index.get('filled')), 'source')})"
    elif index.get("opened") is False:
        line += "; nothing to sync, unchanged since the last check (not opened)"
    if failed:
        line += f"; {_n(len(failed), 'change note')} FAILED (kept and retried next run)"  # type: ignore[arg-type]
    return line + "\n"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _n(count: int, one: str, many: str | None = None) -> str:
    """'1 directory', '2 directories'."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def print_summary(s: RunSummary, out: TextIO = sys.stdout) -> None:
    rate = s.embedded / s.elapsed if s.elapsed else 0.0
    out.write(
        f"{_n(s.embedded, 'file')} embedded, {s.unchanged} unchanged, {s.skipped} skipped, "
        f"{len(s.failed)} failed in {_n(s.dirs, 'directory', 'directories')}\n"
    )
    out.write(
        f"{_n(s.chunks, 'chunk')}: {s.texts_embedded} embedded, {_n(s.vectors_reused, 'vector')} reused; "
        f"{s.elapsed:.2f} s ({rate:.1f} files/s)\n"
    )
    if s.leads:
        out.write(f"leads made for {_n(s.leads, 'document')} of an earlier ragd (one text embedded each)\n")
    out.write(_index_line(s.index))
    for path, reason in s.failed:
        out.write(f"FAILED {path}: {reason}\n")
    for path, reason in s.failed_dirs:
        out.write(f"FAILED directory {path}: {reason}\n")


def print_states(states: list[FileStatus], out: TextIO = sys.stdout) -> None:
    for st in states:
        name = str(st.path) + ("/" if st.is_dir else "")
        extra = f"  ({st.reason})" if st.reason else f"  {st.note}" if st.note else ""
        out.write(
            f"{st.state:<9} {name!s}{extra}\n" if "\n" not in name else f"{st.state:<9} {name!r}{extra}\n"
        )
    tally = ", ".join(f"{v} {k.lower()}" for k, v in counts(states).items())
    out.write(f"{len(states)} entries: {tally or 'nothing tracked'}\n")


def run_search(args: Any, config: Config) -> int:
    """`ragd search`: the `search` verb over the index opened read-only; results printed."""
    from ragctl.protocol.search_flags import search_request

    from ..verbs.arguments import parse
    from ..verbs.search import SearchQuery, search
    from .offline import offline

    query = parse(SearchQuery, search_request(args))  # the request `ragctl search` sends with the same flags
    with offline(config) as rt:
        found = search(rt, query)
    if args.json:
        print(json.dumps(found, ensure_ascii=False))
        return 0
    print(answer.search(found), end="")
    return 0


def run_orphans(args: Any, config: Config) -> int:
    """`ragd orphans [PATH] [--clean]`: the `orphans` verb over the index (opened for writing with --clean)."""
    from ..verbs.orphans import OrphansArgs, orphans
    from .offline import offline

    path = str(args.path.expanduser().resolve()) if args.path else None
    with offline(config, writes=args.clean) as rt:
        result = orphans(rt, OrphansArgs(path=path, clean=args.clean))
    found = result["orphans"]
    if args.json:
        print(json.dumps({"orphans": found, "removed": result["removed"]}, ensure_ascii=False))
    else:
        for p in found:
            print(p)
        verb = "removed" if args.clean else "found (remove them with --clean)"
        print(f"{len(found)} orphan{'' if len(found) == 1 else 's'} {verb}" if found else "no orphans")
    return 0


def run_migrate(args: Any, config: Config) -> int:
    """`ragd index migrate --to BACKEND`: the other backend filled from the sidecars (resident/migrate.py)."""
    from ..resident.migrate import migrate

    roots = [Path(r).expanduser().resolve() for r in args.roots]
    result = migrate(config, args.to, roots, uri=args.uri)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    print(f"{result['to']} index at {result['path']}: {result['chunks']} chunks; {result['sources']} sources "
          f"written, {result['removed']} removed, in {result['elapsed_s']} s (nothing embedded)")  # fmt: skip
    print(f'now set [index] backend = "{result["to"]}" in the config and restart the agent')
    return 0


def run_eval(args: Any, config: Config) -> int:
    """`ragd eval QUERIES`: the `eval` verb over the index opened read-only; a table per mode and group."""
    from ..verbs.evaluate import MODES, EvalArgs, evaluate, load_queries, usage
    from .offline import offline

    if not 5 <= args.k <= 100:
        raise usage(
            f"--top-k must be from 5 to 100, not {args.k}", "recall@5 needs at least 5 documents per query"
        )
    base = args.base.expanduser().resolve() if args.base else None
    roots = [Path(r) for r in config.roots]
    queries = load_queries(args.queries.expanduser(), roots, base)
    modes = MODES if args.mode == "all" else (args.mode,)
    reports = []
    for mode in modes:  # the index opened afresh per mode: no query vector cached by the mode before
        with offline(config) as rt:
            wanted = EvalArgs(queries=tuple(queries), modes=(mode,), top_k=args.k, worst=args.worst)
            reports.append(evaluate(rt, wanted))
    report = reports[0]
    for more in reports[1:]:
        report["modes"].update(more["modes"])
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print_eval(report, base)
    return 0


def print_eval(report: Any, base: Path | None, out: TextIO = sys.stdout) -> None:
    k = report["top_k"]
    out.write(f"{report['queries']} queries, the best {k} documents of each (one result per file)\n\n")
    head = ("mode", "group", "queries", "recall@1", "recall@5", "hit@5", f"MRR@{k}", f"nDCG@{k}")
    out.write(
        f"{head[0]:<8} {head[1]:<12} {head[2]:>7} {head[3]:>9} {head[4]:>9} {head[5]:>6} {head[6]:>8} {head[7]:>8}\n"
    )
    for mode, rep in report["modes"].items():
        for group, s in rep["groups"].items():
            out.write(f"{mode:<8} {group:<12} {s['queries']:>7} {s['recall@1']:>9.3f} {s['recall@5']:>9.3f} "
                      f"{s['hit@5']:>6.3f} {s[f'mrr@{k}']:>8.3f} {s[f'ndcg@{k}']:>8.3f}\n")  # fmt: skip
    lat = ", ".join(
        f"{m} {r['median_ms']:.1f} ms (p95 {r['p95_ms']:.1f})" for m, r in report["modes"].items()
    )
    out.write(f"\nmedian query time: {lat}\n")
    for mode, rep in report["modes"].items():
        if not rep["worst"]:
            continue
        out.write(f"\nworst queries ({mode}): answer ranks (- = not in the top {k}), top hit\n")
        for w in rep["worst"]:
            ranks = ", ".join("-" if r is None else str(r) for r in w["ranks"])
            top = _shown(w["top"], base) if w["top"] else "(nothing found)"
            out.write(f"  [{w['group'] or '-'}] {w['query']}\n      ranks {ranks}; top {top}\n")


def _shown(path: str, base: Path | None) -> str:
    if base is not None and Path(path).is_relative_to(base):
        return str(Path(path).relative_to(base))
    return path
