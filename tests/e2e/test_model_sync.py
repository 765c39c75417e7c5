"""Model-based randomized test of the live agent (DESIGN §9): hypothesis drives a real `ragd run` through random
sequences of tree changes, root changes, restarts, rebuilds, outside change notes and API failures, and after each
quiet point compares the agent with a pure model of the tree (tests/support/model_sync.py):

(a) the indexed sources are the model's EMBEDDED files under the current roots, and the EMBEDDED sidecars under
    those roots; each indexed source's chunks are its sidecar's chunks, and their words the file's current words;
(b) a token unique to a file finds that file, and only it, in keyword search; a token of text that is gone, or of
    a file no root covers, finds nothing;
(c) `ragctl status` lists the model's roots, each with the model's EMBEDDED/SKIPPED/FAILED counts and failures;
(d) no `*.tmp` debris in `.rag/tmp`, no change note left pending, no orphans, no traceback in the agent's log, and
    no repair logged by the agent's own verification (a repair means the sync path missed a change).

Profiles (environment): RAGD_MODEL_PROFILE=ci (default: a few short runs) or soak (long runs, see
bench/soak_sync.py); RAGD_MODEL_EXAMPLES and RAGD_MODEL_STEPS override the sizes; RAGD_MODEL_SEED replays a seed
(printed by every run); RAGD_MODEL_EXCLUDE=rule,rule leaves rules out of a soak (to look past a bug known and
being fixed); RAGD_MODEL_STATS=FILE writes the run's figures as JSON; RAGD_MODEL_KEEP=DIR keeps the agent's log
of every example that failed there (`example-N.log`: a divergence that does not replay can still be read). Run as root, the test starts the agent as a
throwaway user (so that `chmod 000` closes something to it); RAGD_MODEL_AS_USER=0 runs it as root, without the
chmod rules.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, note, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import StopTest
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ragd.config import APP
from ragd.pipeline import sidecar
from tests.e2e.agent import RAGCTL, AgentProcess, ragctl
from tests.e2e.conftest import write_api_config
from tests.support import model_sync as ms
from tests.support.fake_openai import FakeOpenAI
from tests.support.isolation import XDG_DIRS, isolation
from tests.support.rm import rm_r
from tests.support.users import User, can_make_users, python_for, throwaway_users, world_dir

PROFILE = os.environ.get("RAGD_MODEL_PROFILE", "ci")
SOAK = PROFILE == "soak"
EXAMPLES = int(os.environ.get("RAGD_MODEL_EXAMPLES") or (200 if SOAK else 6))
STEPS = int(os.environ.get("RAGD_MODEL_STEPS") or (60 if SOAK else 20))
# The short CI profile runs every rule (a rule can be left out of a soak with RAGD_MODEL_EXCLUDE, to look past a bug
# known and being fixed).
EXCLUDED = frozenset(filter(None, os.environ.get("RAGD_MODEL_EXCLUDE", "").split(",")))
VERBOSE = bool(os.environ.get("RAGD_MODEL_VERBOSE"))
SEED = os.environ.get("RAGD_MODEL_SEED")  # read now: the tests' isolated environment drops RAGD_* variables
STATS = os.environ.get("RAGD_MODEL_STATS")
STOP = os.environ.get("RAGD_MODEL_STOP")  # a file: once it exists, the run stops before its next example
KEEP = os.environ.get(
    "RAGD_MODEL_KEEP"
)  # a directory: the agent's log of each example that failed goes there
AS_USER = (
    os.environ.get("RAGD_MODEL_AS_USER", "1") != "0"
)  # 0: the agent runs as the test's user, no chmod rules
MAX_FILES, MAX_DEPTH = 40, 4
BULK_FILES = 2000 if SOAK else 150  # a folder of many files (`many_files`), at most once an example
BURST = 6  # files a git-style burst deletes, restores and renames within a second
WAIT_S = 120
DATA_PARTS = ("", "index", "history.sqlite3", "roots.json")  # "": the whole data directory
NAMES = (
    tuple(
        s + e
        for s in ms.FILE_STEMS
        for e in ms.FILE_EXTENSIONS
        if ms.is_utf8(s) or "non_utf8_names" not in EXCLUDED
    )
    + ms.IGNORED_NAMES
)
PLAIN_NAMES = ("a.md", "b.txt", "note.md")


class PoisonedOpenAI(FakeOpenAI):
    """The fake embeddings API, except that a text holding a poison word gets a zero or a NaN vector."""

    def vector(self, text: str, dim: int | None = None) -> np.ndarray:
        size = dim or self.dim
        if ms.POISON_WORDS[0] in text:
            return np.zeros(size, dtype=np.float32)
        if ms.POISON_WORDS[1] in text:
            return np.full(size, np.nan, dtype=np.float32)
        return super().vector(text, dim)


F = TypeVar("F", bound=Callable[..., Any])


def step(fn: F) -> F:
    """A rule: skipped if excluded, counted, and marks the run broken when it fails (teardown then skips its
    checks)."""

    @functools.wraps(fn)
    def wrapper(self: ModelSync, *args: Any, **kwargs: Any) -> Any:
        name = fn.__name__
        if name in EXCLUDED:
            return None
        ModelSync.stats["steps"] += 1
        self.changed = self.changed or name != "check"
        try:
            return fn(self, *args, **kwargs)
        except StopTest:  # hypothesis ran out of data for this example and drops it: no failure, no checks
            self.broken = self.dropped = True
            raise
        except BaseException as err:
            self.broken = True
            tell_failure(name, err)
            raise

    return wrapper  # type: ignore[return-value]


def tell_failure(what: str, err: BaseException) -> None:
    """Print why a step or the final checks failed, with RAGD_MODEL_VERBOSE=1: hypothesis reports a failure only once
    it has shrunk it, and a divergence that depends on timing may pass when replayed (then, after a long shrink, only
    its "flaky" verdict is reported, or nothing when the soak is stopped first)."""
    if VERBOSE and not isinstance(err, (StopTest, KeyboardInterrupt)):
        print(f"-- {what} failed: {type(err).__name__}: {str(err)[:6000]}", flush=True)


def say(message: str) -> None:
    """Note a step for the failing example's report (and print it at once with RAGD_MODEL_VERBOSE=1)."""
    note(message)
    if VERBOSE:
        print(message, flush=True)


class ModelSync(RuleBasedStateMachine):
    server: ClassVar[PoisonedOpenAI]
    workdir: ClassVar[Path]
    user: ClassVar[User | None] = (
        None  # the agent's (a throwaway user; None: the test's own, and no chmod rules)
    )
    python: ClassVar[str] = ""  # an interpreter that user may run
    stats: ClassVar[dict[str, int]] = {"examples": 0, "steps": 0, "checks": 0, "failures": 0, "dropped": 0}

    def __init__(self) -> None:
        super().__init__()
        if STOP and os.path.exists(STOP):
            # Between two examples, nothing half done: hypothesis lets a KeyboardInterrupt through at once (no
            # shrinking), and the test's figures are still written.
            raise KeyboardInterrupt(f"{STOP} exists: the soak stops before its next example")
        ModelSync.stats["examples"] += 1
        self.broken = False
        self.dropped = False  # by hypothesis, out of data
        self.changed = True  # something happened since the last check
        self.paused = False
        self.unseen_loss = False  # roots.json deleted while the agent ran, no `wait` since: it may not know
        self.checks = 0
        self.bulk = 0  # files of this example's `many_files` folder (not counted against MAX_FILES)
        self.home = Path(tempfile.mkdtemp(prefix="e", dir=self.workdir))
        self.saved_env = os.environ.copy()
        self._isolate()
        self.server.reset()
        self.content = ms.Content()
        self.tree = ms.Tree(self.home / "t")
        self.model = self.tree.model
        self.model.config_roots = ["A"]
        self.tree.mkdir("A/d")  # a folder with sidecars from the start: a move or rename carries them along
        for rel in ("A/a.md", "A/d/c.md", "B/b.md"):
            self.tree.write(rel, self.content.new())
        self._write_config()
        self.log_at = 0
        self.agent = self._start()

    # -- environment and agent ----------------------------------------------------------------------------------
    def _isolate(self) -> None:
        """The tests' isolation under this example's home (restored from `saved_env` at teardown)."""
        for key, value in isolation(self.home).items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value
        os.environ["RAGD_CONFIG"] = str(self.home / "ragd.toml")
        if self.user is not None:  # the agent's home and XDG folders are its user's
            for path in (self.home, *(Path(os.environ[var]) for var, _sub in XDG_DIRS)):
                os.chown(path, self.user.uid, self.user.gid)

    def _write_config(self) -> None:
        cfg = write_api_config(self.home / "ragd.toml", self.server)
        roots = json.dumps([self.tree.path(r) for r in self.model.config_roots], ensure_ascii=False)
        extra = "\n[watch]\nquiet = 0.05\nceiling = 0.5\n\n[splitter]\nchunk_size = 200\nchunk_overlap = 0\n"
        cfg.write_text(f"roots = {roots}\n" + cfg.read_text() + extra)

    def _start(self) -> AgentProcess:
        agent = AgentProcess(self.home / "agent.log", user=self.user, python=self.python)
        agent.wait_ready()
        self.paused = False
        return agent

    def _log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.agent.log().splitlines()[-lines:])

    def quiesce(self) -> None:
        """Resume if paused (a paused agent never gets idle), then `ragctl wait`."""
        if self.paused:
            ragctl("resume")
            self.paused = False
        done = ragctl("wait", "--timeout", str(WAIT_S), check=None, timeout=WAIT_S + 30)
        assert done.returncode == 0, f"the agent did not get idle: {done.stderr}\n{self._log_tail()}"
        self.unseen_loss = False  # a loss of the data directory keeps the agent busy until it is made again

    # -- drawing ------------------------------------------------------------------------------------------------
    @staticmethod
    def pick(data: st.DataObject, items: Any, label: str) -> Any:
        return data.draw(st.sampled_from(sorted(items)), label=label)

    def movable_dirs(self) -> list[str]:
        return sorted(d for d in self.model.dirs if not self.model.pinned(d))

    def link_targets(self) -> list[str]:
        """Files a symbolic link may point to: anywhere in the tree, but not ignored by their name or folder (whether
        such a target is "under a root" is a question this model leaves open)."""
        return sorted(
            f
            for f in self.model.files
            if any(ms.tracked_dir_under(ms.parent(f), t) for t in ms.TOPS)
            and not ms.ignored_file(ms.base_name(f))
            and not self.model.hidden(f)
        )

    def closable(self) -> list[str]:
        """What `chmod 000` may close: a file, or a folder that is not (and holds no) root; not a folder holding
        a symbolic link's target (whether such a link reads as outside every root or as unreadable is left open)."""
        if self.user is None:
            return []
        targets = set(self.model.links.values())
        dirs = [d for d in self.movable_dirs() if not any(ms.under(t, d) for t in targets)]
        return sorted(p for p in [*dirs, *self.model.files] if p not in self.model.closed_paths())

    def room(self) -> bool:
        return len(self.model.files) - self.bulk < MAX_FILES

    def free(self, rel: str) -> bool:
        """Nothing (no file, link or folder) has the name `rel` yet."""
        return not self.tree.exists(rel)

    def writable(self, rel: str) -> bool:
        """`rel` is free or a file (written in place), not a folder or a link."""
        return self.free(rel) or rel in self.model.files

    # -- files --------------------------------------------------------------------------------------------------
    @precondition(lambda self: self.room())
    @rule(data=st.data())
    @step
    def create_file(self, data: st.DataObject) -> None:
        rel = ms.join(
            self.pick(data, self.model.dirs, "dir"), data.draw(st.sampled_from(NAMES), label="name")
        )
        if self.writable(rel):
            say(f"create {rel!r}")
            self.tree.write(rel, self.content.new())

    @precondition(lambda self: self.room())
    @rule(data=st.data(), kind=st.sampled_from(ms.POISON_WORDS))
    @step
    def create_poisoned_file(self, data: st.DataObject, kind: str) -> None:
        """A file whose text the API answers with a zero or NaN vector: it must end FAILED, alone."""
        rel = ms.join(
            self.pick(data, self.model.dirs, "dir"), data.draw(st.sampled_from(PLAIN_NAMES), label="name")
        )
        if self.writable(rel):
            say(f"create {rel!r} with {kind}")
            self.tree.write(rel, self.content.new(poison=kind))

    @precondition(lambda self: self.model.files)
    @rule(data=st.data(), how=st.sampled_from(["edit", "append", "truncate", "same-size edit", "touch"]))
    @step
    def change_file(self, data: st.DataObject, how: str) -> None:
        """Change a file in place (it keeps its inode); `touch` changes only its modification time."""
        rel = self.pick(data, self.model.files, "file")
        say(f"{how} {rel!r}")
        old = self.model.files[rel]
        if how == "touch":
            self.tree.touch(rel)
            return
        new = {"edit": self.content.new, "append": lambda: self.content.appended(old),
               "same-size edit": lambda: self.content.same_size(old),
               "truncate": lambda: ms.FileState("", ())}[how]()  # fmt: skip
        self.tree.write(rel, new)

    @precondition(lambda self: self.model.paths())
    @rule(data=st.data())
    @step
    def delete_file(self, data: st.DataObject) -> None:
        """Remove a file, a hard link of one or a symbolic link."""
        rel = self.pick(data, self.model.paths(), "file")
        say(f"delete {rel!r}")
        self.tree.delete(rel)

    @precondition(lambda self: self.model.files)
    @rule(data=st.data(), style=st.sampled_from(["gedit", "tmp", "vim"]))
    @step
    def editor_save(self, data: st.DataObject, style: str) -> None:
        """Save as editors do: write a temporary file beside the target and rename it over (vim: move the
        original to a backup, write anew, drop the backup)."""
        rel = self.pick(data, self.model.files, "file")
        say(f"{style}-save {rel!r}")
        d, name, new = ms.parent(rel), ms.base_name(rel), self.content.new()
        if style == "vim":
            probe = ms.join(d, "4913")
            self.tree.write(probe, ms.FileState("", ()), new=True)
            self.tree.delete(probe)
            self.tree.rename(rel, rel + "~")
            self.tree.write(rel, new, new=True)
            self.tree.delete(rel + "~")
        else:
            temp = ms.join(d, ".goutputstream-X1Y2Z3" if style == "gedit" else name + ".part.tmp")
            self.tree.write(temp, new, new=True)
            self.tree.rename(temp, rel)

    @precondition(lambda self: self.model.paths())
    @rule(data=st.data())
    @step
    def rename_file(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.paths(), "file")
        dst = ms.join(ms.parent(rel), data.draw(st.sampled_from(NAMES), label="new name"))
        if dst != rel and dst not in self.model.dirs:
            say(f"rename {rel!r} -> {dst!r}")
            self.tree.rename(rel, dst)

    @precondition(lambda self: self.model.paths())
    @rule(data=st.data())
    @step
    def move_file(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.paths(), "file")
        dst = ms.join(self.pick(data, self.model.dirs, "to dir"), ms.base_name(rel))
        if dst != rel and dst not in self.model.dirs:
            say(f"move {rel!r} -> {dst!r}")
            self.tree.rename(rel, dst)

    # -- links, names that change kind, bursts, many files ---------------------------------------------------------
    @precondition(lambda self: self.room())
    @rule(data=st.data(), dangling=st.booleans())
    @step
    def symlink_file(self, data: st.DataObject, dangling: bool) -> None:
        """`ln -s` to a file in the same folder, another folder or root, outside every root; or to no file."""
        rel = ms.join(
            self.pick(data, self.model.dirs, "dir"), data.draw(st.sampled_from(PLAIN_NAMES), label="name")
        )
        targets = [] if dangling else self.link_targets()
        target = self.pick(data, targets, "target") if targets else ms.join("out", "gone.md")
        if self.free(rel) and target not in self.model.dirs:
            say(f"ln -s {target!r} {rel!r}")
            self.tree.symlink(rel, target)

    @precondition(lambda self: self.model.links)
    @rule(data=st.data())
    @step
    def retarget_link(self, data: st.DataObject) -> None:
        """`ln -sfn`: a link replaced by one to another file, at once (a new link renamed over it)."""
        rel = self.pick(data, self.model.links, "link")
        target = self.pick(data, [*self.link_targets(), ms.join("out", "gone.md")], "new target")
        temp = ms.join(ms.parent(rel), ".link.tmp")
        if target not in self.model.dirs and self.free(temp):
            say(f"ln -sfn {target!r} {rel!r}")
            self.tree.symlink(temp, target)
            self.tree.rename(temp, rel)

    @precondition(lambda self: self.model.files and self.room())
    @rule(data=st.data())
    @step
    def hardlink_file(self, data: st.DataObject) -> None:
        """`ln`: one more path of a file, in its folder, another folder or root, or outside every root."""
        src = self.pick(data, self.model.files, "file")
        dst = ms.join(
            self.pick(data, self.model.dirs, "dir"), data.draw(st.sampled_from(PLAIN_NAMES), label="name")
        )
        if self.free(dst):
            say(f"ln {src!r} {dst!r}")
            self.tree.hardlink(src, dst)

    @precondition(lambda self: self.movable_dirs() or self.model.paths())
    @rule(data=st.data(), to_file=st.booleans(), back=st.booleans())
    @step
    def replace_kind(self, data: st.DataObject, to_file: bool, back: bool) -> None:
        """A folder replaced by a file of its name, or a file (or link) by a folder; maybe back again at once."""
        if to_file and self.movable_dirs():
            rel = self.pick(data, self.movable_dirs(), "folder")
        elif self.model.paths():
            rel = self.pick(data, self.model.paths(), "file")
        else:
            return
        steps = [rel in self.model.dirs, rel not in self.model.dirs][: 2 if back else 1]
        say(f"{' then back '.join('folder -> file' if d else 'file -> folder' for d in steps)}: {rel!r}")
        for was_dir in steps:
            self.tree.replace_kind(rel, self.content.new() if was_dir else None)

    @precondition(lambda self: self.model.files)
    @rule(data=st.data())
    @step
    def git_burst(self, data: st.DataObject) -> None:
        """What `git checkout` of another branch and back does within a second: files deleted and written again
        (new inodes, the same text), one renamed away and back, one changed and changed back."""
        files = sorted(self.model.files)
        chosen = data.draw(
            st.lists(st.sampled_from(files), min_size=1, max_size=BURST, unique=True), label="files"
        )
        say(f"git-style burst over {chosen}")
        saved = {rel: self.model.files[rel] for rel in chosen}
        for rel in chosen:
            self.tree.delete(rel)
        for rel in chosen:
            self.tree.write(rel, saved[rel], new=True)
        first = chosen[0]
        away = ms.join(ms.parent(first), "moved-away.md")
        if self.free(away):
            self.tree.rename(first, away)
            self.tree.rename(away, first)
        self.tree.write(first, self.content.new())
        self.tree.write(first, saved[first])

    @precondition(lambda self: not self.bulk and self.model.tracked_dirs())
    @rule(data=st.data())
    @step
    def many_files(self, data: st.DataObject) -> None:
        """A folder of many small files (a mail export, a notes dump) appears at once."""
        rel = ms.join(self.pick(data, self.model.tracked_dirs(), "under"), "bulk")
        if not self.free(rel) or rel.count("/") >= MAX_DEPTH:
            return
        say(f"{BULK_FILES} files in {rel!r}")
        staging = ms.join("out", "bulk-staging")
        self.tree.mkdir(staging)
        for n in range(BULK_FILES):
            self.tree.write(ms.join(staging, f"m{n:05d}.txt"), self.content.new(), new=True)
        self.tree.move_dir(staging, rel)  # all at once, as an unpacked archive moved in
        self.bulk = BULK_FILES

    # -- permissions (the agent runs as an ordinary user) ----------------------------------------------------------
    @precondition(lambda self: self.closable())
    @rule(data=st.data())
    @step
    def chmod_close(self, data: st.DataObject) -> None:
        """`chmod 000` a file (all its hard links) or a folder: the agent cannot read it any more."""
        rel = self.pick(data, self.closable(), "path")
        say(f"chmod 000 {rel!r}")
        self.tree.chmod(rel, readable=False)

    @precondition(lambda self: self.model.closed_paths())
    @rule(data=st.data())
    @step
    def chmod_open(self, data: st.DataObject) -> None:
        """`chmod` a closed file or folder back to readable."""
        rel = self.pick(data, self.model.closed_paths(), "path")
        say(f"chmod back {rel!r}")
        self.tree.chmod(rel, readable=True)

    # -- folders ------------------------------------------------------------------------------------------------
    @rule(data=st.data())
    @step
    def make_dir(self, data: st.DataObject) -> None:
        where = [d for d in self.model.dirs if d.count("/") < MAX_DEPTH - 1]
        rel = ms.join(
            self.pick(data, where, "parent"), data.draw(st.sampled_from(ms.DIR_NAMES), label="name")
        )
        if not self.tree.exists(rel):
            say(f"mkdir {rel!r}")
            self.tree.mkdir(rel)

    @precondition(lambda self: self.movable_dirs())
    @rule(data=st.data())
    @step
    def delete_dir(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.movable_dirs(), "dir")
        say(f"rm -r {rel!r}")
        self.tree.rmtree(rel)

    @precondition(lambda self: self.movable_dirs())
    @rule(data=st.data(), rename=st.booleans())
    @step
    def move_dir(self, data: st.DataObject, rename: bool) -> None:
        """Rename a folder in place, or move it elsewhere: within a root, across roots, into or out of an ignored
        folder, out of every root or back in."""
        rel = self.pick(data, self.movable_dirs(), "dir")
        if rename:
            dst = ms.join(ms.parent(rel), data.draw(st.sampled_from(ms.DIR_NAMES), label="new name"))
        else:
            depth = max(d.count("/") for d in self.model.dirs if ms.under(d, rel)) - rel.count("/")
            where = [
                d for d in self.model.dirs if not ms.under(d, rel) and d.count("/") + depth < MAX_DEPTH - 1
            ]
            dst = ms.join(self.pick(data, where, "to"), ms.base_name(rel))
        if self.tree.exists(dst):
            return
        say(f"mv {rel!r} {dst!r}")
        self.tree.move_dir(rel, dst)

    # -- roots and the agent ------------------------------------------------------------------------------------
    @precondition(lambda self: self.model.root_candidates())
    @rule(data=st.data())
    @step
    def roots_add(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.root_candidates(), "root")
        say(f"ragctl roots add {rel!r}")
        if not ms.is_utf8(rel):  # a folder the agent cannot track: ragctl refuses it, and says why
            done = ragctl("roots", "add", self.tree.path(rel), check=2)
            assert "is not valid UTF-8" in done.stderr and "Traceback" not in done.stderr, done.stderr
            return
        ragctl("roots", "add", self.tree.path(rel))
        self.model.add_root(rel)
        self.tree.touch_under(rel)

    @precondition(lambda self: self.model.roots())
    @rule(data=st.data())
    @step
    def roots_remove(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.roots(), "root")
        say(f"ragctl roots remove {rel!r}")
        ragctl("roots", "remove", self.tree.path(rel))
        self.model.remove_root(rel)
        self.tree.touch_under(rel)

    def _change_config_roots(self, data: st.DataObject) -> None:
        """Maybe give the config file other roots (the agent sees them at a reload or a start)."""
        if data.draw(st.booleans(), label="change the config's roots"):
            dirs = sorted(d for d in self.model.dirs if any(ms.tracked_dir_under(d, t) for t in ms.ROOT_TOPS))
            self.model.config_roots = data.draw(st.lists(st.sampled_from(dirs), max_size=2, unique=True),
                                                label="config roots")  # fmt: skip
            self._write_config()
            self.tree.touch_under("")

    @rule(data=st.data())
    @step
    def reload(self, data: st.DataObject) -> None:
        """`ragctl reload`, with the config file's roots changed or not."""
        self._change_config_roots(data)
        say(f"ragctl reload (config roots {self.model.config_roots})")
        ragctl("reload")

    @rule()
    @step
    def pause(self) -> None:
        say("ragctl pause")
        ragctl("pause")
        self.paused = True

    @precondition(lambda self: self.paused)
    @rule()
    @step
    def resume(self) -> None:
        say("ragctl resume")
        ragctl("resume")
        self.paused = False

    @precondition(lambda self: self.paused)
    @rule()
    @step
    def wait_while_paused(self) -> None:
        """`ragctl wait` on a paused agent never hangs: it answers at once with an error that says it is paused when
        directories wait for `resume`, or idle once the jobs that began before the pause end (a big folder's runs
        for a while: soak row 73 waited past the 10 s this allowed, for a 2,000-file folder's job)."""
        say("ragctl wait (paused)")
        try:
            done = subprocess.run([*RAGCTL, "wait"], capture_output=True, text=True, timeout=WAIT_S,
                                  env=os.environ.copy())  # fmt: skip
        except subprocess.TimeoutExpired:
            raise AssertionError("`ragctl wait` hangs while the agent is paused") from None
        assert done.returncode == 0 or (done.returncode == 1 and "paused" in done.stderr), done

    @rule(data=st.data(), how=st.sampled_from(["SIGTERM", "SIGKILL"]))
    @step
    def restart(self, data: st.DataObject, how: str) -> None:
        """Stop the agent, maybe change the config file's roots while it is stopped, start it again."""
        if how == "SIGTERM":
            code = self.agent.stop()
            assert code == 0, f"ragd exited {code} on SIGTERM\n{self._log_tail()}"
        else:
            self.agent.kill()
            if self.unseen_loss and not (Path(os.environ["XDG_DATA_HOME"]) / APP / "roots.json").exists():
                # killed before it saw roots.json go (it writes it back a tick or two later): the roots added or
                # removed with ragctl went with its memory, as in a loss while it is stopped
                self.model.added, self.model.removed = [], []
        self.unseen_loss = False
        self._change_config_roots(data)
        say(f"restart with {how} (config roots {self.model.config_roots})")
        self.agent = self._start()

    @rule(data=st.data(), part=st.sampled_from(DATA_PARTS), running=st.booleans())
    @step
    def lose_data_dir(self, data: st.DataObject, part: str, running: bool) -> None:
        """The agent's data directory, or a part of it, deleted while the agent runs or while it is stopped: the
        agent rebuilds what is derived from the sidecars; the roots added with `ragctl roots add` survive a loss
        while it runs (it writes them back), not one while it is stopped, nor one it had not seen yet when it was
        killed (SIGKILL within a tick or two)."""
        home = Path(os.environ["XDG_DATA_HOME"]) / APP  # (not data_dir(): it makes the folder, as root)
        where = home / part if part else home
        say(f"rm -r {part or 'the data directory'} while {'running' if running else 'stopped'}")
        if not running:
            code = self.agent.stop()
            assert code == 0, f"ragd exited {code} on SIGTERM\n{self._log_tail()}"
        rm_r(where)  # the agent may be writing in it
        self.unseen_loss = self.unseen_loss or (running and part in ("", "roots.json"))
        if not running:
            if part in ("", "roots.json"):
                self.model.added, self.model.removed = [], []
            self.agent = self._start()
        self.tree.touch_under("")

    @rule()
    @step
    def rebuild(self) -> None:
        say("ragctl index --rebuild")
        ragctl("index", "--rebuild", "--json", timeout=WAIT_S)

    @precondition(lambda self: self.model.tracked_dirs())
    @rule(data=st.data(), style=st.sampled_from(["ragd", "ragjson"]))
    @step
    def outside_change_note(self, data: st.DataObject, style: str) -> None:
        """A `.mushroom` from another producer (the ragjson tool, say; it makes `.rag/` if need be): the sidecars
        stay the truth, so it changes nothing."""
        d = self.pick(data, self.model.tracked_dirs(), "dir")
        names = [ms.base_name(f) for f in self.model.files if ms.parent(f) == d] + ["ghost.md"]
        events = data.draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(["upsert", "delete"])),
                                    min_size=1, max_size=3), label="events")  # fmt: skip
        now = time.time()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        us = int(now * 1e6) % 1_000_000
        name = (
            f"{stamp}.{us:06d}Z-{os.getpid()}-{self.checks}.mushroom"
            if style == "ragd"
            else f"{stamp}Z.mushroom"
        )
        target = Path(self.tree.path(d)) / ".rag" / name
        target.parent.mkdir(exist_ok=True)
        if target.exists():
            return
        say(f"change note {name} in {d!r}: {events}")
        staging = self.home / "producer"
        staging.mkdir(exist_ok=True)
        lines = "".join(json.dumps({"file": f, "status": s}) + "\n" for f, s in events)
        (staging / name).write_text(lines, encoding="utf-8")
        os.rename(staging / name, target)

    @precondition(lambda self: self.model.tracked_dirs())
    @rule(data=st.data())
    @step
    def api_outage(self, data: st.DataObject) -> None:
        """The embeddings API fails while a file is written: it ends FAILED with the reason; once the API is back,
        `ragctl sync --force --wait` embeds it."""
        rel = ms.join(self.pick(data, self.model.tracked_dirs(), "dir"), "outage.md")
        if rel in self.model.dirs or rel in self.model.links:  # a folder or a link of that name (soak row 72)
            return
        say(f"API down; write {rel!r}; wait; API back; sync --force --wait")
        self.server.fail_next(100_000, status=503, message="upstream overloaded")
        self.tree.write(rel, self.content.new())
        self.quiesce()
        entry = sidecar.try_read(sidecar.entry_path(Path(self.tree.path(ms.parent(rel))), ms.base_name(rel)))
        state = None if entry is None else entry.status  # (status lists 50 failures: a big folder's are more)
        assert state == ms.FAILED, f"{rel!r} is {state} while the API is down, not FAILED"
        self.server.reset()
        done = ragctl("sync", "--force", "--wait", "--timeout", str(WAIT_S), check=None, timeout=WAIT_S + 30)
        assert done.returncode == 0, f"sync --force --wait: {done.stderr}\n{self._log_tail()}"

    @rule()
    @step
    def check(self) -> None:
        if self.changed:  # a check right after a check tells nothing new
            say("check")
            self.check_all()

    @invariant()
    def agent_alive(self) -> None:
        if self.agent.proc.poll() is not None:
            self.broken = True
            raise AssertionError(f"ragd exited {self.agent.proc.returncode}\n{self._log_tail()}")

    def teardown(self) -> None:
        if VERBOSE:
            print(f"-- end of example {ModelSync.stats['examples']}", flush=True)
        try:
            if not self.broken:
                self.broken = True  # until the last checks pass
                try:
                    self.check_all()
                    code = self.agent.stop()
                    assert code == 0, f"ragd exited {code} on SIGTERM\n{self._log_tail()}"
                except BaseException as err:
                    tell_failure("the example's last checks", err)
                    raise
                self.broken = False
        finally:
            self.agent.kill()
            os.environ.clear()
            os.environ.update(self.saved_env)
            if self.dropped:
                ModelSync.stats["dropped"] += 1
            elif self.broken:
                ModelSync.stats["failures"] += 1
                self._keep_log()
            shutil.rmtree(self.home, ignore_errors=True)

    def _keep_log(self) -> None:
        """The failed example's agent log, kept in KEEP before its home goes (hypothesis's replay of a divergence
        that depends on timing may pass: the log of the run that failed is then all there is)."""
        if not KEEP:
            return
        kept = Path(KEEP) / f"example-{ModelSync.stats['examples']}.log"
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.home / "agent.log", kept)
        except OSError as err:
            print(f"-- the agent's log could not be kept: {err}", flush=True)
        else:
            print(f"-- the agent's log of this failed example: {kept}", flush=True)

    # -- the invariants at a quiet point -------------------------------------------------------------------------
    def check_all(self) -> None:
        ModelSync.stats["checks"] += 1
        self.checks += 1
        self.quiesce()
        self.log_at = ms.Judge(self.tree, self.agent).check(self.checks, self.log_at)
        self.changed = False


def _settings() -> settings:
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        print_blob=True,
        phases=[Phase.generate, Phase.target, Phase.shrink, Phase.explain],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


@contextmanager
def _agent_user() -> Iterator[User | None]:
    """The agent's user: a throwaway one when the test runs as root (which reads every file, so that `chmod 000`
    would close nothing to it), else none (the test's own user; the chmod rules are left out)."""
    if not AS_USER or not can_make_users():
        yield None
        return
    with throwaway_users("model") as (made, _team):
        yield made["model"]


@pytest.fixture
def api() -> Iterator[PoisonedOpenAI]:
    with PoisonedOpenAI(dim=8) as server:
        yield server


@pytest.mark.slow
@pytest.mark.timeout(0 if SOAK else 1800)
def test_agent_follows_the_model(api: PoisonedOpenAI, tmp_path: Path) -> None:
    run_seed = int(SEED or random.randrange(2**32))
    print(f"model-sync: profile {PROFILE}, {EXAMPLES} examples x {STEPS} steps, seed {run_seed} "
          f"(replay: RAGD_MODEL_SEED={run_seed})")  # fmt: skip
    ModelSync.server = api
    ModelSync.stats.update(examples=0, steps=0, checks=0, failures=0, dropped=0)
    started = time.monotonic()
    try:
        with _agent_user() as user:
            ModelSync.workdir = world_dir("ragd-model-") if user is not None else tmp_path
            ModelSync.user = user
            ModelSync.python = (
                python_for(user, ModelSync.workdir / "py") if user is not None else sys.executable
            )
            umask = os.umask(0)  # the tree's folders writable by the agent's user (its `.rag/`)
            try:
                run_state_machine_as_test(seed(run_seed)(ModelSync), settings=_settings())
            finally:
                os.umask(umask)
                ModelSync.user = None
                if user is not None:
                    shutil.rmtree(ModelSync.workdir, ignore_errors=True)
    finally:
        figures = {**ModelSync.stats, "seed": run_seed, "seconds": round(time.monotonic() - started, 1)}
        print("model-sync figures:", json.dumps(figures))
        if STATS:
            Path(STATS).write_text(json.dumps(figures) + "\n")
