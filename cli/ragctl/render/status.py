"""`ragctl status`: the whole page (the agent, its health, each root's files and failures, the embedder, the
history, OCR, MCP and the index) and the one-line progress of a reconcile pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..protocol import FAILED_STATE, SETTLED
from ..protocol.text import Obj, _count, _g, _int, _num, bar, duration, one_line, plural, show_path
from .verify import _item, verify_line

MAX_FAILURES = 5  # failed files listed per root before "… and N more"


STATE_ORDER = SETTLED  # then any other state in the agent's order


def progress_line(progress: Obj | None, bar_width: int | None = None) -> str:
    """'indexing 120/3400 dirs, 2 failed' while a reconcile pass runs ('' otherwise); with a bar on a terminal."""
    if not progress or not progress.get("phase"):
        return ""
    phase = progress["phase"]
    what = {"initial": "indexing", "rescan": "rescanning", "sync": "syncing", "folder": "indexing"}.get(
        phase, str(phase)
    )
    done, total = _int(progress.get("dirs_done")), _int(progress.get("dirs_total"))
    text = f"{what} {done}/{total} dirs, {_int(progress.get('failed'))} failed"
    files, of = _int(progress.get("files_done")), _int(progress.get("files_total"))
    if of > files:  # a big folder under way: its files are the progress to show
        text = f"{what} {files}/{of} files ({done}/{total} dirs), {_int(progress.get('failed'))} failed"
        done, total = files, of
    eta = progress.get("eta_s")
    if isinstance(eta, int | float):
        text += f", about {_duration(eta)} left"
    return f"{bar(done, total, bar_width)} {text}" if bar_width else text


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def status(result: Obj, bar_width: int | None = None) -> str:
    """The whole `ragctl status` page."""
    agent = result.get("agent") or {}
    lines = _agent_lines(agent)
    lines += health_lines(result.get("health") or {})
    prog = progress_line(result.get("progress"), bar_width)
    if prog:
        lines.append(prog)
    roots = result.get("roots") or []
    for root in roots:
        lines += _root_lines(root)
    if not roots and agent.get("state") == "starting":
        lines.append("roots: not known yet (the agent is starting)")
    elif not roots:
        lines.append("roots: none (add one with `ragctl roots add PATH`)")
    lines += _embedder_lines(result.get("embedder") or {})
    lines += _ocr_lines(result.get("parse") or {})
    lines += _history_lines(result.get("history") or {})
    lines += _index_lines(result.get("index") or {})
    lines += _mcp_lines(result.get("mcp") or {})
    return "\n".join(lines) + "\n"


def _agent_lines(agent: Obj) -> list[str]:
    head = f"agent: ragd {agent.get('version', '?')}, pid {_num(agent.get('pid'))}, up {duration(agent.get('uptime_s'))}"
    state = str(agent.get("state") or "?")
    notes = ["ready" if agent.get("ready") else "not ready yet"]
    if agent.get("paused") and state != "paused":
        notes.append("paused")
    line = f"state: {state} ({', '.join(notes)})"
    if agent.get("paused") or state == "paused":
        line += "; no directory job starts until `ragctl resume`"
    lines = [head, line]
    if agent.get("reload_error"):  # the whole message: the keys it names are what to fix
        lines.append(f"config: {one_line(agent['reload_error'], 2000)}; the running configuration is kept")
    if rebuilt := agent.get("data_dir_rebuilt"):  # deleted or replaced while the agent ran
        lost = ", ".join(str(p) for p in rebuilt.get("lost") or ())
        done = (
            "made again" if rebuilt.get("done") else "being made again (the index refilled from the sidecars)"
        )
        lines.append(f"data dir: {lost} deleted or replaced at {rebuilt.get('at', '?')}; {done}")
    return lines


HEALTH_LABELS = {"ocr": "ocr", "legacy_office": "legacy office files", "watching": "file watching",
                 "http": "http (MCP and web page)", "folders": "folders", "embeddings": "embeddings",
                 "disk": "disk space"}  # fmt: skip


def health_lines(health: Obj) -> list[str]:
    """'health: all working (ocr, ...)', or 'health: 2 problems' and a line for each (docs/protocol.md, `health`)."""
    if not health:  # an agent older than its health
        return []
    problems, off, unneeded, starting = [], [], [], []
    for name, cap in health.items():
        if not isinstance(cap, Mapping):
            continue
        label = HEALTH_LABELS.get(name, name)
        if (
            cap.get("state") in ("degraded", "unavailable")
            and not cap.get("chosen")
            and not cap.get("unneeded")
        ):
            detail = f" [{one_line(cap['detail'], 300)}]" if cap.get("detail") else ""
            since = f" (since {cap['since']})" if cap.get("since") else ""
            problems.append(f"  {label}: {str(cap['state']).upper()}{since}: {one_line(cap.get('reason', ''), 400)}"
                            f"{detail}")  # fmt: skip
        elif cap.get("chosen"):
            off.append(label)
        elif cap.get("unneeded"):
            unneeded.append(label)
        elif cap.get("state") == "starting":
            starting.append(label)
    notes = "".join(f"; {what}: {', '.join(names)}" for what, names in
                    (("turned off in the config", off), ("missing, though no file needed it yet", unneeded),
                     ("starting", starting)) if names)  # fmt: skip
    if not problems:
        return [f"health: all working{notes}"]
    return [f"health: {plural(len(problems), 'problem')}{notes}", *problems]


def file_counts(files: Obj) -> str:
    """'1180 embedded, 18 skipped, 2 failed' (known states first, then the others as the agent listed them)."""
    keys = [k for k in STATE_ORDER if k in files] + [k for k in files if k not in STATE_ORDER]
    return ", ".join(f"{files[k]} {str(k).lower()}" for k in keys) or "none yet"


def _root_lines(root: Obj) -> list[str]:
    files = root.get("files") or {}
    lines = [
        f"root {show_path(root.get('path', '?'))}  (watcher: {root.get('watcher', '?')})",
        f"  files: {file_counts(files)}",
        f"  dirs: {_int(root.get('pending_dirs'))} pending, {_int(root.get('running_dirs'))} running"
        + (
            f"; {root['waiting_files']} files waiting for the embedder"
            if _int(root.get("waiting_files"))
            else ""
        ),
    ]
    failures: Sequence[Obj] = root.get("failures") or []
    if failures:
        lines.append("  failures:")
    for fail in failures[:MAX_FAILURES]:
        retry = f" (retry at {fail['retry_at']})" if fail.get("retry_at") else ""
        lines.append(f"    {show_path(fail.get('path', '?'))}: {one_line(fail.get('reason', ''))}{retry}")
    more = max(len(failures), _int(files.get(FAILED_STATE))) - min(len(failures), MAX_FAILURES)
    if failures and more > 0:
        lines.append(f"    … and {more} more")
    return (
        lines
        + _skipped_lines(root.get("skipped_reasons") or [])
        + _dir_error_lines(root.get("dir_errors") or [])
    )


def _skipped_lines(reasons: Sequence[Obj]) -> list[str]:
    """The skipped files counted by reason, most first ('  skipped: 3 unsupported file type '.bin'')."""
    lines = ["  skipped, by reason:"] if reasons else []
    for item in reasons[:MAX_FAILURES]:
        lines.append(f"    {_count(item.get('files'), 'file')}: {one_line(item.get('reason', ''))}")
    if len(reasons) > MAX_FAILURES:
        rest = sum(_int(item.get("files")) for item in reasons[MAX_FAILURES:])
        lines.append(
            f"    … and {plural(rest, 'file')} for {plural(len(reasons) - MAX_FAILURES, 'other reason')}"
        )
    return lines


def _dir_error_lines(dir_errors: Sequence[Obj]) -> list[str]:
    """The folders whose job failed, or that cannot be read (out of search, with since when)."""
    lines = ["  folders with errors:"] if dir_errors else []
    for err in dir_errors[:MAX_FAILURES]:
        since = f" (since {err['since']}: its files are out of search)" if err.get("since") else ""
        lines.append(f"    {show_path(err.get('path', '?'))}: {one_line(err.get('reason', ''))}{since}")
    if len(dir_errors) > MAX_FAILURES:
        lines.append(f"    … and {len(dir_errors) - MAX_FAILURES} more")
    return lines


def _embedder_lines(emb: Obj) -> list[str]:
    if not emb:
        return []
    model = f"{emb.get('provider', '?')} {emb.get('model', '?')} ({_num(emb.get('dimension'))}-d, "
    model += "loaded)" if emb.get("loaded") else "not loaded yet)"
    lines = [
        f"embedder: {model}",
        f"  queue: {_num(emb.get('queued'))} texts, {_num(emb.get('in_flight'))} in flight; "
        f"{_num(emb.get('requests'))} requests, {_num(emb.get('texts'))} texts, "
        f"{_num(emb.get('retries'))} retries, {_num(emb.get('errors'))} errors",
    ]
    if emb.get("last_error"):
        lines.append(f"  last error: {one_line(emb['last_error'])}")
    return lines


def _history_lines(history: Obj) -> list[str]:
    if not history:
        return []
    if history.get("error") and "documents" not in history:
        return [f"history: unavailable ({one_line(history['error'])})"]
    docs: Obj = history.get("documents") or {}
    live = sum(int(v) for k, v in docs.items() if k != "deleted")
    dup: Obj = history.get("duplicates") or {}
    size = _int(history.get("size_bytes")) / 1024 / 1024
    line = f"documents: {live} known, {_int(docs.get('deleted'))} deleted; {_int(history.get('events'))} events ({size:.1f} MB)"
    if _int(dup.get("files")):
        line += f"; {dup['files']} files are copies in {dup.get('groups', '?')} groups of the same content"
    if history.get("error"):
        line += f"; NOT SAVED (in memory only): {one_line(history['error'])}"
    return [line]


def _ocr_lines(parse: Obj) -> list[str]:
    if "ocr" not in parse:  # an agent older than OCR
        return []
    if not parse["ocr"]:
        return [f"ocr: off ({parse.get('ocr_off') or '?'}): images are skipped, scanned PDF pages stay empty"]
    return [
        f"ocr: on (Chinese + English; a page may take {_g(parse.get('ocr_page_timeout'))} s, "
        f"{_g(parse.get('ocr_max_pages'))} pages a file; confidence below "
        f"{_g(parse.get('ocr_min_confidence'))} is marked low)"
    ]


def _mcp_lines(mcp: Obj) -> list[str]:
    if not mcp:
        return []
    if mcp.get("error"):
        error = str(mcp["error"])
        still = "" if "`ragctl mcp` still works" in error else " (`ragctl mcp` still works)"
        return [f"mcp: HTTP not serving: {error}{still}"]
    if not mcp.get("enabled"):
        return ["mcp: HTTP off (`ragctl mcp` for stdio clients)"]
    if not mcp.get("url"):  # not bound yet (or no longer): the agent is starting (or stopping)
        return [f"mcp: HTTP {'stopping' if mcp.get('state') == 'stopped' else 'starting'} "
                "(`ragctl mcp` for stdio clients)"]  # fmt: skip
    lines = [f"mcp: {mcp['url']}  (stdio: `ragctl mcp`)"]
    if mcp.get("ui_url"):
        lines.append(f"web page: {mcp['ui_url']}  (`ragctl ui`)")
    return lines


def _index_lines(index: Obj) -> list[str]:
    if not index:
        return []
    if index.get("state") == "opening":
        return ["index: opening"]
    line = (f"index: {_num(index.get('chunks'))} chunks; "
            f"{_num(index.get('pending_mushrooms'))} pending mushrooms")  # fmt: skip
    if index.get("optimizing"):
        line += "; optimizing"
    if index.get("resting"):
        line += "; closed while unused"
    lines = [line]
    backend = index.get("backend") or {}
    if backend.get("backend") == "milvus":
        state = "reachable" if backend.get("reachable") else f"UNREACHABLE ({backend.get('last_error')})"
        lines.append(f"  milvus {backend.get('uri')}, collection {backend.get('collection')}: {state}")
        lines.append(f"  agent: {backend.get('agent')}")
    verify = verify_line(index.get("verify"))
    if verify:
        lines.append(f"  {verify}")
    failed = index.get("failed_mushrooms") or []
    if failed:
        lines.append(f"  failed mushrooms: {len(failed)} (kept and retried)")
        lines += [f"    {_item(f)}" for f in failed[:MAX_FAILURES]]
        if len(failed) > MAX_FAILURES:
            lines.append(f"    … and {len(failed) - MAX_FAILURES} more")
    return lines
