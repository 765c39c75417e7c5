"""Model-based randomized test of the live agent (DESIGN §9): hypothesis drives a real `ragd run` through random
sequences of tree changes, root changes, restarts, rebuilds, outside change notes and API failures, and after each
quiet point compares the agent with a pure model of the tree (tests/support/model_sync.py):

(a) the indexed sources are the model's EMBEDDED files under the current roots, and the EMBEDDED sidecars under
    those roots; each indexed source's chunks are its sidecar's chunks, and their words the file's current words;
(b) a token unique to a file finds that file, and only it, in keyword search; a token of text that is gone, or of
    a file no root covers, finds nothing;
(c) `ragctl status` lists the model's roots, each with the model's EMBEDDED/SKIPPED/FAILED counts and failures;
(d) no `*.tmp` debris in `.rag/tmp`, no change note left pending, no orphans, no traceback in the agent's log.

Profiles (environment): RAGD_MODEL_PROFILE=ci (default: a few short runs) or soak (long runs, see
bench/soak_sync.py); RAGD_MODEL_EXAMPLES and RAGD_MODEL_STEPS override the sizes; RAGD_MODEL_SEED replays a seed
(printed by every run); RAGD_MODEL_EXCLUDE=rule,rule leaves rules out of a soak (to look past a bug known and
being fixed); RAGD_MODEL_STATS=FILE writes the run's figures as JSON.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, note, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ragd import sidecar
from tests.e2e.agent import RAGCTL, AgentProcess, ragctl, ragctl_json
from tests.e2e.conftest import write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.model_sync import (
    DIR_NAMES,
    EMBEDDED,
    FILE_EXTENSIONS,
    FILE_STEMS,
    IGNORED_NAMES,
    POISON_WORDS,
    ROOT_TOPS,
    Content,
    FileState,
    Tree,
    base_name,
    is_utf8,
    join,
    parent,
    tracked_dir_under,
    under,
)

PROFILE = os.environ.get("RAGD_MODEL_PROFILE", "ci")
SOAK = PROFILE == "soak"
EXAMPLES = int(os.environ.get("RAGD_MODEL_EXAMPLES") or (200 if SOAK else 6))
STEPS = int(os.environ.get("RAGD_MODEL_STEPS") or (60 if SOAK else 20))
EXCLUDED = frozenset(filter(None, os.environ.get("RAGD_MODEL_EXCLUDE", "").split(",")))
VERBOSE = bool(os.environ.get("RAGD_MODEL_VERBOSE"))
MAX_FILES, MAX_DEPTH = 40, 4
WAIT_S, SEARCH_SAMPLE = 60, 5
NAMES = (
    tuple(
        s + e for s in FILE_STEMS for e in FILE_EXTENSIONS if is_utf8(s) or "non_utf8_names" not in EXCLUDED
    )
    + IGNORED_NAMES
)
PLAIN_NAMES = ("a.md", "b.txt", "note.md")


class PoisonedOpenAI(FakeOpenAI):
    """The fake embeddings API, except that a text holding a poison word gets a zero or a NaN vector."""

    def vector(self, text: str, dim: int | None = None) -> np.ndarray:
        size = dim or self.dim
        if POISON_WORDS[0] in text:
            return np.zeros(size, dtype=np.float32)
        if POISON_WORDS[1] in text:
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
        except BaseException:
            self.broken = True
            raise

    return wrapper  # type: ignore[return-value]


def say(message: str) -> None:
    """Note a step for the failing example's report (and print it at once with RAGD_MODEL_VERBOSE=1)."""
    note(message)
    if VERBOSE:
        print(message, flush=True)


def words(text: str) -> list[str]:
    return text.split()


class ModelSync(RuleBasedStateMachine):
    server: ClassVar[PoisonedOpenAI]
    workdir: ClassVar[Path]
    stats: ClassVar[dict[str, int]] = {"examples": 0, "steps": 0, "checks": 0, "failures": 0}

    def __init__(self) -> None:
        super().__init__()
        ModelSync.stats["examples"] += 1
        self.broken = False
        self.changed = True  # something happened since the last check
        self.paused = False
        self.checks = 0
        self.touched: set[str] = set()  # tokens whose file changed since the last check
        self.home = Path(tempfile.mkdtemp(prefix="e", dir=self.workdir))
        self.saved_env = os.environ.copy()
        self._isolate()
        self.server.reset()
        self.content = Content()
        self.tree = Tree(self.home / "t")
        self.model = self.tree.model
        self.model.config_roots = ["A"]
        for rel in ("A/a.md", "B/b.md"):
            self._write(rel, self.content.new())
        self._write_config()
        self.log_at = 0
        self.agent = self._start()

    # -- environment and agent ----------------------------------------------------------------------------------
    def _isolate(self) -> None:
        for key in list(os.environ):
            if key.startswith("RAGD_") and not key.startswith("RAGD_MODEL_"):
                del os.environ[key]
        os.environ["HOME"] = str(self.home)
        for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"),
                         ("XDG_STATE_HOME", "state"), ("XDG_RUNTIME_DIR", "run")):  # fmt: skip
            (self.home / sub).mkdir(mode=0o700)
            os.environ[var] = str(self.home / sub)
        os.environ["RAGD_CONFIG"] = str(self.home / "ragd.toml")

    def _write_config(self) -> None:
        cfg = write_api_config(self.home / "ragd.toml", self.server)
        roots = json.dumps([self.tree.path(r) for r in self.model.config_roots], ensure_ascii=False)
        extra = "\n[watch]\nquiet = 0.05\nceiling = 0.5\n\n[splitter]\nchunk_size = 200\nchunk_overlap = 0\n"
        cfg.write_text(f"roots = {roots}\n" + cfg.read_text() + extra)

    def _start(self) -> AgentProcess:
        agent = AgentProcess(self.home / "agent.log")
        agent.wait_ready()
        self.paused = False
        return agent

    def _log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.agent.log().splitlines()[-lines:])

    def abs(self, rel: str) -> str:
        return self.tree.path(rel)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.tree.top)

    def quiesce(self) -> None:
        """Resume if paused (a paused agent never gets idle), then `ragctl wait`."""
        if self.paused:
            ragctl("resume")
            self.paused = False
        done = ragctl("wait", "--timeout", str(WAIT_S), check=None, timeout=WAIT_S + 30)
        assert done.returncode == 0, f"the agent did not get idle: {done.stderr}\n{self._log_tail()}"

    # -- drawing ------------------------------------------------------------------------------------------------
    @staticmethod
    def pick(data: st.DataObject, items: Any, label: str) -> Any:
        return data.draw(st.sampled_from(sorted(items)), label=label)

    def _write(self, rel: str, state: FileState) -> None:
        old = self.model.files.get(rel)
        self.touched.update((old.tokens if old else ()) + state.tokens)
        self.tree.write(rel, state)

    def _touch(self, rel: str) -> None:
        self.touched.update(self.model.files[rel].tokens)

    def movable_dirs(self) -> list[str]:
        return sorted(d for d in self.model.dirs if not self.model.pinned(d))

    # -- files --------------------------------------------------------------------------------------------------
    @precondition(lambda self: len(self.model.files) < MAX_FILES)
    @rule(data=st.data())
    @step
    def create_file(self, data: st.DataObject) -> None:
        rel = join(self.pick(data, self.model.dirs, "dir"), data.draw(st.sampled_from(NAMES), label="name"))
        say(f"create {rel!r}")
        self._write(rel, self.content.new())

    @precondition(lambda self: len(self.model.files) < MAX_FILES)
    @rule(data=st.data(), kind=st.sampled_from(POISON_WORDS))
    @step
    def create_poisoned_file(self, data: st.DataObject, kind: str) -> None:
        """A file whose text the API answers with a zero or NaN vector: it must end FAILED, alone."""
        rel = join(
            self.pick(data, self.model.dirs, "dir"), data.draw(st.sampled_from(PLAIN_NAMES), label="name")
        )
        say(f"create {rel!r} with {kind}")
        self._write(rel, self.content.new(poison=kind))

    @precondition(lambda self: self.model.files)
    @rule(data=st.data(), how=st.sampled_from(["edit", "append", "truncate"]))
    @step
    def change_file(self, data: st.DataObject, how: str) -> None:
        rel = self.pick(data, self.model.files, "file")
        say(f"{how} {rel!r}")
        old = self.model.files[rel]
        new = {"edit": self.content.new, "append": lambda: self.content.appended(old),
               "truncate": lambda: FileState("", ())}[how]()  # fmt: skip
        self._write(rel, new)

    @precondition(lambda self: self.model.files)
    @rule(data=st.data())
    @step
    def delete_file(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.files, "file")
        say(f"delete {rel!r}")
        self._touch(rel)
        self.tree.delete(rel)

    @precondition(lambda self: self.model.files)
    @rule(data=st.data(), style=st.sampled_from(["gedit", "tmp", "vim"]))
    @step
    def editor_save(self, data: st.DataObject, style: str) -> None:
        """Save as editors do: write a temporary file beside the target and rename it over (vim: move the
        original to a backup, write anew, drop the backup)."""
        rel = self.pick(data, self.model.files, "file")
        say(f"{style}-save {rel!r}")
        d, name, new = parent(rel), base_name(rel), self.content.new()
        self._touch(rel)
        self.touched.update(new.tokens)
        if style == "vim":
            probe = join(d, "4913")
            self.tree.write_new(probe, FileState("", ()))
            self.tree.delete(probe)
            self.tree.rename(rel, rel + "~")
            self.tree.write_new(rel, new)
            self.tree.delete(rel + "~")
        else:
            temp = join(d, ".goutputstream-X1Y2Z3" if style == "gedit" else name + ".part.tmp")
            self.tree.write_new(temp, new)
            self.tree.rename(temp, rel)

    @precondition(lambda self: self.model.files)
    @rule(data=st.data())
    @step
    def rename_file(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.files, "file")
        dst = join(parent(rel), data.draw(st.sampled_from(NAMES), label="new name"))
        if dst != rel:
            say(f"rename {rel!r} -> {dst!r}")
            self._touch(rel)
            if dst in self.model.files:
                self._touch(dst)
            self.tree.rename(rel, dst)

    @precondition(lambda self: self.model.files)
    @rule(data=st.data())
    @step
    def move_file(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.files, "file")
        dst = join(self.pick(data, self.model.dirs, "to dir"), base_name(rel))
        if dst != rel:
            say(f"move {rel!r} -> {dst!r}")
            self._touch(rel)
            if dst in self.model.files:
                self._touch(dst)
            self.tree.rename(rel, dst)

    # -- folders ------------------------------------------------------------------------------------------------
    @rule(data=st.data())
    @step
    def make_dir(self, data: st.DataObject) -> None:
        where = [d for d in self.model.dirs if d.count("/") < MAX_DEPTH - 1]
        rel = join(self.pick(data, where, "parent"), data.draw(st.sampled_from(DIR_NAMES), label="name"))
        if not self.tree.exists(rel):
            say(f"mkdir {rel!r}")
            self.tree.mkdir(rel)

    @precondition(lambda self: self.movable_dirs())
    @rule(data=st.data())
    @step
    def delete_dir(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.movable_dirs(), "dir")
        say(f"rm -r {rel!r}")
        for f in [f for f in self.model.files if under(f, rel)]:
            self._touch(f)
        self.tree.rmtree(rel)

    @precondition(lambda self: self.movable_dirs())
    @rule(data=st.data(), rename=st.booleans())
    @step
    def move_dir(self, data: st.DataObject, rename: bool) -> None:
        """Rename a folder in place, or move it elsewhere: within a root, across roots, into or out of an ignored
        folder, out of every root or back in."""
        rel = self.pick(data, self.movable_dirs(), "dir")
        if rename:
            dst = join(parent(rel), data.draw(st.sampled_from(DIR_NAMES), label="new name"))
        else:
            depth = max(d.count("/") for d in self.model.dirs if under(d, rel)) - rel.count("/")
            where = [d for d in self.model.dirs if not under(d, rel) and d.count("/") + depth < MAX_DEPTH - 1]
            dst = join(self.pick(data, where, "to"), base_name(rel))
        if self.tree.exists(dst):
            return
        say(f"mv {rel!r} {dst!r}")
        for f in [f for f in self.model.files if under(f, rel)]:
            self._touch(f)
        self.tree.move_dir(rel, dst)

    # -- roots and the agent ------------------------------------------------------------------------------------
    @precondition(lambda self: self.model.root_candidates())
    @rule(data=st.data())
    @step
    def roots_add(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.root_candidates(), "root")
        say(f"ragctl roots add {rel!r}")
        ragctl("roots", "add", self.abs(rel))
        self.model.add_root(rel)
        self.touched.update(t for f, s in self.model.files.items() if under(f, rel) for t in s.tokens)

    @precondition(lambda self: self.model.roots())
    @rule(data=st.data())
    @step
    def roots_remove(self, data: st.DataObject) -> None:
        rel = self.pick(data, self.model.roots(), "root")
        say(f"ragctl roots remove {rel!r}")
        ragctl("roots", "remove", self.abs(rel))
        self.model.remove_root(rel)
        self.touched.update(t for f, s in self.model.files.items() if under(f, rel) for t in s.tokens)

    @rule(data=st.data())
    @step
    def reload(self, data: st.DataObject) -> None:
        """`ragctl reload`, with the config file's roots changed or not."""
        if data.draw(st.booleans(), label="change the config's roots"):
            dirs = sorted(d for d in self.model.dirs if any(tracked_dir_under(d, t) for t in ROOT_TOPS))
            self.model.config_roots = data.draw(st.lists(st.sampled_from(dirs), max_size=2, unique=True),
                                                label="config roots")  # fmt: skip
            self._write_config()
            self.touched.update(t for s in self.model.files.values() for t in s.tokens)
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
        """`ragctl wait` on a paused agent answers at once: idle, or an error that says it is paused."""
        say("ragctl wait (paused)")
        try:
            done = subprocess.run([*RAGCTL, "wait"], capture_output=True, text=True, timeout=10,
                                  env=os.environ.copy())  # fmt: skip
        except subprocess.TimeoutExpired:
            raise AssertionError("`ragctl wait` hangs while the agent is paused") from None
        assert done.returncode == 0 or (done.returncode == 1 and "paused" in done.stderr), done

    @rule(how=st.sampled_from(["SIGTERM", "SIGKILL"]))
    @step
    def restart(self, how: str) -> None:
        say(f"restart with {how}")
        if how == "SIGTERM":
            code = self.agent.stop()
            assert code == 0, f"ragd exited {code} on SIGTERM\n{self._log_tail()}"
        else:
            self.agent.kill()
        self.agent = self._start()

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
        names = [base_name(f) for f in self.model.files if parent(f) == d] + ["ghost.md"]
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
        target = Path(self.abs(d)) / ".rag" / name
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
        rel = join(self.pick(data, self.model.tracked_dirs(), "dir"), "outage.md")
        say(f"API down; write {rel!r}; wait; API back; sync --force --wait")
        self.server.fail_next(100_000, status=503, message="upstream overloaded")
        self._write(rel, self.content.new())
        self.quiesce()
        st_roots = ragctl_json("status")["roots"]
        failed = {f["path"] for r in st_roots for f in r["failures"]}
        assert self.abs(rel) in failed, f"{rel!r} is not FAILED while the API is down: {st_roots}"
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
                self.check_all()
                code = self.agent.stop()
                assert code == 0, f"ragd exited {code} on SIGTERM\n{self._log_tail()}"
                self.broken = False
        finally:
            self.agent.kill()
            os.environ.clear()
            os.environ.update(self.saved_env)
            if self.broken:
                ModelSync.stats["failures"] += 1
            shutil.rmtree(self.home, ignore_errors=True)

    # -- the invariants at a quiet point -------------------------------------------------------------------------
    def check_all(self) -> None:
        ModelSync.stats["checks"] += 1
        self.checks += 1
        self.quiesce()
        self.tree.self_check()
        model = self.model
        status = ragctl_json("status")
        listed = {self.rel(r["path"]) for r in status["roots"]}
        assert listed == set(model.roots()), f"roots listed {sorted(listed)}, want {sorted(model.roots())}"
        sources = {self.rel(p) for p in self.agent.call("index", {"sources": True})["sources"]}
        want = model.indexed()
        assert sources == want, f"index: extra {sorted(sources - want)}, missing {sorted(want - sources)}"
        embedded = self.embedded_sidecars()
        assert set(embedded) == sources, f"EMBEDDED sidecars {sorted(embedded)} vs index {sorted(sources)}"
        for rel in sorted(sources):
            chunks = self.index_chunks(self.abs(rel))
            assert chunks == embedded[rel], f"{rel!r}: index chunks {chunks} != sidecar {embedded[rel]}"
            text = model.files[rel].content
            assert words(" ".join(chunks)) == words(text), f"{rel!r}: chunks {chunks} != file {text!r}"
        self.check_status(status)
        self.check_search()
        self.check_debris()
        assert ragctl_json("orphans") == {"orphans": [], "removed": 0}
        log = self.agent.log()
        assert "Traceback" not in log[self.log_at :], f"traceback in the agent's log:\n{log[self.log_at :]}"
        self.log_at = len(log)
        self.touched.clear()
        self.changed = False

    def check_status(self, status: dict[str, Any]) -> None:
        for entry in status["roots"]:
            root = self.rel(entry["path"])
            counts = {k: v for k, v in entry["files"].items() if v}
            want = {k: v for k, v in self.model.counts(root).items() if v}
            assert counts == want, f"status of root {root!r}: {entry['files']}, want {want}"
            failures = {self.rel(f["path"]) for f in entry["failures"]}
            assert failures == self.model.failed(root), f"failures of {root!r}: {entry['failures']}"
            assert not entry.get("dir_errors"), f"directory errors under {root!r}: {entry['dir_errors']}"
        index = status["index"]
        assert index["pending_mushrooms"] == 0 and not index["failed_mushrooms"], f"index: {index}"

    def check_search(self) -> None:
        indexed = sorted(self.model.indexed())
        rng = random.Random(self.checks)
        tokens = set(self.touched)
        for rel in rng.sample(indexed, min(SEARCH_SAMPLE, len(indexed))):
            tokens.add(rng.choice(self.model.files[rel].tokens))
        for token in sorted(tokens):
            owner = self.model.owner(token)
            hits = ragctl_json("search", token, "--mode", "keyword", "-k", "10")["results"]
            found = [self.rel(h["path"]) for h in hits]
            if owner is not None and owner in indexed:
                assert found and set(found) == {owner}, f"search {token} (in {owner!r}) found {found}"
            else:
                assert not found, f"search {token} (in {owner!r}, not indexed) found {found}"

    def check_debris(self) -> None:
        for d in sorted(self.model.tracked_dirs()):
            rag = Path(self.abs(d)) / ".rag"
            notes = sorted(p.name for p in rag.glob("*.mushroom"))
            assert not notes, f"change notes left in {d!r}/.rag: {notes}"
            debris = sorted(p.name for p in (rag / "tmp").glob("*.tmp"))
            assert not debris, f"debris left in {d!r}/.rag/tmp: {debris}"

    def embedded_sidecars(self) -> dict[str, list[str]]:
        """Chunk texts of every EMBEDDED sidecar (whose source exists) in the folders under the current roots."""
        out = {}
        for d in self.model.tracked_dirs():
            for en in sidecar.list_entries(Path(self.abs(d))):
                rel = join(d, en.name)
                entry = None if en.deleted else sidecar.try_read(en.path)
                if entry is not None and entry.status == EMBEDDED and rel in self.model.files:
                    out[rel] = [c.content for c in entry.chunks]
        return out

    def index_chunks(self, path: str) -> list[str]:
        """Every chunk of `path` in the index, through the MCP tool read_chunk (at most 41 a call)."""
        chunks: list[str] = []
        count = 1
        while len(chunks) < count:
            center = len(chunks) + 20 if chunks else 0
            args = {"path": path, "chunk_index": min(center, count - 1), "neighbors": 20}
            res = self.agent.call("mcp_call", {"name": "read_chunk", "arguments": args})
            assert not res.get("isError"), f"read_chunk {path}: {res}"
            got = res["structuredContent"]
            count = got["chunk_count"]
            chunks += [c["content"] for c in got["chunks"] if c["chunk_index"] >= len(chunks)]
        return chunks


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


@pytest.fixture
def api() -> Iterator[PoisonedOpenAI]:
    with PoisonedOpenAI(dim=8) as server:
        yield server


@pytest.mark.slow
@pytest.mark.timeout(0 if SOAK else 1800)
def test_agent_follows_the_model(api: PoisonedOpenAI, tmp_path: Path) -> None:
    run_seed = int(os.environ.get("RAGD_MODEL_SEED") or random.randrange(2**32))
    print(f"model-sync: profile {PROFILE}, {EXAMPLES} examples x {STEPS} steps, seed {run_seed} "
          f"(replay: RAGD_MODEL_SEED={run_seed})")  # fmt: skip
    ModelSync.server, ModelSync.workdir = api, tmp_path
    ModelSync.stats.update(examples=0, steps=0, checks=0, failures=0)
    started = time.monotonic()
    try:
        run_state_machine_as_test(seed(run_seed)(ModelSync), settings=_settings())
    finally:
        figures = {**ModelSync.stats, "seed": run_seed, "seconds": round(time.monotonic() - started, 1)}
        print("model-sync figures:", json.dumps(figures))
        if out := os.environ.get("RAGD_MODEL_STATS"):
            Path(out).write_text(json.dumps(figures) + "\n")
