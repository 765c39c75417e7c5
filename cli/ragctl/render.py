"""Human output of `ragctl`: pure functions from the agent's result objects (docs/protocol.md) to text.

Every function takes the result (or stream) dict as the agent sent it and returns the text to print, ending in a
newline unless it is a one-line progress display. Fields may be missing (an older or newer agent): they render as
"?" or are left out, never as an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

Obj = Mapping[str, Any]

MAX_FAILURES = 5  # failed files listed per root before "… and N more"
MAX_REASON = 160  # characters of a failure reason on one line
STATE_ORDER = ("EMBEDDED", "SKIPPED", "FAILED")  # then any other state in the agent's order


# -- small pieces -----------------------------------------------------------------------------------------------
def show_path(path: object) -> str:
    """A path as typed; quoted when it holds control characters (a newline would break the layout)."""
    text = str(path)
    return repr(text) if any(ord(c) < 32 or c == "\x7f" for c in text) else text


def plural(n: object, one: str, many: str | None = None) -> str:
    """'1 directory', '2 directories', '0 entries'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def one_line(text: object, limit: int = MAX_REASON) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def duration(seconds: object) -> str:
    """12.5 -> '12s', 3723 -> '1h 2m', 90061 -> '1d 1h'."""
    if not isinstance(seconds, (int, float)):
        return "?"
    rest = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        if n or parts or unit == "s":
            parts.append(f"{n}{unit}")
    return " ".join(parts[:2])


def bar(done: int, total: int, width: int) -> str:
    frac = min(1.0, max(0.0, done / total)) if total > 0 else 0.0
    filled = int(frac * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: object) -> str:
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _g(value: object) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _count(value: object, one: str, many: str | None = None) -> str:
    """A count with its noun in the right number ('1 directory', '3 directories'); '? directories' if unknown."""
    return (
        plural(value, one, many)
        if isinstance(value, int) and not isinstance(value, bool)
        else f"? {many or one + 's'}"
    )


# -- status -----------------------------------------------------------------------------------------------------
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
    more = max(len(failures), _int(files.get("FAILED"))) - min(len(failures), MAX_FAILURES)
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


def verify_line(verify: Obj | None) -> str:
    """'verified 2026-12-01T10:00:00Z (periodic): 3400 sources, nothing to repair' ('' before the first pass)."""
    if not verify:
        return ""
    last = verify.get("last") or {}
    running = "; verifying now" if verify.get("running") else ""
    if not last:
        return "not verified yet" + running
    fixed = _int(last.get("repaired")) + _int(last.get("removed"))
    outcome = (
        "nothing to repair"
        if not fixed
        else f"{last.get('repaired')} repaired, {last.get('removed')} removed"
    )
    total = _int(verify.get("repaired_total"))
    since = f"; {total} repaired since start" if total else ""
    return (f"verified {last.get('finished_at', '?')} ({last.get('trigger', '?')}): "
            f"{_num(last.get('sources'))} sources, {outcome}{since}{running}")  # fmt: skip


def verified(result: Obj) -> str:
    """`ragctl verify`: what was checked, and every repair (a repair means a bug: the log has the details)."""
    lines = [f"checked {_count(result.get('sources'), 'source')} in {_count(result.get('dirs'), 'directory', 'directories')} "
             f"against {_num(result.get('indexed'))} indexed, in {_num(result.get('elapsed_s'))} s"]  # fmt: skip
    lines += [f"repaired {show_path(p)}" for p in result.get("repaired_paths") or []]
    lines += [f"removed {show_path(p)}" for p in result.get("removed_paths") or []]
    lines += [
        f"changed since indexed, indexing again: {show_path(p)}" for p in result.get("redone_paths") or []
    ]
    listed = len(result.get("repaired_paths") or []) + len(result.get("removed_paths") or [])
    fixed = _int(result.get("repaired")) + _int(result.get("removed"))
    if fixed > listed:
        lines.append(f"… and {fixed - listed} more (see the agent's log)")
    for p in result.get("unreadable") or []:
        lines.append(f"cannot read {show_path(p)} (permission denied): out of search, not compared")
    if _int(result.get("busy_dirs")):
        lines.append(
            f"{_count(result['busy_dirs'], 'directory', 'directories')} had work in progress: checked again once "
            "the agent is idle"
        )
    lines.append("the index matches the sidecars" if not fixed else f"{plural(fixed, 'source')} repaired")
    return "\n".join(lines) + "\n"


def verify_progress(data: Obj, bar_width: int | None = None) -> str:
    return (
        f"verifying the index against the sidecars ({_count(data.get('dirs'), 'directory', 'directories')})"
    )


def _item(item: object) -> str:
    if isinstance(item, Mapping):
        reason = item.get("reason") or item.get("error")
        return show_path(item.get("path", "?")) + (f": {one_line(reason)}" if reason else "")
    return show_path(item)


# -- search -----------------------------------------------------------------------------------------------------
def search(result: Obj) -> str:
    """'1. /abs/notes.md:3-9  [Heading > Sub]  score 0.0312' (a PDF: '[p. 2; Heading]') and the snippet, per result.

    The line range is that of the document's text as the agent parsed it (what `read_document` returns).
    """
    if "files" in result:
        return search_files(result)
    hits: Sequence[Obj] = result.get("results") or []
    if not hits:
        return "no results\n"
    out = [explained(result)]
    for n, hit in enumerate(hits, 1):
        out.append(f"{n}. {citation(hit)}  score {_score(hit)}{_on(hit)}\n{labels(hit)}{why(hit)}")
        snippet = hit.get("snippet") or hit.get("content") or ""
        out.append(f"   {one_line(snippet, 400)}\n\n")
    return "".join(out)


def search_files(result: Obj) -> str:
    """Per document: '1. /abs/path  score 0.0312, 4 passages matched', then its best passages, each cited."""
    files: Sequence[Obj] = result.get("files") or []
    if not files:
        return "no results\n"
    out = [explained(result)]
    for n, doc in enumerate(files, 1):
        matched = _int(doc.get("matches"))
        out.append(f"{n}. {show_path(doc.get('path', '?'))}  score {_score(doc)}, "
                   f"{plural(matched, 'passage')} matched{_on(doc)}\n{labels(doc)}")  # fmt: skip
        for hit in doc.get("chunks") or []:
            out.append(
                f"   - {citation(hit)}: {one_line(hit.get('snippet') or hit.get('content') or '', 300)}\n"
            )
            out.append(why(hit, "     "))
        out.append("\n")
    return "".join(out)


_SIDES = ("vector", "keyword", "glosses", "lead")


def explained(result: Obj) -> str:
    """With `--explain`, how the sides were combined: 'hybrid: rrf weight/(10+rank) per side (vector 1 · keyword
    0.5 · glosses 1 · lead 0.3 for the first 10), passages × 0.5^i; keyword evidence: BM25 ≥ 2 (this query: ≥
    3.1); glosses: catalog'."""
    how = result.get("explain")
    if not isinstance(how, Mapping):
        return ""
    method = str(how.get("method") or "?")
    if method != "hybrid":
        return f"{method} only: ranked by {'BM25' if method == 'keyword' else 'cosine similarity'}\n\n"
    weights = how.get("weights")
    weights = weights if isinstance(weights, Mapping) else {}
    parts = [f"{k} {_g(weights.get(k))}" for k in _SIDES if k in weights]
    line = (f"hybrid: {how.get('fusion', 'rrf')} weight/({_g(how.get('rank_constant'))}+rank) per side "
            f"({' · '.join(parts)} for the first {_g(how.get('lead_depth'))}), passages × "
            f"{_g(how.get('passage_decay'))}^i")  # fmt: skip
    cut = how.get("keyword_cut")
    if isinstance(cut, Mapping) and "keyword_floor" in how:
        line += f"; keyword evidence: BM25 ≥ {_g(how['keyword_floor'])}"
        line += f" (this query: ≥ {_g(cut['keyword'])})" if "keyword" in cut else ""
    if how.get("rare"):
        line += "; rare words: a lookup (every chunk holding them is in a few documents)"
    glosses = how.get("glosses")
    if isinstance(glosses, list) and glosses:
        line += f"; glosses: {one_line(', '.join(str(g) for g in glosses), 200)}"
    return line + "\n\n"


def why(hit: Obj, indent: str = "   ") -> str:
    """With `--explain`, one line per result: 'vector #3 0.81 · keyword #1 12.4 · glosses – · lead #2 0.55 · fused
    0.032 (document #1, passage 1)'; a keyword hit left out says why ('keyword 1.8 < floor')."""
    how = hit.get("explain")
    if not isinstance(how, Mapping):
        return ""
    parts = []
    for side in _SIDES:
        if side not in how:
            continue
        got = how[side]
        if not isinstance(got, Mapping):
            parts.append(f"{side} –")
        elif got.get("rank") is None:
            parts.append(f"{side} {_g3(got.get('score'))} < {got.get('dropped') or 'cut'}")
        else:  # (a lead ranked past the first few adds nothing)
            idle = " (no share)" if side == "lead" and got.get("share") == 0 else ""
            parts.append(f"{side} #{got['rank']} {_g3(got.get('score'))}{idle}")
    fused = f"fused {_g3(how.get('fused'))}"
    doc, passage = how.get("document"), how.get("passage")
    if isinstance(doc, Mapping) and isinstance(passage, Mapping):
        fused += f" (document #{doc.get('rank')} {_g3(doc.get('score'))}, passage {_int(passage.get('index')) + 1})"
        fused += " (near-empty: score lowered)" if doc.get("near_empty") else ""
    return f"{indent}why: {' · '.join([*parts, fused])}\n"


def _g3(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def labels(found: Obj) -> str:
    """'   tags: invoice, q3 · product: X200' (its document's metadata, docs/metadata.md), or '' without any."""
    metadata = found.get("metadata")
    if not isinstance(metadata, dict) or not metadata:
        return ""
    parts = []
    for key, value in metadata.items():
        shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        parts.append(f"{key}: {shown}")
    return f"   {one_line(' · '.join(parts), 300)}\n"


def _on(found: Obj) -> str:
    """'  on host:/data' for a result from an index shared by several agents (Milvus; '' otherwise)."""
    agent = found.get("agent")
    return f"  on {one_line(str(agent), 120)}" if agent else ""


def _score(found: Obj) -> str:
    score = found.get("score")
    return f"{score:.4f}" if isinstance(score, (int, float)) else "?"


def citation(hit: Obj) -> str:
    """'/abs/a.pdf:12-30  [p. 3; Install > Linux]': path and line range, then the page and the heading path."""
    where = show_path(hit.get("path", "?"))
    start, end = hit.get("start_line"), hit.get("end_line")
    if isinstance(start, int) and start >= 1:
        where += f":{start}-{end if isinstance(end, int) and end >= start else '?'}"
    page = hit.get("page")
    heading = hit.get("heading_path") or ""
    if isinstance(heading, (list, tuple)):
        heading = " > ".join(str(h) for h in heading if str(h).strip())
    inside = "; ".join(part for part in (f"p. {page}" if page else "", one_line(heading)) if part)
    return f"{where}  [{inside}]" if inside else where


# -- the other verbs --------------------------------------------------------------------------------------------
def wait_progress(data: Obj) -> str:
    """One progress line of `wait` / `sync --wait` (no newline: it is redrawn in place)."""
    text = (f"waiting: {_num(data.get('pending_dirs'))} dirs pending, {_num(data.get('running_dirs'))} running, "
            f"{_num(data.get('queued_texts'))} texts queued")  # fmt: skip
    if _int(data.get("pending_mushrooms")):
        text += f", {data['pending_mushrooms']} mushrooms pending"
    return text


def rebuild_progress(data: Obj, bar_width: int | None = None) -> str:
    return f"rebuilding the index from the sidecars ({data.get('elapsed_s', 0)} s)"


def waited(result: Obj) -> str:
    secs = result.get("waited_s")
    took = f" (waited {secs:.1f} s)" if isinstance(secs, (int, float)) else ""
    paths = result.get("paths")
    if isinstance(paths, list) and paths:
        return f"nothing left to do under {', '.join(map(str, paths))}{took}\n"
    return f"idle{took}\n"


def synced(result: Obj, waited_for_idle: bool) -> str:
    text = f"scheduled {_count(result.get('scheduled'), 'directory job')}"
    return text + ("; the agent is idle\n" if waited_for_idle else "\n")


def changes(result: Obj) -> str:
    """`ragctl changes`: one document's history, or the events under a folder, newest first."""
    lines: list[str] = []
    doc = result.get("document")
    if doc:
        lines.append(
            f"document {doc.get('document_id', '?')}: {show_path(doc.get('path', '?'))}  ({doc.get('state', '?')})"
        )
        lines.append(f"  first seen {_t(doc.get('first_seen'))}; content changed {_t(doc.get('changed_at'))}; "
                     f"indexed {_t(doc.get('indexed_at'))}; file modified {_t(doc.get('modified_at'))}")  # fmt: skip
        if doc.get("state") == "deleted":
            lines.append(f"  deleted {_t(doc.get('deleted_at'))}")
        versions: Sequence[Obj] = doc.get("versions") or []
        if versions:
            lines.append("versions (newest first):")
        for v in versions:
            lines.append(f"  {_t(v.get('at'))}  md5 {str(v.get('md5', ''))[:12]}  {_int(v.get('size'))} bytes  "
                         f"{_int(v.get('chunks'))} chunks  {v.get('parser') or '?'}  {v.get('embedding') or '?'}")  # fmt: skip
        lines.append("events (newest first):")
    events: Sequence[Obj] = result.get("changes") or []
    for ev in events:
        old = f"  (from {show_path(ev['old_path'])})" if ev.get("old_path") else ""
        why = f": {one_line(ev['detail'])}" if ev.get("detail") else ""
        lines.append(f"{'  ' if doc else ''}{_t(ev.get('at'))}  {ev.get('change', '?')!s:<9}  "
                     f"{show_path(ev.get('path', '?'))}{old}{why}")  # fmt: skip
    if not events:
        since = result.get("since")
        lines.append("no changes" + (f" since {since}" if since else ""))
    elif result.get("truncated"):
        lines.append("… more: raise --limit or narrow --since")
    return "\n".join(lines) + "\n"


def _t(stamp: object) -> str:
    return str(stamp).replace("T", " ") if stamp else "-"


def orphans(result: Obj, clean: bool) -> str:
    found: Sequence[str] = result.get("orphans") or []
    lines = [show_path(p) for p in found]
    if not found:
        lines.append("no orphans")
    elif clean:
        lines.append(f"{_count(result.get('removed'), 'orphan')} removed from the index")
    else:
        lines.append(f"{plural(len(found), 'orphan')} found (remove them with --clean)")
    return "\n".join(lines) + "\n"


def roots(result: Obj) -> str:
    items: Sequence[Obj] = result.get("roots") or []
    if not items:
        return "no roots (add one with `ragctl roots add PATH`)\n"
    lines = [
        f"{show_path(r.get('path', '?'))}  (watcher: {r.get('watcher', '?')}; from {r.get('source', '?')})"
        + (f": {one_line(r['error'])}" if r.get("error") else "")
        for r in items
    ]
    lines += [f"note: {one_line(n)}" for n in result.get("notes") or []]
    return "\n".join(lines) + "\n"


def reloaded(result: Obj) -> str:
    """`reload`: the roots added and removed (if the agent says), then the roots now watched."""
    changes = [f"{what} {show_path(p)}" for what in ("added", "removed") for p in result.get(what) or []]
    head = "reloaded the config" + (": " + ", ".join(changes) if changes else "; roots unchanged")
    return f"{head}\n{roots(result)}"


def paused(result: Obj) -> str:
    if result.get("paused"):
        return "paused: changes are still collected, no directory job starts until `ragctl resume`\n"
    return "resumed: directory jobs run again\n"


def index_stats(result: Obj) -> str:
    kind = result.get("index_type") or "?"
    if result.get("backend") == "milvus":  # a shared collection on a server: its segments are the server's
        state = "reachable" if result.get("reachable") else f"UNREACHABLE ({result.get('last_error')})"
        return (f"index: {_num(result.get('documents'))} chunks of this agent ({kind}, "
                f"{result.get('dimension', '?')}-d) on Milvus: {state}\n"
                f"  {result.get('uri', '?')}, collection {result.get('collection', '?')}\n"
                f"  agent {result.get('agent', '?')}\n"
                f"  embedding fingerprint {result.get('fingerprint', '?')}\n")  # fmt: skip
    lines = [f"index: {_num(result.get('documents'))} chunks ({kind}, {result.get('dimension', '?')}-d), "
             f"{_num(result.get('segments'))} segment{'' if result.get('segments') == 1 else 's'}"
             + (f", {_num(result['blocks'])} block{'' if result['blocks'] == 1 else 's'}"
                if isinstance(result.get("blocks"), int) else "")]  # fmt: skip
    if result.get("needs_optimize"):
        lines.append("  an optimize is due (the agent runs it when idle)")
    lines.append(f"  {show_path(str(result.get('path', '?')))}")
    lines.append(f"  embedding fingerprint {result.get('fingerprint', '?')}")
    return "\n".join(lines) + "\n"


def rebuilt(result: Obj) -> str:
    secs = result.get("elapsed_s")
    took = f" in {secs:.1f} s" if isinstance(secs, (int, float)) else ""
    return f"index rebuilt: {_num(result.get('chunks'))} chunks from {_num(result.get('sources'))} sources{took}\n"


def config_check(result: Obj) -> str:
    verdict = "valid" if result.get("valid", True) else "INVALID"
    body = json.dumps(result.get("config", {}), ensure_ascii=False, indent=2)
    return f"# {result.get('source', '?')}: {verdict} (secrets redacted)\n{body}\n"


def exported(archive: str, written: int, skipped: Sequence[str], what: str = "") -> str:
    tail = f" ({len(skipped)} vanished meanwhile and were skipped)" if skipped else ""
    source = f" of {what}" if what else ""
    return f"wrote {archive}: {plural(written, 'entry', 'entries')}{source}{tail}\n"
