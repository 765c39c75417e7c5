"""watchdog 7.1's inotify thread died on a KeyError when a deleted folder's watch was forgotten twice; the agent's
`forget_watch` lets a forgotten watch be and keeps a newer watch of the same path."""

from __future__ import annotations

from types import SimpleNamespace

from ragd.resident.watcher import forget_watch


def test_a_watch_forgotten_already_or_a_path_watched_anew_is_let_be() -> None:
    group = SimpleNamespace(_active_callbacks_by_watch={1: b"/r/d/.rag/tmp", 2: b"/r/e"},
                            _active_callbacks_by_path={b"/r/e": 2})  # fmt: skip
    forget_watch(group, 1)  # its path names no watch any more: watchdog raised KeyError here
    forget_watch(group, 1)  # forgotten twice
    assert group._active_callbacks_by_watch == {2: b"/r/e"} and group._active_callbacks_by_path == {
        b"/r/e": 2
    }
    group._active_callbacks_by_watch[3] = b"/r/e"  # an older watch of a path watched anew (wd 2)
    forget_watch(group, 3)
    assert group._active_callbacks_by_path == {b"/r/e": 2}
    forget_watch(group, 2)
    assert group._active_callbacks_by_watch == {} and group._active_callbacks_by_path == {}
