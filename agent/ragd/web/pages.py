"""What each view of the web page shows, as plain data from the verbs (verbs/): run in a worker thread as the visitor's
caller, so every answer is limited by access scope exactly as the same answer over `ragctl` or MCP would be."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragctl import protocol as p
from ragctl.protocol import explain

from .. import access
from ..errors import RagdError
from ..paths import is_under
from ..verbs import changes as changes_verb
from ..verbs import documents
from ..verbs import search as search_verb
from ..verbs import status as status_verb
from ..verbs import sync as sync_verb
from ..verbs.paths import check_path, check_tracked
from ..vocabulary import KINDS, FileState
from .throughput import Throughput, chart

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

PASSAGES_SHOWN = 200  # of a long document's passages, at once (a 10 MB log file has thousands)
PROBLEMS = (FileState.FAILED, FileState.SKIPPED)  # the states the problems view lists
MAX_PROBLEMS = 2000  # failed and skipped files listed at once (the count says how many there are in all)
SEARCH_MODES = ("hybrid", "vector", "keyword")
HEALTH_LABELS = {"ocr": "OCR of scans and images", "legacy_office": "Legacy Office files (LibreOffice)",
                 "watching": "File watching", "http": "HTTP (MCP and this page)", "folders": "Folders",
                 "embeddings": "Embeddings", "disk": "Disk space"}  # fmt: skip
HEALTH_WINDOW_S = 300.0  # the embedder is shown failing while it failed a batch in the last five minutes


def overview(rt: Resident, throughput: Throughput) -> dict[str, Any]:
    """The overview: the agent, the current phase with its time left, each root's files by state, the embedder,
    the index and its last verification, and the throughput of the last minutes."""
    st = status_verb.snapshot(rt)
    prog = dict(st["progress"])
    total, done = prog.get("dirs_total") or 0, prog.get("dirs_done") or 0
    prog["percent"] = round(100 * done / total, 1) if prog.get("phase") and total else None
    if prog.get("phase") and prog.get("eta_s") is None:  # the status' own, from the files done, comes first
        prog["eta_s"] = throughput.time_left(total, done)
    index = st["index"]
    verify = index.get("verify") or {}
    series = throughput.series()
    return {
        "agent": st["agent"],
        "progress": prog,
        "roots": [_root(r) for r in st["roots"]],
        "embedder": st["embedder"],
        "embedder_errors": throughput.errors_since(HEALTH_WINDOW_S),
        "index": index,
        "verify": verify.get("last"),
        "verify_running": bool(verify.get("running")),
        "parse": st["parse"],
        "history": st["history"],
        "mcp": st["mcp"],
        "health": [
            {"name": name, "label": HEALTH_LABELS.get(name, name), **cap}
            for name, cap in (st.get("health") or {}).items()
        ],
        "chart": {key: chart(series, key) for key in ("texts_per_s", "files_per_s")},
        "at": time.time(),
    }


def _root(root: dict[str, Any]) -> dict[str, Any]:
    files = root.get("files") or {}
    return {"path": root["path"], "watcher": root.get("watcher"), "error": root.get("error"),
            "embedded": files.get(FileState.EMBEDDED, 0), "skipped": files.get(FileState.SKIPPED, 0),
            "failed": files.get(FileState.FAILED, 0), "pending_dirs": root.get("pending_dirs", 0),
            "running_dirs": root.get("running_dirs", 0), "waiting_files": root.get("waiting_files", 0)}  # fmt: skip


def problems(rt: Resident, state: str = "", text: str = "", root: str = "") -> dict[str, Any]:
    """Every FAILED and SKIPPED file the caller may see (of `state` only, if given; its path or reason containing
    `text`; under `root`), with its reason and next retry; and the directories that could not be read."""
    scope = access.scope()  # what the caller may see, as its status shows it (access/status.py)
    wanted = {FileState(state)} if state in (FileState.FAILED, FileState.SKIPPED) else set(PROBLEMS)
    needle = text.casefold()
    top = Path(root) if root else None
    matching = [(path, st) for path, st in rt.tracker.problems(wanted)
                if (top is None or is_under(path, top))
                and (not needle or needle in str(path).casefold() or needle in st.reason.casefold())]  # fmt: skip
    shown = scope.keep(matching, lambda f: f[0], gone_ok=True)
    found = [{"path": str(path), "dir": str(path.parent), "name": path.name, "state": st.state,
              "reason": st.reason, "retry_at": st.retry_at} for path, st in shown[:MAX_PROBLEMS]]  # fmt: skip
    dirs = [(d, r) for d, r in sorted(rt.tracker.dir_errors.items()) if top is None or is_under(d, top)]
    since = rt.tracker.held_out_since()  # the folders out of search: the agent cannot read them
    dir_errors = [{"path": str(d), "reason": r, "since": since.get(d)}
                  for d, r in scope.keep(dirs, lambda e: e[0], gone_ok=True)]  # fmt: skip
    return {"files": found, "total": len(shown), "dir_errors": dir_errors, "roots": [str(r) for r in rt.roots],
            "state": state, "text": text, "root": root}  # fmt: skip


def retry(rt: Resident, path: str) -> dict[str, Any]:
    """The `sync` verb for a file or a folder, forced: what failed is tried again now, not at its next retry."""
    access.require_full("retrying files")
    result = sync_verb.sync(rt, sync_verb.SyncArgs(path=path, force=True))
    return {"path": path, "scheduled": result["scheduled"]}


def search(rt: Resident, asked: dict[str, Any]) -> dict[str, Any]:
    """`search` as `ragctl search` runs it, `asked` by the names of docs/protocol.md (SearchQuery checks every
    argument); with `explain`, each hit's `why` and the answer's `how` as `ragctl search --explain` prints them."""
    args = search_verb.SearchQuery.model_validate(asked)
    started = time.monotonic()
    found: dict[str, Any] = dict(search_verb.search(rt, args))
    elapsed = round(1000 * (time.monotonic() - started), 1)
    if args.explain:
        for hit in [*found["results"], *(c for f in found.get("files", ()) for c in f["chunks"])]:
            hit["why"] = explain.why(hit, "").removeprefix("why: ").strip()
        found["how"] = explain.explained(found).strip()
    return {**found, "elapsed_ms": elapsed}


def document(rt: Resident, path: str, chunk: int | None = None, start: int | None = None) -> dict[str, Any]:
    """A document's state and sidecar facts, its identity and history, and its chunks in order: at most
    PASSAGES_SHOWN of them, from `start`, else around `chunk`, else from the first."""
    info = documents.file_info(rt, documents.FileArgs(path=path))  # checks the path (inside a root, tracked,
    every = documents.file_chunks(rt, documents.FileArgs(path=path))["chunks"]  # readable by the caller)
    if start is None:
        start = max(0, chunk - PASSAGES_SHOWN // 4) if chunk is not None else 0
    start = max(0, min(start, len(every) - PASSAGES_SHOWN)) if len(every) > PASSAGES_SHOWN else 0
    chunks = every[start : start + PASSAGES_SHOWN]
    window = {"start": start, "end": start + len(chunks), "total": len(every), "size": PASSAGES_SHOWN}
    doc = rt.history.document(path=info["path"])
    history: dict[str, Any] = {"document": None, "versions": [], "events": []}
    if doc is not None:
        events, _ = rt.history.changes(document_id=doc.id, limit=50)
        history = {"document": doc.to_json(), "versions": rt.history.versions(doc.id)[:20],
                   "events": [e.to_json() for e in events]}  # fmt: skip
    same = rt.history.same_content([info["md5"]]).get(info["md5"], []) if info.get("md5") else []
    copies = access.scope().keep([c for c in same if c != info["path"]], lambda c: c, gone_ok=True)
    return {"info": info, "chunks": chunks, "window": window, "copies": copies, **history}


def raw_file(rt: Resident, path: str) -> Path:
    """The file itself, for the browser to open: a tracked file inside a root that the caller can read."""
    safe = check_path(path, rt.roots)
    check_tracked(safe, rt.ignore)
    access.scope().check_readable(safe.path)
    if not safe.path.is_file():
        raise RagdError(f"{safe.path} is not a file (any more)", code=p.NOT_FOUND)
    return safe.path


def changes(rt: Resident, since_hours: float, kind: str, path: str, limit: int = 200) -> dict[str, Any]:
    """What changed in the last `since_hours`, newest first (each document once: its latest change)."""
    kinds = (kind,) if kind in KINDS else KINDS
    found = changes_verb.recent_changes(rt, changes_verb.RecentArgs(since_hours=since_hours, path_prefix=path or None,
                                                                    limit=limit, kinds=kinds))  # fmt: skip
    return {**found, "kinds": KINDS, "kind": kind, "since_hours": since_hours, "path": path}


def when(stamp: str | float | None) -> str:
    """A time for people: "14:03:12" today, else "2026-11-30 14:03"; "" for none. Local time of the agent."""
    if stamp is None or stamp == "":
        return ""
    if isinstance(stamp, int | float):
        at = datetime.fromtimestamp(stamp, UTC)
    else:
        try:
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return stamp
    local = at.astimezone()
    if local.date() == datetime.now().astimezone().date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M")


def duration(seconds: float | None) -> str:
    """ "45 s", "12 min", "3 h 20 min"; "" for None."""
    if seconds is None:
        return ""
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 3600 * 2:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {round(s % 3600 / 60)} min"
