"""What works on this machine: each capability that can be missing or degraded where the agent runs, with a state
(ok, degraded, unavailable) and a reason (DESIGN §9 "Health").

The capabilities: OCR (its engine must load), legacy Office files (LibreOffice's `soffice` on PATH), file watching
(inotify, or polling where its limits left a root), HTTP (the MCP endpoint and the web page on their port), folders
(every folder can be read and written), the embeddings API or model (answering, not rate-limited) and disk space (on
the data directory's and the roots' file systems, `[run] min_free_space`).

`Health.check(rt)` probes them all (the slower probes, OCR and soffice, at most every SLOW_EVERY_S) and logs each
change of state once: at warning level when a capability stops working, at info when it works again; one turned
off in the configuration (`chosen`) is shown, never warned about. `ragctl status`, `--json`, MCP `status`, the web
page and systemd's STATUS= all show what the last check found.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..pipeline.parse.ocr import unavailable as ocr_unavailable
from ..pipeline.sidecar import utc_stamp

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..config import Config
    from ..pipeline.embed import LazyEmbedQueue
    from .host import Host
    from .tracker import Tracker
    from .watcher import Watcher


class Resident(Protocol):
    """What the checks read of the running agent (the verbs' `Resident` has all of it; declared here so that
    resident/ imports nothing above it)."""

    host: Host
    tracker: Tracker
    embed: LazyEmbedQueue
    watcher: Watcher

    @property
    def config(self) -> Config: ...
    @property
    def roots(self) -> list[Path]: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def missing_roots(self) -> Mapping[Path, str]: ...


log = logging.getLogger(__name__)

OK, DEGRADED, UNAVAILABLE, STARTING = "ok", "degraded", "unavailable", "starting"
BAD = (DEGRADED, UNAVAILABLE)
SLOW_EVERY_S = 30.0  # OCR and soffice are probed again this often (an install is seen within this)
RETRY_WINDOW_S = 60.0  # the embedder is degraded while it retried requests within this
MIB = 1024 * 1024
LEGACY_SKIPPED = "needs LibreOffice"  # how parse/legacy.py skips a .doc or .ppt without soffice
LABELS = {"ocr": "OCR", "legacy_office": "legacy Office files", "watching": "file watching",
          "http": "HTTP (MCP and web page)", "folders": "folders", "embeddings": "embeddings",
          "disk": "disk space"}  # fmt: skip


@dataclass(frozen=True)
class Capability:
    name: str
    state: str  # ok, degraded, unavailable (starting: not known yet)
    reason: str = ""  # why it is not ok (no path in it: a scoped caller sees it too)
    detail: str = ""  # the folder, root or file system it is about (left out for a scoped caller)
    chosen: bool = False  # turned off in the configuration: shown, not a problem
    unneeded: bool = False  # missing, but no file has needed it so far: shown, not a problem yet
    since: str | None = None  # when it entered this state (UTC)

    @property
    def problem(self) -> bool:
        return self.state in BAD and not self.chosen and not self.unneeded

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "reason": self.reason}
        if self.detail:
            out["detail"] = self.detail
        if self.chosen:
            out["chosen"] = True
        if self.unneeded:
            out["unneeded"] = True
        if self.since:
            out["since"] = self.since
        return out


class Health:
    """The last state of every capability, and the log of its changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, Capability] = {}
        self._slow: dict[str, Capability] = {}
        self._slow_at = float("-inf")
        self._retries: deque[tuple[float, int]] = deque()

    def check(self, rt: Resident) -> dict[str, Capability]:
        """Probe every capability now; a change of state is logged once."""
        now = time.monotonic()
        with self._lock:
            if now - self._slow_at >= SLOW_EVERY_S:
                self._slow = {c.name: c for c in (_ocr(rt), _legacy_office())}
                self._slow_at = now
            legacy = self._slow["legacy_office"]
            if legacy.state != OK and any(r.startswith(LEGACY_SKIPPED) for r in rt.tracker.skipped_reasons()):
                legacy = replace(legacy, unneeded=False)
            found = [self._slow["ocr"], legacy, _watching(rt), _http(rt), _folders(rt),
                     self._embeddings(rt, now), _disk(rt)]  # fmt: skip
            for cap in found:
                self._last[cap.name] = self._changed(cap)
            return dict(self._last)

    def last(self) -> dict[str, Capability]:
        with self._lock:
            return dict(self._last)

    def summary(self) -> str:
        """The problems, short, for systemd's STATUS= ("" when everything works)."""
        problems = [f"{LABELS.get(c.name, c.name)} {c.state}" for c in self.last().values() if c.problem]
        return ", ".join(problems) + " (see `ragctl status`)" if problems else ""

    def _changed(self, cap: Capability) -> Capability:
        before = self._last.get(cap.name)
        if before is not None and (before.state, before.problem) == (cap.state, cap.problem):
            return replace(cap, since=before.since)
        cap = replace(cap, since=utc_stamp())
        label = LABELS.get(cap.name, cap.name)
        if cap.state in BAD:
            say: Callable[..., None] = log.warning if cap.problem else log.info
            tail = f" ({cap.detail})" if cap.detail else ""
            say("%s %s: %s%s", label, cap.state, cap.reason, tail)
        elif cap.state == OK and before is not None and before.state in BAD:
            log.info("%s: working again", label)
        return cap

    def _embeddings(self, rt: Resident, now: float) -> Capability:
        stats = rt.embed.stats
        retries = self._retries
        retries.append((now, stats.retries))
        while len(retries) > 1 and retries[0][0] < now - RETRY_WINDOW_S:
            retries.popleft()
        failing = stats.last_error_at is not None and (stats.last_ok_at or 0.0) < stats.last_error_at
        if failing:
            retries.clear()  # the retries of the failed requests: not counted once it works again
            error = stats.last_error or "?"
            if stats.down_until is not None and stats.down_until > time.time():
                error += (f"; not sent texts until {time.strftime('%H:%M:%S', time.localtime(stats.down_until))} "
                          "(`ragctl sync` tries it now)")  # fmt: skip
            if stats.rate_limited:
                return Capability("embeddings", DEGRADED, f"rate limited: {error}")
            return Capability("embeddings", UNAVAILABLE, f"failing: {error}")
        retried = stats.retries - retries[0][1]
        if retried > 0:
            return Capability("embeddings", DEGRADED,
                              f"{retried} requests retried in the last minute (slow, failing or rate-limiting)")  # fmt: skip
        return Capability("embeddings", OK)


def _ocr(rt: Resident) -> Capability:
    options = rt.config.parse
    why = ocr_unavailable(options)
    if why is None:
        return Capability("ocr", OK)
    return Capability("ocr", UNAVAILABLE, f"{why}: images are skipped, scanned PDF pages stay empty",
                      chosen=not options.ocr)  # fmt: skip


def _legacy_office() -> Capability:
    if shutil.which("soffice") is not None:
        return Capability("legacy_office", OK)
    return Capability("legacy_office", UNAVAILABLE, "LibreOffice (soffice) is not on the agent's PATH: .doc and "
                      ".ppt files are skipped (install LibreOffice, or save them as .docx / .pptx)",
                      unneeded=True)  # fmt: skip


def _watching(rt: Resident) -> Capability:
    fallbacks = dict(rt.watcher.fallbacks)
    if not fallbacks:
        return Capability("watching", OK)
    (root, why), more = next(iter(fallbacks.items())), len(fallbacks) - 1
    others = f" (and {more} more root{'s' if more > 1 else ''})" if more else ""
    return Capability("watching", DEGRADED, f"polled instead of watched by inotify, changes are seen later: {why}",
                      detail=f"{root}{others}")  # fmt: skip


def _http(rt: Resident) -> Capability:
    mcp = rt.host.mcp_status()
    if not mcp.get("enabled", True):
        return Capability("http", UNAVAILABLE, "[mcp] enabled = false: no MCP over HTTP and no web page "
                          "(`ragctl mcp` still works)", chosen=True)  # fmt: skip
    if mcp.get("error"):
        return Capability("http", UNAVAILABLE, str(mcp["error"]))
    if mcp.get("url"):
        return Capability("http", OK)
    return Capability("http", STARTING, "stopping" if rt.host.stopping() else "starting")


def _folders(rt: Resident) -> Capability:
    errors: dict[Path, str] = {}
    for root, why in dict(rt.missing_roots).items():
        errors[root] = f"{root} {why}"
    errors.update(dict(rt.tracker.dir_errors))
    if not errors:
        return Capability("folders", OK)
    (first, why), n = min(errors.items()), len(errors)
    roots = [*rt.roots, *rt.missing_roots]
    state = UNAVAILABLE if roots and all(r in errors for r in roots) else DEGRADED
    noun = "folder cannot" if n == 1 else "folders cannot"
    return Capability("folders", state, f"{n} {noun} be indexed (listed under their roots)",
                      detail=f"{first}: {why}")  # fmt: skip


def _disk(rt: Resident) -> Capability:
    want = rt.config.run.min_free_space * MIB
    if not want:
        return Capability("disk", OK)
    worst: tuple[int, Path] | None = None
    seen: set[int] = set()
    for path in (rt.data_dir, *rt.roots):
        try:
            st = os.statvfs(path)
            dev = os.stat(path).st_dev
        except OSError:
            continue  # gone: the folders capability says so
        if dev in seen:
            continue
        seen.add(dev)
        free = st.f_bavail * st.f_frsize
        if worst is None or free < worst[0]:
            worst = (free, path)
    if worst is None or worst[0] >= want:
        return Capability("disk", OK)
    free, path = worst
    state = UNAVAILABLE if free < want / 10 else DEGRADED
    return Capability("disk", state, f"{free // MIB} MiB free, below [run] min_free_space = "
                      f"{want // MIB} MiB: sidecars and the index may fail to be written",
                      detail=f"the file system of {path}")  # fmt: skip
