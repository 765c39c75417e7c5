"""The control verbs (docs/protocol.md): each takes the request's args and returns the result object.

Handlers validate their arguments, call the agent, and raise RagdError with a protocol error code; the control
server turns that into the error reply.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragctl import protocol as p

from ..config import load_config
from ..errors import RagdError
from ..index.sync import IndexSync
from ..paths import is_under, overlaps, root_of
from ..pipeline import sidecar
from ..pipeline.scan import walk_dirs
from ..resident import rootstate
from ..verbs.status import status_result
from .control import Handler, Stream

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .lifecycle import Lifecycle

WAIT_POLL_S = 0.05
SETTLE_S_PAUSED = 0.6  # a wait while paused says so once the changes already seen have reached the queue
STREAM_EVERY_S = 0.5


def _bad(message: str, hint: str = "") -> RagdError:
    return RagdError(message, hint, code=p.BAD_REQUEST)


def _arg(args: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = args.get(key, default)
    if value is None or (isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))):
        return value
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise _bad(f"argument {key!r} must be {names}, not {type(value).__name__}")


def _path_arg(args: dict[str, Any], roots: list[Path], key: str = "path") -> Path | None:
    raw = _arg(args, key, str)
    if raw is None:
        return None
    path = Path(os.path.normpath(raw))
    if not path.is_absolute():
        raise _bad(f"{key} must be an absolute path: {raw}")
    if root_of(path, roots) is None:
        raise RagdError(f"{path} is not under any root of this agent",
                        "see `ragctl roots list`; add it with `ragctl roots add`", code=p.NOT_FOUND)  # fmt: skip
    return path


def make_handlers(life: Lifecycle) -> dict[str, Handler]:
    agent = life.agent

    def ready() -> None:
        if agent.state == "starting":
            raise RagdError("the agent is starting (opening the index)", "try again in a moment",
                            code=p.UNAVAILABLE)  # fmt: skip
        if agent.rebuilding:
            raise RagdError("the index is being rebuilt", "try again when `ragctl wait` returns",
                            code=p.UNAVAILABLE)  # fmt: skip

    def hello(args: dict[str, Any], stream: Stream) -> Any:
        return {"agent": "ragd", "version": agent.version(), "protocol": p.VERSION, "pid": os.getpid()}

    def status(args: dict[str, Any], stream: Stream) -> Any:
        if not _arg(args, "watch", bool, False):
            return status_result(life)
        interval = float(_arg(args, "interval", (int, float), 1.0))
        while stream.send(status_result(life)) and not life.stop_requested.wait(max(0.1, interval)):
            pass
        return status_result(life)

    def search(args: dict[str, Any], stream: Stream) -> Any:
        ready()
        query = _arg(args, "query", str)
        if query is None:
            raise _bad("search needs a 'query'")
        k = _arg(args, "k", int, 5)
        mode = _arg(args, "mode", str, "hybrid")
        prefixes = [os.path.normpath(x) for x in _arg(args, "path", list, [])]
        results = agent.search_service.search(
            query, k=k, mode=mode, path_prefixes=prefixes, extensions=_arg(args, "ext", list, []),
            one_per_file=_arg(args, "one_per_file", bool, False))  # fmt: skip
        return {"query": query, "mode": mode, "results": [r.to_dict() for r in results]}

    def wait_idle(stream: Stream, timeout: float | None, since: float) -> dict[str, Any]:
        deadline = None if timeout is None else since + timeout
        last_sent = 0.0
        while not agent.settled(since):
            now = time.monotonic()
            if agent.scheduler.paused and now - since >= SETTLE_S_PAUSED:
                pending, running = agent.dirs_to_do()
                if pending and not running:
                    raise RagdError(f"the agent is paused with {pending} director{'y' if pending == 1 else 'ies'} "
                                    "to do, so it will not become idle", "run `ragctl resume`",
                                    code=p.UNAVAILABLE)  # fmt: skip
            if deadline is not None and now >= deadline:
                raise RagdError(f"the agent is still busy after {timeout:g} s", "wait longer, or see `ragctl status`",
                                code=p.TIMEOUT)  # fmt: skip
            if life.stop_requested.is_set():
                raise RagdError("the agent is stopping", code=p.UNAVAILABLE)
            if now - last_sent >= STREAM_EVERY_S:
                if not stream.send(_busy(life)):
                    return {}
                last_sent = now
            time.sleep(WAIT_POLL_S)
        return {"waited_s": round(time.monotonic() - since, 3)}

    def wait(args: dict[str, Any], stream: Stream) -> Any:
        since = time.monotonic()
        return wait_idle(stream, _arg(args, "timeout", (int, float)), since)

    def sync(args: dict[str, Any], stream: Stream) -> Any:
        ready()
        since = time.monotonic()
        path = _path_arg(args, agent.roots)
        tops = [path] if path is not None else list(agent.roots)
        dirs = [d for t in tops if t.is_dir() for d in walk_dirs(t, agent.ignore)]
        if path is not None and path.is_file():
            dirs = [path.parent]
        if _arg(args, "force", bool, False):
            agent.force_next(dirs)
        agent.run_dirs(dirs, "sync")
        result: dict[str, Any] = {"scheduled": len(dirs)}
        if _arg(args, "wait", bool, False):
            result.update(wait_idle(stream, _arg(args, "timeout", (int, float)), since))
        return result

    def export(args: dict[str, Any], stream: Stream) -> Any:
        path = _path_arg(args, agent.roots)
        recursive = _arg(args, "recursive", bool, False)
        tops = [path] if path is not None else list(agent.roots)
        files = []
        for top in tops:
            base = top if path is not None else top.parent
            dirs = walk_dirs(top, agent.ignore) if recursive else iter([top])
            for d in dirs:
                for en in sidecar.list_entries(d):
                    if not en.deleted:
                        files.append({"path": str(en.path), "arcname": os.path.relpath(en.path, base)})
        base_out = (
            str(path) if path is not None else os.path.commonpath([str(t.parent) for t in tops] or ["/"])
        )
        return {"base": base_out, "files": files}

    def orphans(args: dict[str, Any], stream: Stream) -> Any:
        ready()
        path = _path_arg(args, agent.roots)
        clean = _arg(args, "clean", bool, False)
        found = agent.indexer.call(lambda s: _orphans(s, path, clean)).result()
        return {"orphans": found, "removed": len(found) if clean else 0}

    def index(args: dict[str, Any], stream: Stream) -> Any:
        ready()
        if not _arg(args, "rebuild", bool, False):
            stats = agent.indexer.index.stats()
            if _arg(args, "sources", bool, False):
                stats["sources"] = sorted(agent.indexer.index.sources(None))
            return stats
        return agent.rebuild_index(stream)

    def roots(args: dict[str, Any], stream: Stream) -> Any:
        action = _arg(args, "action", str, "list")
        if action not in ("list", "add", "remove"):
            raise _bad(f"unknown roots action {action!r}", "use list, add or remove")
        notes = _change_root(life, action, _arg(args, "path", str)) if action != "list" else []
        return {"roots": _roots_list(life), "notes": notes}

    def verify(args: dict[str, Any], stream: Stream) -> Any:
        ready()
        last_sent = [0.0]

        def progress(dirs: int) -> None:
            now = time.monotonic()
            if now - last_sent[0] >= STREAM_EVERY_S:
                stream.send({"phase": "verifying", "dirs": dirs})
                last_sent[0] = now

        return agent.verifier.run("request", progress).to_json()

    def pause(args: dict[str, Any], stream: Stream) -> Any:
        agent.scheduler.pause()
        return {"paused": True}

    def resume(args: dict[str, Any], stream: Stream) -> Any:
        agent.scheduler.resume()
        return {"paused": False}

    def config(args: dict[str, Any], stream: Stream) -> Any:
        action = _arg(args, "action", str, "check")
        if action != "check":
            raise _bad(f"unknown config action {action!r}", "use check")
        cfg = load_config(life.config_path)  # ConfigError -> failed, naming the file and the key
        return {"source": cfg.source, "config": cfg.redacted(), "valid": True}

    def reload(args: dict[str, Any], stream: Stream) -> Any:
        changed = life.reload()
        return {**changed, "roots": _roots_list(life)}

    verbs: dict[str, Callable[[dict[str, Any], Stream], Any]] = {
        "hello": hello, "status": status, "search": search, "sync": sync, "wait": wait, "export": export,
        "orphans": orphans, "index": index, "roots": roots, "pause": pause, "resume": resume,
        "config": config, "reload": reload, "verify": verify,
    }  # fmt: skip
    return verbs


def _busy(life: Lifecycle) -> dict[str, Any]:
    agent = life.agent
    pending, running = agent.dirs_to_do()
    stats = agent.embed.stats
    return {"pending_dirs": pending, "running_dirs": running,
            "queued_texts": stats.queued + stats.in_flight,
            "pending_mushrooms": agent.indexer.pending() if agent.state != "starting" else 0,
            "phase": agent.tracker.progress.phase}  # fmt: skip


def _orphans(sync: IndexSync, path: Path | None, clean: bool) -> list[str]:
    found = sync.orphans(path)
    if clean:
        for source in found:
            sync.index.delete_source(source)
        if found:
            sync.index.flush()
    return found


def _roots_list(life: Lifecycle) -> list[dict[str, Any]]:
    agent = life.agent
    configured = {*agent.config.roots, *agent.cli_roots}
    out = [{"path": str(r), "watcher": agent.watcher.mode(r), "source": "config" if r in configured else "ragctl"}
           for r in agent.roots]  # fmt: skip
    out += [{"path": str(r), "watcher": "off", "source": "config" if r in configured else "ragctl",
             "error": f"{r} {why}"} for r, why in agent.missing_roots.items()]  # fmt: skip
    return out


def _change_root(life: Lifecycle, action: str, raw: str | None) -> list[str]:
    """Add or remove a root (kept in roots.json); returns notes on how it nests with the other roots."""
    agent = life.agent
    if not raw or not os.path.isabs(raw):
        raise _bad(f"roots {action} needs an absolute path")
    root = Path(os.path.normpath(raw))
    overlay = rootstate.load(agent.data_dir)
    if action == "add":
        if not root.is_dir():
            raise RagdError(
                f"{root} is not a directory", "create it first, or check the path", code=p.NOT_FOUND
            )
        overlay.add(root)
        notes = overlaps(root, agent.roots)
    else:
        if root not in agent.roots and root not in agent.missing_roots:
            raise RagdError(
                f"{root} is not a root of this agent", "see `ragctl roots list`", code=p.NOT_FOUND
            )
        overlay.remove(root, configured=root in {*agent.config.roots, *agent.cli_roots})
        notes = [f"{root} is inside the root {r}: its files stay indexed" for r in agent.roots
                 if r != root and is_under(root, r)][:1]  # fmt: skip
    rootstate.save(agent.data_dir, overlay)
    agent.set_roots(agent.resolve_roots())
    for note in notes:
        log.info("roots %s: %s", action, note)
    return notes
