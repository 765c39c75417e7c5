"""The other verbs' output: `wait`, `sync`, `rebuild` and their progress, `changes` (a document's history),
`orphans`, `roots`, `reload`, `pause`, `index` (its figures), `config check` and `export`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..protocol.text import Obj, _count, _int, _num, one_line, plural, show_path


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
