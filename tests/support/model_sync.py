"""A pure model of a document tree and of what a watching agent must make of it (DESIGN §9), and a `Tree` that
changes the real tree on disk and the model in one step.

Paths are relative to the tree's top, `/`-separated: `A/d1/note.md`. The top holds `A` and `B` (where roots may
be) and `out` (never under a root: the place files and folders are moved out to and in from). File names may hold
quotes, `%`, `_`, a newline, emoji, CJK, and bytes that are not UTF-8 (as surrogate escapes, see os.fsdecode).

What the model says, from the documented rules only (docs/storage-format.md, docs/config.md), never from the
agent's code:
- a file is *tracked* under a root when it lies below the root with no ignored directory (dot-directory,
  `node_modules`, `__pycache__`, `venv`, `site-packages`) on the way and its name is not ignored (dot-file, editor
  temporary file);
- a folder whose name is not UTF-8 is SKIPPED, one of its root's files, and nothing below it is tracked;
- a symbolic link to a folder under a current root (a file linked to, then made a folder) is not counted, unless
  its name is not UTF-8 (then it is SKIPPED by its name, as every such name is);
- a tracked file ends SKIPPED when its name is not UTF-8, it has an extension that is not one this model writes
  text for (.md, .txt; a name without one is text, as a README is), or it is empty; FAILED when the embeddings API gives one of its chunks a zero or NaN vector;
  EMBEDDED otherwise;
- a symbolic link to a file is a file of the link's name with its target's text, when the target is a file tracked
  under a current root; a link to a file outside every root, or a dangling one, is SKIPPED (DESIGN §4.1);
- hard links are paths of one file: a write through one is the text of all (each path its own entry);
- (the agent runs as an ordinary user) a file made unreadable (`chmod 000`; all its hard links with it) whose name
  would be read ends FAILED; a folder made unreadable holds nothing the agent sees: what lies below it is neither
  counted nor searchable, and the folder is one of its root's directory errors ("permission denied") unless a
  folder above it is unreadable too; a `chmod` back brings it all back;
- the index holds exactly the EMBEDDED files tracked under at least one current root, with their current text;
- the current roots are the config file's, plus those added with `ragctl roots add`, minus those removed with
  `ragctl roots remove` (docs/config.md).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import random
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragd.pipeline import sidecar
from tests.e2e.agent import AgentProcess, ragctl_json

TOPS = ("A", "B", "out")
ROOT_TOPS = ("A", "B")
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
IGNORED_FILES = ("*~", ".*.swp", ".*.swx", ".#*", "*.tmp", ".goutputstream-*", "4913", "~$*")
TEXT_EXTENSIONS = frozenset({".md", ".txt"})
EMBEDDED, SKIPPED, FAILED = "EMBEDDED", "SKIPPED", "FAILED"
# a chunk holding one of these words gets a zero / NaN vector from PoisonedOpenAI (tests/e2e/test_model_sync.py)
POISON_WORDS = ("zerovecpoison", "nanvecpoison")
SEARCH_SAMPLE = 5  # indexed files searched at each check, beyond those touched since the last
# tokens searched with `ragctl search` at a check; the others (2,000 after a folder of 2,000 files) on the socket
CLI_SEARCHES = 20

FILE_STEMS = (
    "a", "b", "note", "q\"uote's", "50% off_a_b", "line\nbreak", "emoji 😀", "中文 笔记", "a\\b",
    os.fsdecode(b"caf\xe9 latin1"), os.fsdecode(b"\xff\xfe raw"),
)  # fmt: skip
FILE_EXTENSIONS = (".md", ".txt", ".md", ".txt", ".dat")  # .dat: a type ragd does not index (SKIPPED)
IGNORED_NAMES = (".hidden.md", "draft.md~", ".#lock.md", "scratch.tmp")
DIR_NAMES = ("d1", "d2", "sub", "x y", "目录 %_", ".hidden", "node_modules")
WORDS = (
    "river", "stone", "lamp", "quartz", "meadow", "copper", "violet", "harbor", "signal", "garden", "ledger",
    "orbit", "pepper", "canyon", "timber", "索引", "笔记", "文档", "搜索", "同步",
)  # fmt: skip

# A worker process being started (spawned) as its agent was SIGKILLed reads its start-up data from a pipe the
# kill closed, and Python's multiprocessing prints this traceback into the log the agent's processes share: the
# kill's doing, not an error of the agent (the test kills agents on purpose).
_ORPHANED_SPAWN = re.compile(
    r'Traceback \(most recent call last\):\n  File "<string>", line 1, in <module>\n(?:  .*\n)*?'
    r"EOFError: Ran out of input\n"
)


# what the agent's verification logs for each repair, and for a pass that repaired (index/write/verify.py)
REPAIR = re.compile(r"verify: .*(re-synced from its sidecar|with no EMBEDDED sidecar under a root; removed)"
                    r"|index verified \(.*\): \d+ sources repaired")  # fmt: skip


def is_utf8(name: str) -> bool:
    """False for a name holding bytes that are not UTF-8 (os.fsdecode turns them into lone surrogates)."""
    return not any("\udc80" <= ch <= "\udcff" for ch in name)


def ignored_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIP_DIRS


def ignored_file(name: str) -> bool:
    return name.startswith(".") or any(fnmatch.fnmatchcase(name, p) for p in IGNORED_FILES)


def parent(rel: str) -> str:
    return rel.rpartition("/")[0]


def base_name(rel: str) -> str:
    return rel.rpartition("/")[2]


def join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def under(rel: str, top: str) -> bool:
    """`rel` is `top` or lies below it."""
    return rel == top or rel.startswith(top + "/")


def tracked_dir_under(directory: str, root: str) -> bool:
    """`directory` is `root` or below it with no ignored directory, nor one whose name is not UTF-8, on the way."""
    if not under(directory, root):
        return False
    rest = directory[len(root) + 1 :]
    return not rest or not any(ignored_dir(part) or not is_utf8(part) for part in rest.split("/"))


@dataclass
class FileState:
    content: str
    tokens: tuple[str, ...]  # words that occur in this file's content and in no other content ever written

    @property
    def poisoned(self) -> bool:
        return any(w in self.content for w in POISON_WORDS)


@dataclass
class Model:
    """What the tree holds and which folders are roots: pure data, no I/O."""

    dirs: set[str] = field(default_factory=lambda: set(TOPS))
    files: dict[str, FileState] = field(
        default_factory=dict
    )  # regular files (hard links: one state, see inode)
    inode: dict[str, int] = field(default_factory=dict)  # each regular file's inode: shared by hard links
    links: dict[str, str] = field(default_factory=dict)  # symbolic links to files: path -> target path
    closed_dirs: set[str] = field(default_factory=set)  # folders made unreadable (chmod 000)
    closed_files: set[int] = field(default_factory=set)  # the inodes of files made unreadable (chmod 000)
    config_roots: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)  # `ragctl roots add` (kept across restarts)
    removed: list[str] = field(default_factory=list)  # `ragctl roots remove` of a config root

    # -- roots --------------------------------------------------------------------------------------------------
    def roots(self) -> list[str]:
        return [r for r in dict.fromkeys([*self.config_roots, *self.added]) if r not in self.removed]

    def add_root(self, root: str) -> None:
        if root in self.removed:
            self.removed.remove(root)
        if root not in self.added:
            self.added.append(root)

    def remove_root(self, root: str) -> None:
        if root in self.added:
            self.added.remove(root)
        if root in self.config_roots and root not in self.removed:
            self.removed.append(root)

    def pinned(self, directory: str) -> bool:
        """`directory` is or holds a folder named as a root somewhere (the test never moves or deletes those)."""
        return directory in TOPS or any(under(r, directory) for r in [*self.config_roots, *self.added])

    def root_candidates(self) -> list[str]:
        """Folders that may become roots: below A or B, no ignored directory on the way, not a root yet."""
        roots = self.roots()
        return sorted(
            d
            for d in self.dirs
            if any(tracked_dir_under(d, t) for t in ROOT_TOPS) and d not in roots and not self.unreachable(d)
        )

    # -- unreadable paths ---------------------------------------------------------------------------------------
    def hidden(self, rel: str) -> bool:
        """`rel` lies below a folder made unreadable: the agent cannot see it."""
        return any(under(rel, d) and rel != d for d in self.closed_dirs)

    def unreachable(self, directory: str) -> bool:
        """The agent can neither list `directory` nor see below it."""
        return directory in self.closed_dirs or self.hidden(directory)

    def closed(self, rel: str) -> bool:
        """`rel` is a file made unreadable (through any of its paths)."""
        return rel in self.inode and self.inode[rel] in self.closed_files

    def closed_paths(self) -> list[str]:
        """The folders and files made unreadable (each path of a file)."""
        return sorted({*self.closed_dirs, *(f for f in self.files if self.closed(f))})

    def dir_errors(self, root: str) -> set[str]:
        """The folders `ragctl status` names under `root` as unreadable."""
        return {d for d in self.closed_dirs if tracked_dir_under(d, root) and not self.hidden(d)}

    # -- what the agent must show -------------------------------------------------------------------------------
    def tracked_under(self, rel: str, root: str) -> bool:
        return (
            tracked_dir_under(parent(rel), root) and not ignored_file(base_name(rel)) and not self.hidden(rel)
        )

    def state(self, rel: str) -> str:
        """The end state of a tracked file (or link)."""
        f = self.text(rel)
        name = base_name(rel)
        ext = os.path.splitext(name)[1].lower()
        if f is None or not is_utf8(name) or (ext and ext not in TEXT_EXTENSIONS):
            return SKIPPED  # (a name without an extension is read as the text it holds, as a README is)
        if self.closed(rel) or (rel in self.links and self.closed(self.links[rel])):
            return FAILED  # permission denied
        if not f.content:
            return SKIPPED
        return FAILED if f.poisoned else EMBEDDED

    def text(self, rel: str) -> FileState | None:
        """What a path reads as: a file's text; a link's target's, if the target is a file tracked under a current
        root (None: a link outside every root, or dangling)."""
        if rel in self.files:
            return self.files[rel]
        target = self.links[rel]
        return self.files[target] if target in self.files and self.covered(target) else None

    def paths(self) -> list[str]:
        """Every file and link to a file."""
        return [*self.files, *self.links]

    def covered(self, rel: str) -> bool:
        return any(self.tracked_under(rel, r) for r in self.roots())

    def indexed(self) -> set[str]:
        """The files the index must hold."""
        return {rel for rel in self.paths() if self.covered(rel) and self.state(rel) == EMBEDDED}

    def counts(self, root: str) -> dict[str, int]:
        """`ragctl status` counts of one root (overlapping roots each count their files), a folder whose name is
        not UTF-8 among the SKIPPED (docs/storage-format.md: its subtree is not tracked)."""
        found = Counter(
            self.state(rel)
            for rel in self.paths()
            if self.tracked_under(rel, root) and not self.links_to_a_root_folder(rel)
        )
        found[SKIPPED] += len(self.untracked_names(root))
        return {state: found.get(state, 0) for state in (EMBEDDED, SKIPPED, FAILED)}

    def links_to_a_root_folder(self, rel: str) -> bool:
        """A symbolic link whose target is (now) a folder under a current root: never followed, not counted (that
        folder is indexed where it is; docs/storage-format.md). One to a folder outside every root is SKIPPED, and
        so is a link whose own name is not UTF-8, whatever it leads to (the name is refused first)."""
        target = self.links.get(rel)
        return (
            target is not None
            and is_utf8(base_name(rel))
            and target in self.dirs
            and any(under(target, r) for r in self.roots())
        )

    def untracked_names(self, root: str) -> set[str]:
        """The folders under `root` whose names are not UTF-8, in a tracked folder the agent can read."""
        return {
            d
            for d in self.dirs
            if d != root
            and not is_utf8(base_name(d))
            and not ignored_dir(base_name(d))
            and tracked_dir_under(parent(d), root)
            and not self.hidden(d)
        }

    def failed(self, root: str) -> set[str]:
        return {rel for rel in self.paths() if self.tracked_under(rel, root) and self.state(rel) == FAILED}

    def tracked_dirs(self) -> set[str]:
        """Folders the agent keeps a `.rag/` for: tracked under a current root, and readable."""
        roots = self.roots()
        return {
            d for d in self.dirs if any(tracked_dir_under(d, r) for r in roots) and not self.unreachable(d)
        }

    def owners(self, token: str) -> set[str]:
        """The paths whose text holds `token`: a file, its hard links, and the links to it that read it."""
        return {rel for rel in self.paths() if (f := self.text(rel)) is not None and token in f.tokens}

    def linked(self, rel: str) -> list[str]:
        """The other paths of `rel`'s file (hard links)."""
        n = self.inode.get(rel)
        return [p for p, i in self.inode.items() if i == n and p != rel]


class Content:
    """Fresh text for the files: every piece carries a token no other piece ever had (e.g. `tq0007z`, one term
    for the keyword tokenizer), plus a few common words, some of them CJK."""

    def __init__(self) -> None:
        self.n = 0

    def _token(self) -> str:
        self.n += 1
        return f"tq{self.n:04d}z"

    def _words(self, k: int) -> str:
        rng = random.Random(self.n)
        return " ".join(rng.choice(WORDS) for _ in range(k))

    def new(self, poison: str | None = None) -> FileState:
        tok = self._token()
        extra = f" {poison}" if poison else ""
        text = f"# Note {tok}\n\n{self._words(6)} {tok} {self._words(5)}{extra}.\n"
        return FileState(text, (tok,))

    def same_size(self, old: FileState) -> FileState:
        """The same text with fresh tokens in place of the old ones: same size, other content (a racy edit)."""
        text, tokens = old.content, []
        for tok in old.tokens:
            new = self._token()
            text, tokens = text.replace(tok, new), [*tokens, new]
        return FileState(text, tuple(tokens))

    def appended(self, old: FileState) -> FileState:
        tok = self._token()
        return FileState(old.content + f"\n{self._words(7)} {tok} {self._words(6)}.\n", (*old.tokens, tok))


class Tree:
    """The real tree under `top` and its model, changed together; every method is one small file-system step.
    `touched` collects the tokens of every file changed, moved or deleted since the last check."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.model = Model()
        self.touched: set[str] = set()
        self.inodes = iter(range(1, 1 << 62))
        for d in TOPS:
            (top / d).mkdir(parents=True, exist_ok=True)

    def path(self, rel: str) -> str:
        return os.path.join(self.top, *rel.split("/"))

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.top)

    def touch_under(self, top: str) -> None:
        """The tokens of every file or link at or under `top` are to be searched at the next check."""
        files, links = self.model.files, self.model.links
        for rel in self.model.paths():
            if not top or under(rel, top):
                f = files.get(rel) or files.get(links.get(rel, ""))
                self.touched.update(f.tokens if f is not None else ())

    def write(self, rel: str, state: FileState, *, new: bool = False) -> None:
        """Write in place (an existing file keeps its inode, and its hard links read the new text); `new`: the
        file must not exist yet. Never through a symbolic link (callers pick files, not links)."""
        assert rel not in self.model.links, f"{rel!r} is a link"
        with open(self.path(rel), "x" if new else "w", encoding="utf-8") as fh:
            fh.write(state.content)
        self.touch_under(rel)
        self.touched.update(state.tokens)
        if rel not in self.model.files:
            self.model.inode[rel] = next(self.inodes)
        for p in [rel, *self.model.linked(rel)]:
            self.model.files[p] = state

    def symlink(self, rel: str, target: str) -> None:
        """`ln -s` an absolute link at `rel` (which must not exist) to the path `target` (which may not exist)."""
        os.symlink(self.path(target), self.path(rel))
        self.touch_under(target)
        self.model.links[rel] = target

    def hardlink(self, src: str, dst: str) -> None:
        """`ln SRC DST`: one more path of the file `src` (`dst` must not exist)."""
        os.link(self.path(src), self.path(dst))
        self.touch_under(src)
        self.model.files[dst] = self.model.files[src]
        self.model.inode[dst] = self.model.inode[src]

    def touch(self, rel: str) -> None:
        """A new modification time, the same content."""
        st = os.stat(self.path(rel))
        os.utime(self.path(rel), ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        self.touch_under(rel)

    def delete(self, rel: str) -> None:
        """Remove a file or a link (only that path: a hard link's other paths stay)."""
        os.unlink(self.path(rel))
        self.touch_under(rel)
        self._forget(rel)

    def _forget(self, rel: str) -> None:
        self.model.files.pop(rel, None)
        n = self.model.inode.pop(rel, None)
        if n not in self.model.inode.values():
            self.model.closed_files.discard(n)  # type: ignore[arg-type]  # (None: a link)
        self.model.links.pop(rel, None)

    def chmod(self, rel: str, readable: bool) -> None:
        """`chmod 000` a folder or a file (all its hard links with it), or give it back its mode (rwx for all: the
        tree is made with umask 0, so that the agent's user may write `.rag/` folders in it)."""
        is_dir = rel in self.model.dirs
        os.chmod(self.path(rel), (0o777 if is_dir else 0o666) if readable else 0)
        self.touch_under(rel)
        if is_dir:
            (self.model.closed_dirs.discard if readable else self.model.closed_dirs.add)(rel)
        else:
            n = self.model.inode[rel]
            (self.model.closed_files.discard if readable else self.model.closed_files.add)(n)

    def rename(self, src: str, dst: str) -> None:
        """Rename a file or a link, replacing `dst` if it exists. Onto another path of the same file (a hard link)
        rename(2) does nothing: both paths stay (POSIX)."""
        same = (
            src in self.model.files
            and dst in self.model.files
            and self.model.inode[src] == self.model.inode[dst]
        )
        os.replace(self.path(src), self.path(dst))
        if same:
            return
        self.touch_under(src)
        self.touch_under(dst)
        self._forget(dst)
        if src in self.model.links:
            self.model.links[dst] = self.model.links.pop(src)
        else:
            self.model.files[dst] = self.model.files.pop(src)
            self.model.inode[dst] = self.model.inode.pop(src)

    def mkdir(self, rel: str) -> None:
        os.mkdir(self.path(rel))
        self.model.dirs.add(rel)

    def replace_kind(self, rel: str, state: FileState | None) -> None:
        """A name that changes kind with no pause between: a folder `rel` removed and a file written in its place
        (`state`), or a file (or link) removed and a folder made in its place (`state` None)."""
        if rel in self.model.dirs:
            self.rmtree(rel)
            assert state is not None
            self.write(rel, state, new=True)
        else:
            self.delete(rel)
            self.mkdir(rel)

    def rmtree(self, rel: str) -> None:
        """`rm -r`, run again if it fails with "Directory not empty" or "No such file": the agent may be writing the
        folder's `.rag/` at that moment (its first job, or a change note's), or removing it (its last document gone),
        as it may for a user; the second run removes it."""
        for attempt in range(5):
            try:
                shutil.rmtree(self.path(rel))
                break
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.ENOENT) or attempt == 4:
                    raise
                time.sleep(0.1)
        self.touch_under(rel)
        self.model.dirs = {d for d in self.model.dirs if not under(d, rel)}
        self.model.closed_dirs = {d for d in self.model.closed_dirs if not under(d, rel)}
        for f in [f for f in self.model.paths() if under(f, rel)]:
            self._forget(f)

    def move_dir(self, src: str, dst: str) -> None:
        """Rename or move a folder (its `.rag/` goes with it); `dst` must not exist."""
        os.rename(self.path(src), self.path(dst))
        self.touch_under(src)

        def moved(rel: str) -> str:
            return dst + rel[len(src) :] if under(rel, src) else rel

        self.model.dirs = {moved(d) for d in self.model.dirs}
        self.model.closed_dirs = {moved(d) for d in self.model.closed_dirs}
        self.model.files = {moved(f): s for f, s in self.model.files.items()}
        self.model.inode = {moved(f): n for f, n in self.model.inode.items()}
        self.model.links = {moved(f): t for f, t in self.model.links.items()}  # absolute: targets stay

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def self_check(self) -> None:
        """The tree on disk (`.rag/` folders left out) is the model's: the test's check of itself."""
        dirs, files, links, inodes = set(), {}, {}, {}
        for dirpath, dirnames, filenames in os.walk(self.top):
            dirnames[:] = [d for d in dirnames if d != ".rag"]
            for d in list(dirnames):
                path = os.path.join(dirpath, d)
                if os.path.islink(path):  # a link whose target is a folder (now): a link, as the model has it
                    links[self.rel(path)] = self.rel(os.readlink(path))
                    dirnames.remove(d)
                else:
                    dirs.add(self.rel(path))
            for name in filenames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    links[self.rel(path)] = self.rel(os.readlink(path))
                    continue
                with open(path, encoding="utf-8") as fh:
                    files[self.rel(path)] = fh.read()
                inodes[self.rel(path)] = os.stat(path).st_ino
        extra, gone = sorted(dirs - self.model.dirs), sorted(self.model.dirs - dirs)
        assert not extra and not gone, f"folders on disk that should not be: {extra}; missing: {gone}"
        want = {rel: f.content for rel, f in self.model.files.items()}
        assert files == want, f"files on disk differ from the model: {sorted(set(files) ^ set(want))}"
        assert links == self.model.links, f"links on disk {links} differ from the model's {self.model.links}"
        shared = {rel: sorted(p for p in inodes if inodes[p] == n) for rel, n in inodes.items()}
        want_shared = {rel: sorted([rel, *self.model.linked(rel)]) for rel in self.model.files}
        assert shared == want_shared, f"hard links on disk {shared} differ from the model's {want_shared}"


class Judge:
    """The invariants at a quiet point (the agent idle): the live agent, its sidecars and its index against the
    model. Each kind of divergence fails on its own line, so hypothesis reports distinct bugs apart."""

    def __init__(self, tree: Tree, agent: AgentProcess) -> None:
        self.tree, self.model, self.agent = tree, tree.model, agent
        self.abs, self.rel = tree.path, tree.rel

    def check(self, n: int, log_at: int) -> int:
        """Check everything; `n` seeds the sample of files searched; `log_at`: how much of the agent's log was
        seen already (returns the new mark). Clears the tree's `touched`."""
        self.tree.self_check()
        status = ragctl_json("status")
        listed = {self.rel(r["path"]) for r in status["roots"]}
        want_roots = set(self.model.roots())
        assert listed == want_roots, f"roots listed {sorted(listed)}, want {sorted(want_roots)}"
        self.check_index()
        self.check_status(status)
        self.check_search(self.tree.touched, random.Random(n))
        self.check_debris()
        assert ragctl_json("orphans") == {"path": None, "orphans": [], "removed": 0}
        log = self.agent.log()
        assert "Traceback" not in _ORPHANED_SPAWN.sub("", log[log_at:]), (
            f"traceback in the agent's log:\n{log[log_at:]}"
        )
        repairs = [line for line in log[log_at:].splitlines() if REPAIR.search(line)]
        assert not repairs, "the verification repaired the index (a repair is a bug):\n" + "\n".join(repairs)
        self.tree.touched.clear()
        return len(log)

    def check_index(self) -> None:
        """(a) index sources == the model's EMBEDDED files == the EMBEDDED sidecars; chunks == sidecar chunks."""
        sources = {self.rel(p) for p in self.agent.call("index", {"sources": True})["sources"]}
        want = self.model.indexed()
        assert sources == want, f"index: extra {sorted(sources - want)}, missing {sorted(want - sources)}"
        embedded = self.embedded_sidecars()
        assert set(embedded) == sources, f"EMBEDDED sidecars {sorted(embedded)} vs index {sorted(sources)}"
        for rel in sorted(sources):
            chunks = self.index_chunks(self.abs(rel))
            assert chunks == embedded[rel], f"{rel!r}: index chunks {chunks} != sidecar {embedded[rel]}"
            text = self.model.text(rel).content  # type: ignore[union-attr]  # indexed: it has a text
            assert " ".join(chunks).split() == text.split(), f"{rel!r}: chunks {chunks} != file {text!r}"

    def check_status(self, status: dict[str, Any]) -> None:
        """(c) per root: the model's counts and failures, no directory errors; no change note pending."""
        for entry in status["roots"]:
            root = self.rel(entry["path"])
            counts = {k: v for k, v in entry["files"].items() if v}
            want = {k: v for k, v in self.model.counts(root).items() if v}
            assert counts == want, (
                f"status of root {root!r}: {entry['files']}, want {want}; failures "
                f"{[f['path'] for f in entry['failures']]}, want {sorted(self.model.failed(root))}"
            )
            failures = {self.rel(f["path"]) for f in entry["failures"]}
            assert failures == self.model.failed(root), f"failures of {root!r}: {entry['failures']}"
            errors = {self.rel(e["path"]): e["reason"] for e in entry.get("dir_errors") or ()}
            want_errors = dict.fromkeys(self.model.dir_errors(root), "permission denied")
            assert errors == want_errors, f"directory errors under {root!r}: {errors}, want {want_errors}"
        index = status["index"]
        assert index["pending_mushrooms"] == 0 and not index["failed_mushrooms"], f"index: {index}"

    def check_search(self, touched: set[str], rng: random.Random) -> None:
        """(b) a file's token finds that file only; a token of text gone or not indexed finds nothing. Searched:
        every token touched since the last check, and one token of each of a few indexed files."""
        indexed = sorted(self.model.indexed())
        tokens = set(touched)
        for rel in rng.sample(indexed, min(SEARCH_SAMPLE, len(indexed))):
            tokens.add(rng.choice(self.model.text(rel).tokens))  # type: ignore[union-attr]  # indexed: a text
        for n, token in enumerate(sorted(tokens)):
            owners = self.model.owners(token)
            if n < CLI_SEARCHES:
                hits = ragctl_json("search", token, "--mode", "keyword", "-k", "10")["results"]
            else:  # the request `ragctl search` sends, on the agent's socket (a process each took minutes)
                request = {"query": token, "top_k": 10, "mode": "keyword", "path_prefix": [], "ext": [],
                           "one_per_file": False}  # fmt: skip
                hits = self.agent.call("search", request)["results"]
            found = {self.rel(p) for h in hits for p in (h["path"], *h.get("duplicates", ()))}
            want = owners & set(indexed)
            assert found == want, (
                f"search {token} (in {sorted(owners)}) found {sorted(found)}, want {sorted(want)}"
            )

    def check_debris(self) -> None:
        """(d) no change note left in, and no `*.tmp` debris under, the `.rag/` of a folder under a root."""
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
                if entry is not None and entry.status == EMBEDDED and rel in self.model.paths():
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
