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
- a tracked file ends SKIPPED when its name is not UTF-8, its extension is not one this model writes text for
  (.md, .txt), or it is empty; FAILED when the embeddings API gives one of its chunks a zero or NaN vector;
  EMBEDDED otherwise;
- the index holds exactly the EMBEDDED files tracked under at least one current root, with their current text;
- the current roots are the config file's, plus those added with `ragctl roots add`, minus those removed with
  `ragctl roots remove` (docs/config.md).
"""

from __future__ import annotations

import fnmatch
import os
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TOPS = ("A", "B", "out")
ROOT_TOPS = ("A", "B")
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
IGNORED_FILES = ("*~", ".*.swp", ".*.swx", ".#*", "*.tmp", ".goutputstream-*", "4913", "~$*")
TEXT_EXTENSIONS = frozenset({".md", ".txt"})
EMBEDDED, SKIPPED, FAILED = "EMBEDDED", "SKIPPED", "FAILED"
# a chunk holding one of these words gets a zero / NaN vector from PoisonedOpenAI (tests/e2e/test_model_sync.py)
POISON_WORDS = ("zerovecpoison", "nanvecpoison")

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
    """`directory` is `root` or below it with no ignored directory on the way."""
    if not under(directory, root):
        return False
    rest = directory[len(root) + 1 :]
    return not rest or not any(ignored_dir(part) for part in rest.split("/"))


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
    files: dict[str, FileState] = field(default_factory=dict)
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
            d for d in self.dirs if any(tracked_dir_under(d, t) for t in ROOT_TOPS) and d not in roots
        )

    # -- what the agent must show -------------------------------------------------------------------------------
    def tracked_under(self, rel: str, root: str) -> bool:
        return tracked_dir_under(parent(rel), root) and not ignored_file(base_name(rel))

    def state(self, rel: str) -> str:
        """The end state of a tracked file."""
        f = self.files[rel]
        name = base_name(rel)
        if not is_utf8(name) or os.path.splitext(name)[1].lower() not in TEXT_EXTENSIONS or not f.content:
            return SKIPPED
        return FAILED if f.poisoned else EMBEDDED

    def covered(self, rel: str) -> bool:
        return any(self.tracked_under(rel, r) for r in self.roots())

    def indexed(self) -> set[str]:
        """The files the index must hold."""
        return {rel for rel in self.files if self.state(rel) == EMBEDDED and self.covered(rel)}

    def counts(self, root: str) -> dict[str, int]:
        """`ragctl status` counts of one root (overlapping roots each count their files)."""
        found = Counter(self.state(rel) for rel in self.files if self.tracked_under(rel, root))
        return {state: found.get(state, 0) for state in (EMBEDDED, SKIPPED, FAILED)}

    def failed(self, root: str) -> set[str]:
        return {rel for rel in self.files if self.tracked_under(rel, root) and self.state(rel) == FAILED}

    def tracked_dirs(self) -> set[str]:
        """Folders the agent keeps a `.rag/` for: tracked under a current root."""
        roots = self.roots()
        return {d for d in self.dirs if any(tracked_dir_under(d, r) for r in roots)}

    def owner(self, token: str) -> str | None:
        for rel, f in self.files.items():
            if token in f.tokens:
                return rel
        return None


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

    def appended(self, old: FileState) -> FileState:
        tok = self._token()
        return FileState(old.content + f"\n{self._words(7)} {tok} {self._words(6)}.\n", (*old.tokens, tok))


class Tree:
    """The real tree under `top` and its model, changed together. Every method is one small file-system step."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.model = Model()
        for d in TOPS:
            (top / d).mkdir(parents=True, exist_ok=True)

    def path(self, rel: str) -> str:
        return os.path.join(self.top, *rel.split("/"))

    def write(self, rel: str, state: FileState) -> None:
        """Write in place (an existing file keeps its inode)."""
        with open(self.path(rel), "w", encoding="utf-8") as fh:
            fh.write(state.content)
        self.model.files[rel] = state

    def write_new(self, rel: str, state: FileState) -> None:
        """Write a file that does not exist yet (a temporary file of an editor)."""
        with open(self.path(rel), "x", encoding="utf-8") as fh:
            fh.write(state.content)
        self.model.files[rel] = state

    def delete(self, rel: str) -> None:
        os.unlink(self.path(rel))
        del self.model.files[rel]

    def rename(self, src: str, dst: str) -> None:
        """Rename a file, replacing `dst` if it exists."""
        os.replace(self.path(src), self.path(dst))
        self.model.files[dst] = self.model.files.pop(src)

    def mkdir(self, rel: str) -> None:
        os.mkdir(self.path(rel))
        self.model.dirs.add(rel)

    def rmtree(self, rel: str) -> None:
        shutil.rmtree(self.path(rel))
        self.model.dirs = {d for d in self.model.dirs if not under(d, rel)}
        self.model.files = {f: s for f, s in self.model.files.items() if not under(f, rel)}

    def move_dir(self, src: str, dst: str) -> None:
        """Rename or move a folder (its `.rag/` goes with it); `dst` must not exist."""
        os.rename(self.path(src), self.path(dst))

        def moved(rel: str) -> str:
            return dst + rel[len(src) :] if under(rel, src) else rel

        self.model.dirs = {moved(d) for d in self.model.dirs}
        self.model.files = {moved(f): s for f, s in self.model.files.items()}

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def disk(self) -> tuple[set[str], dict[str, str]]:
        """(folders, file -> text) as found on disk, `.rag/` folders left out: the test's own check of itself."""
        dirs: set[str] = set()
        files: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(self.top):
            dirnames[:] = [d for d in dirnames if d != ".rag"]
            rel_dir = os.path.relpath(dirpath, self.top).replace(os.sep, "/")
            if rel_dir != ".":
                dirs.add(rel_dir)
            for name in filenames:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                    files[rel] = fh.read()
        return dirs, files

    def self_check(self) -> None:
        dirs, files = self.disk()
        assert dirs == self.model.dirs, f"test bug: folders on disk {sorted(dirs ^ self.model.dirs)}"
        want = {rel: f.content for rel, f in self.model.files.items()}
        assert files == want, f"test bug: files on disk differ: {sorted(set(files) ^ set(want))}"
