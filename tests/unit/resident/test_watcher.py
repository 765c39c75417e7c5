"""Watcher on real files with real watchdog: what reaches the agent, and what must not.

"Nothing happened" is asserted behind a barrier: a new directory elsewhere in the root whose event is awaited
first; inotify delivers events in order through one queue, so everything before it has been handled.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd.config import IgnoreConfig
from ragd.pipeline.scan import Ignore
from ragd.resident.inotify import inotify_watch_available, watched_inodes
from ragd.resident.watcher import OVERFLOW_MESSAGE, WATCHDOG_INOTIFY_LOGGER, Watcher
from ragd.resident.watchevents import DIRTY, WatchEvent
from tests.support.poll import poll


class Sink:
    def __init__(self) -> None:
        self._events: list[WatchEvent] = []
        self._lock = threading.Lock()

    def __call__(self, ev: WatchEvent) -> None:
        with self._lock:
            self._events.append(ev)

    @property
    def events(self) -> list[WatchEvent]:
        with self._lock:
            return list(self._events)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()

    def got(self, kind: str, directory: Path, path: Path | None = None) -> bool:
        """`path`: the change note of a "mushroom" event; for a "dirty" one, None matches whichever file changed."""
        return any(
            e.kind == kind
            and e.directory == directory
            and (e.path == path or (path is None and kind == DIRTY))
            for e in self.events
        )

    def wait(self, kind: str, directory: Path, path: Path | None = None) -> None:
        try:
            poll(lambda: self.got(kind, directory, path), timeout=5, what=f"a {kind} event for {directory}")
        except AssertionError as err:
            raise AssertionError(f"{err}; events: {self.events}") from None

    def about(self, prefix: Path) -> list[WatchEvent]:
        return [
            e
            for e in self.events
            if e.directory.is_relative_to(prefix) or (e.path and e.path.is_relative_to(prefix))
        ]


class Tree:
    """A watched root with a docs/ directory and a sentinel directory for barriers."""

    def __init__(self, tmp_path: Path, watcher: Watcher, sink: Sink) -> None:
        self.root = tmp_path / "root"
        self.docs = self.root / "docs"
        self.sentinel_dir = self.root / "zz"
        self.outside = tmp_path / "outside"
        for d in (self.docs, self.sentinel_dir, self.outside):
            d.mkdir(parents=True)
        (self.docs / "a.md").write_text("alpha\n")
        self.watcher, self.sink = watcher, sink
        self._n = 0

    def barrier(self) -> list[WatchEvent]:
        """Every event caused before the barrier has been handled once it returns; it returns those events
        (the sentinel's own left out) and starts a fresh list."""
        self._n += 1
        fresh = self.sentinel_dir / f"b{self._n}"
        fresh.mkdir()  # one inotify event, and a directory no earlier event can name
        self.sink.wait("dirty", fresh)
        before = [e for e in self.sink.events if not e.directory.is_relative_to(self.sentinel_dir)]
        self.sink.clear()
        return before


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def watcher(sink: Sink) -> Iterator[Watcher]:
    w = Watcher(Ignore(IgnoreConfig()), sink)
    yield w
    w.stop()


@pytest.fixture
def tree(tmp_path: Path, watcher: Watcher, sink: Sink) -> Tree:
    t = Tree(tmp_path, watcher, sink)
    assert watcher.add_root(t.root) == "inotify"
    assert watcher.mode(t.root) == "inotify"
    return t


def test_create_modify_rename_delete_file(tree: Tree, sink: Sink) -> None:
    (tree.docs / "b.md").write_text("beta\n")
    sink.wait("dirty", tree.docs)
    tree.barrier()
    with open(tree.docs / "a.md", "a") as fh:
        fh.write("more\n")
    sink.wait("dirty", tree.docs)
    tree.barrier()
    (tree.docs / "b.md").rename(tree.docs / "c.md")
    sink.wait("dirty", tree.docs)
    tree.barrier()
    (tree.docs / "c.md").rename(tree.root / "c.md")  # across directories: both are dirty
    sink.wait("dirty", tree.docs)
    sink.wait("dirty", tree.root)
    tree.barrier()
    (tree.root / "c.md").unlink()
    sink.wait("dirty", tree.root)
    assert {e.kind for e in sink.events} == {"dirty"}


def test_editor_temp_files_alone_are_ignored_and_rename_over_target_is_a_write(
    tree: Tree, sink: Sink
) -> None:
    for name in (".a.md.swp", "a.md~", ".#a.md", "a.tmp", ".goutputstream-XYZ1", "4913"):
        (tree.docs / name).write_text("draft")
    (tree.docs / "4913").unlink()
    assert tree.barrier() == []
    (tree.docs / ".a.md.swp").rename(tree.docs / "a.md")  # vim-style save
    sink.wait("dirty", tree.docs)
    tree.barrier()
    (tree.docs / "a.tmp").rename(tree.docs / "a.md")  # write tmp, rename over target
    sink.wait("dirty", tree.docs)


def test_new_directory_and_its_files(tree: Tree, sink: Sink) -> None:
    new = tree.docs / "new"
    new.mkdir()
    (new / "x.md").write_text("x")
    sink.wait("dirty", tree.docs)
    sink.wait("dirty", new)


def test_directory_moved_in_from_outside(tree: Tree, sink: Sink) -> None:
    pkg = tree.outside / "pkg"
    (pkg / "deep").mkdir(parents=True)
    (pkg / "deep" / "y.md").write_text("y")
    pkg.rename(tree.docs / "pkg")
    sink.wait("dirty", tree.docs)
    sink.wait("dirty", tree.docs / "pkg")
    assert not any(e.kind == "gone" for e in sink.events)


def test_what_a_folder_moved_in_holds_is_not_reported_beside_the_folder(tree: Tree, sink: Sink) -> None:
    """watchdog follows a folder moved in from outside with a "created" event for each file and folder in it: the
    folder's arrival is what the agent needs (its job lists it whole and queues its folders). Reported, the files'
    events reached the debouncer during the folder's job, and ran it once more (a big folder's second job)."""
    pkg = tree.outside / "pkg"
    (pkg / "deep").mkdir(parents=True)
    for i in range(50):
        (pkg / f"n{i}.md").write_text(f"note {i}")
    (pkg / "deep" / "y.md").write_text("y")
    pkg.rename(tree.docs / "pkg")
    events = tree.barrier()
    moved = tree.docs / "pkg"
    assert WatchEvent(tree.docs, DIRTY) in events and WatchEvent(moved, DIRTY) in events, events
    assert not [e for e in events if e.path is not None or e.directory.is_relative_to(moved / "deep")], events
    (moved / "deep" / "later.md").write_text("a real change, after the move")
    assert WatchEvent(moved / "deep", DIRTY, moved / "deep" / "later.md") in tree.barrier()
    (moved / "n1.md").write_text("edited")
    assert WatchEvent(moved, DIRTY, moved / "n1.md") in tree.barrier()


def test_what_a_folder_renamed_holds_is_not_reported_beside_the_folder(tree: Tree, sink: Sink) -> None:
    """watchdog follows a folder renamed within the root with a "moved" event for each file and folder in it: the
    old name's "gone" and the new name's arrival bring its files. Reported, each file made two "dirty" events
    taken for edits (a 30,000-note folder renamed: 60,000). Its folders' are kept (they queue its subfolders at
    once), and a change note that came in its `.rag/` is told."""
    pkg = tree.docs / "pkg"
    (pkg / "deep").mkdir(parents=True)
    for i in range(50):
        (pkg / f"n{i}.md").write_text(f"note {i}")
    (pkg / "deep" / "y.md").write_text("y")
    (pkg / ".rag").mkdir()
    note = pkg / ".rag" / "1-2-3.mushroom"
    note.write_text("{}")
    tree.barrier()
    renamed = tree.docs / "pkg renamed"
    pkg.rename(renamed)
    events = tree.barrier()
    assert WatchEvent(pkg, "gone") in events and WatchEvent(renamed, DIRTY) in events, events
    assert WatchEvent(tree.docs, DIRTY) in events, events
    assert WatchEvent(renamed, "mushroom", renamed / ".rag" / note.name) in events, events
    assert WatchEvent(renamed / "deep", DIRTY) in events, events
    assert not [e for e in events if e.path is not None and e.kind != "mushroom"], events
    (renamed / "deep" / "later.md").write_text("a real change, after the rename")
    assert WatchEvent(renamed / "deep", DIRTY, renamed / "deep" / "later.md") in tree.barrier()


def test_directory_moved_out_is_gone_and_leaves_no_stale_events(tree: Tree, sink: Sink) -> None:
    sub = tree.docs / "sub"
    (sub / "inner").mkdir(parents=True)
    (sub / "s.md").write_text("s")
    tree.barrier()
    moved = tree.outside / "sub"
    sub.rename(moved)
    sink.wait("gone", sub)
    sink.wait("dirty", tree.docs)
    tree.barrier()
    # watchdog still watches the moved tree under its old path: none of this may reach the agent
    (moved / "new.md").write_text("n")
    (moved / "s.md").unlink()
    (moved / "inner" / "i.md").write_text("i")
    shutil.rmtree(moved / "inner")
    (moved / "later").mkdir()
    assert tree.barrier() == []
    sub.mkdir()  # the path exists again: its events count again
    (sub / "back.md").write_text("b")
    sink.wait("dirty", sub)


def test_directory_deleted_and_renamed(tree: Tree, sink: Sink) -> None:
    old = tree.docs / "old"
    old.mkdir()
    (old / "o.md").write_text("o")
    tree.barrier()
    old.rename(tree.docs / "renamed")
    sink.wait("gone", old)
    sink.wait("dirty", tree.docs / "renamed")
    tree.barrier()
    shutil.rmtree(tree.docs / "renamed")
    sink.wait("gone", tree.docs / "renamed")
    sink.wait("dirty", tree.docs)


def test_rag_folder_is_ignored_but_mushrooms_are_reported(tree: Tree, sink: Sink) -> None:
    rag = tree.docs / ".rag"
    (rag / "tmp").mkdir(parents=True)
    (rag / "a.md.ragjson").write_text("{}")
    (rag / "tmp" / "x.tmp").write_text("{}")
    (rag / "a.md.ragjson").rename(rag / "a.md.ragjson.deleted")
    assert tree.barrier() == []
    (rag / "tmp" / "m.tmp").write_text('{"file": "a.md", "status": "upsert"}\n')
    (rag / "tmp" / "m.tmp").rename(rag / "20260101T000000Z.mushroom")  # atomic write of a producer
    sink.wait("mushroom", tree.docs, rag / "20260101T000000Z.mushroom")
    (rag / "20260102T000000Z.mushroom").write_text("{}\n")  # a direct write: reported once closed
    sink.wait("mushroom", tree.docs, rag / "20260102T000000Z.mushroom")
    assert {e.kind for e in sink.about(tree.docs)} == {"mushroom"}, sink.events


def test_notes_in_a_folder_that_arrives_whole_are_reported(tree: Tree, sink: Sink) -> None:
    """A folder moved in (or created and filled before its watch was added) brings a `.rag/` whose notes had no
    events of their own: they are reported as the folder arrives."""
    pkg = tree.outside / "pkg"
    (pkg / ".rag").mkdir(parents=True)
    note = pkg / ".rag" / "20260101T000000.000000Z-1-0.mushroom"
    note.write_text('{"file": "a.md", "status": "upsert"}\n')
    pkg.rename(tree.docs / "pkg")
    sink.wait("mushroom", tree.docs / "pkg", tree.docs / "pkg" / ".rag" / note.name)


def test_reading_and_ignored_directories_produce_nothing(tree: Tree, sink: Sink) -> None:
    tree.barrier()
    (tree.docs / "a.md").read_text()
    os.stat(tree.docs / "a.md")
    os.listdir(tree.docs)
    for d in ("node_modules", ".git", ".hidden"):
        (tree.docs / d / "x").mkdir(parents=True)
        (tree.docs / d / "x" / "f.md").write_text("f")
    assert tree.barrier() == []


def test_polling_mode_reports_changes(tmp_path: Path, watcher: Watcher, sink: Sink) -> None:
    root = tmp_path / "nfs"
    (root / "d").mkdir(parents=True)
    assert watcher.add_root(root, poll=True, poll_interval=0.05) == "polling"
    assert watcher.mode(root) == "polling"
    (root / "d" / "f.md").write_text("f")
    sink.wait("dirty", root / "d")
    (root / "d" / ".rag").mkdir()
    (root / "d" / ".rag" / "n.mushroom").write_text("{}\n")
    sink.wait("mushroom", root / "d", root / "d" / ".rag" / "n.mushroom")


def test_remove_root_stops_events(tmp_path: Path, tree: Tree, watcher: Watcher, sink: Sink) -> None:
    other = tmp_path / "other"
    other.mkdir()
    watcher.add_root(other)
    watcher.remove_root(tree.root)
    assert watcher.mode(tree.root) == "none"
    (tree.docs / "after.md").write_text("a")
    (other / "o.md").write_text("o")
    sink.wait("dirty", other)
    assert sink.about(tree.root) == []


def test_queue_overflow_log_record_rescans_inotify_roots(
    tmp_path: Path, tree: Tree, watcher: Watcher, sink: Sink
) -> None:
    polled = tmp_path / "polled"
    polled.mkdir()
    watcher.add_root(polled, poll=True, poll_interval=60)
    # A real overflow needs root to shrink /proc/sys/fs/inotify/max_queued_events; this is the record watchdog 7.x
    # logs when the kernel reports IN_Q_OVERFLOW.
    logging.getLogger(WATCHDOG_INOTIFY_LOGGER).warning(f"{OVERFLOW_MESSAGE}; filesystem events were lost")
    sink.wait(
        "rescan", tree.root
    )  # (on the watcher's own thread: watchdog's reader may hold locks of its own)
    assert not sink.got("rescan", polled)
    watcher.stop()
    assert not any(
        type(h).__name__ == "_OverflowHandler" for h in logging.getLogger(WATCHDOG_INOTIFY_LOGGER).handlers
    )


def test_probe_and_watched_inodes(tmp_path: Path, tree: Tree) -> None:
    assert inotify_watch_available(tmp_path) is True
    with pytest.raises(OSError):
        inotify_watch_available(tmp_path / "missing")
    watched = watched_inodes()
    assert watched is not None and tree.root.stat().st_ino in watched and tree.docs.stat().st_ino in watched
    assert tree.watcher.check_coverage() == []


TOP = str(Path(__file__).resolve().parents[3])  # the project's top directory
LIMIT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    try:
        Path("/proc/sys/user/max_inotify_watches").write_text("3")  # this user namespace only
    except OSError:
        sys.exit(77)
    from ragd.config import IgnoreConfig
    from ragd.pipeline.scan import Ignore
    from ragd.resident.inotify import inotify_watch_available
    from ragd.resident.watcher import Watcher
    sys.path.insert(0, sys.argv[3])  # TOP, for tests.support
    from tests.support.poll import poll

    root, second = Path(sys.argv[1]), Path(sys.argv[2])
    events = []
    w = Watcher(Ignore(IgnoreConfig()), events.append)
    out = {"first": w.add_root(root)}  # 1 watch, and the probe fits in the limit
    for i in range(4):  # watchdog gets watches for two of them and silently misses the rest
        (root / f"d{i}").mkdir()
    poll(lambda: any(e.directory == root / "d3" for e in events), timeout=5, what="the event for d3")
    out["probe"] = inotify_watch_available(root)
    out["second"] = w.add_root(second)  # its own watch does not fit: polled from the start
    out["lost"] = [str(p) for p in w.check_coverage()]
    out["mode"] = w.mode(root)
    out["rescan"] = any(e.kind == "rescan" and e.directory == root for e in events)
    out["after"] = inotify_watch_available(root)  # the switch freed the root's watches
    w.stop()
    print(json.dumps(out))
    """
)


def test_watch_limit_switches_root_to_polling(tmp_path: Path) -> None:
    """Real watch limit, lowered in a private user namespace (per-namespace inotify limits, Linux >= 5.11)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare(1) not available")
    probe = subprocess.run([unshare, "--user", "--map-root-user", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0 or not Path("/proc/sys/user/max_inotify_watches").exists():
        pytest.skip("unprivileged user namespaces not available")
    root, second = tmp_path / "root", tmp_path / "second"
    root.mkdir()
    second.mkdir()
    proc = subprocess.run(
        [
            unshare,
            "--user",
            "--map-root-user",
            sys.executable,
            "-c",
            LIMIT_SCRIPT,
            str(root),
            str(second),
            TOP,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode == 77:
        pytest.skip("the inotify watch limit cannot be lowered in a user namespace here")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["first"] == "inotify"
    assert out["probe"] is False
    assert out["second"] == "polling"
    assert out["lost"] == [str(root)]
    assert out["mode"] == "polling"
    assert out["rescan"] is True
    assert out["after"] is True
    assert "max_user_watches" in proc.stderr


def test_a_directory_whose_name_is_not_utf8_tells_its_parent(tree: Tree, sink: Sink) -> None:
    """Such a directory is never tracked, but its parent's job reports it SKIPPED, so the parent is told when it
    arrives and when it leaves (a dot-directory, ignored by the rules, says nothing)."""
    odd = Path(os.fsdecode(os.fsencode(tree.docs) + b"/d\xff"))
    odd.mkdir()
    sink.wait("dirty", tree.docs)
    assert not any(e.directory == odd for e in tree.barrier())
    odd.rmdir()
    sink.wait("dirty", tree.docs)
    tree.barrier()
    (tree.docs / ".hidden").mkdir()
    assert tree.barrier() == []


def test_folder_defaults_changes_are_reported_for_the_subtree(tree: Tree, sink: Sink) -> None:
    """`.ragd-meta.toml` is a dot-file, ignored like the others, except that its changes label the folder's files
    and those below: written, saved by an editor (a temp file renamed over it), and deleted."""
    meta = tree.docs / ".ragd-meta.toml"
    meta.write_text('product = "X"\n')
    sink.wait("subtree", tree.docs)
    assert {e.kind for e in tree.barrier()} == {"subtree"}
    (tree.docs / ".ragd-meta.toml.swp").write_text('product = "Y"\n')
    assert tree.barrier() == []
    (tree.docs / ".ragd-meta.toml.swp").rename(meta)
    sink.wait("subtree", tree.docs)
    tree.barrier()
    meta.unlink()
    sink.wait("subtree", tree.docs)
    tree.barrier()
    hidden = tree.root / ".hidden"
    hidden.mkdir()
    (hidden / ".ragd-meta.toml").write_text("x = 1\n")  # in an ignored folder: nothing
    assert all(e.kind != "subtree" for e in tree.barrier())


def test_a_chmod_of_a_folder_makes_it_dirty(tree: Tree, sink: Sink) -> None:
    """A folder closed to the agent, or opened again: its job says what that means for its files. Its `.rag/`
    changing mode (the agent narrows it) is nothing."""
    tree.barrier()
    tree.docs.chmod(0o700)
    sink.wait("dirty", tree.docs)
    tree.barrier()
    (tree.docs / ".rag").mkdir()
    tree.barrier()
    (tree.docs / ".rag").chmod(0o700)
    assert tree.barrier() == []


def test_inotify_watching_whose_reader_thread_died_is_started_anew_and_rescanned(
    tree: Tree, watcher: Watcher, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert watcher.check_alive() == []
    reader = watcher._inotify._inotify_fd  # type: ignore[union-attr]  # watchdog's thread that reads inotify

    def die(event: object) -> None:
        raise KeyError("as watchdog 7.1's _remove_watch_internally raised")

    monkeypatch.setattr(reader, "handle_event", die)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # pytest's own hook would fail the test
    (tree.docs / "lost.md").write_text("seen by the dying thread only\n")
    poll(lambda: not reader.is_alive(), timeout=5, what="watchdog's reader thread to end")
    sink.clear()
    (tree.docs / "unseen.md").write_text("no thread reads this event\n")
    assert watcher.check_alive() == [tree.root]
    assert sink.got("rescan", tree.root) and watcher.mode(tree.root) == "inotify" and watcher.restarts == 1
    (tree.docs / "after.md").write_text("watched again\n")
    sink.wait("dirty", tree.docs)
    assert watcher.check_alive() == []


def test_inotify_watching_that_keeps_dying_leaves_its_roots_polled(
    tree: Tree, watcher: Watcher, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    for n in range(3):
        reader = watcher._inotify._inotify_fd  # type: ignore[union-attr]
        monkeypatch.setattr(reader, "handle_event", lambda event: 1 / 0)
        (tree.docs / f"kill{n}.md").write_text("x\n")
        poll(lambda r=reader: not r.is_alive(), timeout=5, what="watchdog's reader thread to end")
        assert watcher.check_alive() == [tree.root]
    assert watcher.mode(tree.root) == "polling" and "died 3 times" in watcher.fallbacks[tree.root]


def test_a_root_is_added_while_a_reaction_waits_for_the_lock_its_adder_holds(
    tmp_path: Path, tree: Tree
) -> None:
    """Found by the model-based test (CI seed 2090441473): `ragctl roots add` was never answered again. The agent
    added the root under its own lock, and watchdog's `schedule` waited for the observer's lock, which watchdog's
    dispatcher held while the agent's reaction to a folder gone waited for the agent's lock. The reactions now run
    on the watcher's own thread: adding a root never waits for one."""
    agents_lock = threading.Lock()
    reacting = threading.Event()

    def sink(ev: WatchEvent) -> None:
        if ev.kind == "gone":
            reacting.set()
            with agents_lock:  # as the agent's reaction to a folder gone takes the agent's lock
                pass

    w = Watcher(Ignore(IgnoreConfig()), sink)
    other = tmp_path / "other"
    other.mkdir()
    added: list[str] = []
    try:
        assert w.add_root(tree.root) == "inotify"
        with agents_lock:  # as `set_roots` holds it while it adds a root
            shutil.rmtree(tree.docs)
            assert reacting.wait(5), "the reaction to the folder gone"
            adder = threading.Thread(target=lambda: added.append(w.add_root(other)), daemon=True)
            adder.start()
            adder.join(5)
            assert added == ["inotify"], "adding a root waited for a reaction that waits for its adder"
        poll(lambda: not w.pending(), what="the reaction to finish")
    finally:
        w.stop()
