"""What a verb may use of the agent: two small interfaces, met structurally.

`Runtime` is what every verb needs, and what the offline `ragd` commands provide too (`offline.py`): the roots,
the ignore rules, the search service, an index to read and a way to run a write on the index writer (so no verb
writes the index from its own thread). `Resident` adds what only the running agent has: the tracker and scheduler
views, the embed queue, the verifier, the roots it watches, and its `Host` (resident/host.py: the process
around it, with the control socket, the config file, reload, stopping). `resident.agent.Agent` is a `Resident`; nothing here imports it.

A verb is a function `verb(rt, args, progress=...)`: `args` is its pydantic model (arguments.py), `progress` sends
one progress line and returns False once the caller has gone; the result is a plain JSON-ready dict, and a domain
error is a RagdError with a protocol code, translated once by whichever edge called the verb.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ..config import Config
    from ..index import IndexBackend
    from ..index.query.search import SearchService
    from ..index.write.sync import IndexSync
    from ..index.write.verify import Verifier
    from ..index.write.writer import Indexer
    from ..paths import Within
    from ..pipeline.embed import LazyEmbedQueue
    from ..pipeline.scan import Ignore
    from ..resident.capabilities import Health
    from ..resident.changes import ChangeLog
    from ..resident.debounce import Debouncer
    from ..resident.history import History
    from ..resident.host import Host
    from ..resident.rootstate import RootOverlay
    from ..resident.scheduler import Scheduler
    from ..resident.tracker import Tracker
    from ..resident.watcher import Watcher

T = TypeVar("T")
Progress = Callable[[Mapping[str, Any]], bool]


def no_progress(_line: Mapping[str, Any]) -> bool:
    return True


class Runtime(Protocol):
    @property
    def config(self) -> Config: ...
    @property
    def roots(self) -> list[Path]: ...
    @property
    def ignore(self) -> Ignore: ...
    def ready(self) -> None:
        """Raise RagdError(unavailable) unless the index is open and searchable (not starting, stopping, rebuilding)."""

    def searcher(self) -> SearchService: ...
    def reader(self) -> IndexBackend: ...
    def write(self, fn: Callable[[IndexSync], T]) -> Future[T]: ...


class Resident(Runtime, Protocol):
    host: Host
    tracker: Tracker
    changes: ChangeLog
    history: History
    scheduler: Scheduler
    debouncer: Debouncer
    embed: LazyEmbedQueue
    verifier: Verifier
    health: Health  # what works on this machine (resident/capabilities.py)
    watcher: Watcher
    started: float
    rebuilding: bool
    data_dir_rebuilt: dict[str, Any] | None  # the data directory made again (resident/datadir.py)
    cli_roots: list[Path]  # given to `ragd run` on its command line

    @property
    def data_dir(self) -> Path: ...
    @property
    def missing_roots(self) -> Mapping[Path, str]: ...
    @property
    def writer(self) -> Indexer | None:
        """The index writer, None while the index is being opened."""

    def version(self) -> str: ...
    def current_state(self) -> str: ...
    def configured_roots(self) -> set[Path]: ...
    def resolve_roots(self) -> list[Path]: ...
    def root_overlay(self) -> RootOverlay: ...

    def change_root_overlay(self, edit: Callable[[RootOverlay], None]) -> None: ...
    def set_roots(self, wanted: list[Path]) -> tuple[list[Path], list[Path]]: ...
    def watch_mode(self, root: Path) -> str: ...
    def settled(self, since: float) -> bool: ...
    def dirs_to_do(self) -> tuple[int, int]: ...
    def to_do_within(self, within: Within) -> dict[str, int]: ...
    def settled_within(self, within: Within, since: float) -> bool: ...
    def waiting_files(self, top: Path | None = None) -> int: ...
    def run_dirs(self, dirs: list[Path], phase: str, *, force: bool = False) -> None: ...
    def rebuild_index(self, progress: Progress) -> dict[str, Any]: ...
