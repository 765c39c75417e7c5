"""A root that is a git work tree, under the real `ragd`: the `.rag/` folders never show in `git status` nor are
committed by `git add -A` (an earlier ragd's stores included, once their folder's job ran), a checkout of a branch
without a folder and back works, and a folder left with nothing but its `.rag/` loses it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.agent import keyword_hits, ragctl, running_agent, write_doc
from tests.support.poll import poll

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **GIT_ENV})  # fmt: skip
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc.stdout


def rag_paths(text: str) -> list[str]:
    return [line for line in text.splitlines() if ".rag" in line]


def stores(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".rag") if p.is_dir())


def test_sidecars_stay_out_of_git_and_a_checkout_back_and_forth_works(tmp_path: Path, config: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_doc(root / "readme.md", "quokkareadme")
    write_doc(root / "guide" / "intro.md", "numbatintro")
    write_doc(root / "guide" / "usage.md", "wombatusage")
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert len(stores(root)) == 2
        git(root, "add", "-A")
        assert rag_paths(git(root, "status", "--porcelain", "--untracked-files=all")) == []
        assert rag_paths(git(root, "ls-files")) == []
        git(root, "commit", "-q", "-m", "docs")

        # a branch without the folder: git removes its files and keeps the ignored .rag/, which the agent then
        # removes (the folders stay: they are the user's)
        git(root, "checkout", "-q", "-b", "slim")
        git(root, "rm", "-q", "-r", "guide")
        git(root, "commit", "-q", "-m", "no guide")
        ragctl("wait")
        poll(
            lambda: not (root / "guide" / ".rag").exists(),
            timeout=30,
            what="the emptied folder's .rag/ removed",
        )
        assert os.listdir(root / "guide") == [] and keyword_hits("numbatintro") == []

        git(root, "checkout", "-q", "main")  # refused on an earlier ragd: its .rag/ were committed
        ragctl("wait")
        assert keyword_hits("numbatintro") == [str(root / "guide" / "intro.md")]
        assert keyword_hits("wombatusage") == [str(root / "guide" / "usage.md")]
        assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_store_of_an_earlier_version_is_ignored_once_its_folder_job_ran(
    tmp_path: Path, config: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_doc(root / "a.md", "alphatoken")
    write_doc(root / "sub" / "b.md", "betatoken")
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:
        agent.stop()
    for store in stores(root):
        (store / ".gitignore").unlink(missing_ok=True)  # as an earlier ragd left it
    assert len(rag_paths(git(root, "status", "--porcelain", "--untracked-files=all"))) > 0
    with running_agent(tmp_path / "agent2.log", str(root), idle=True):
        git(root, "add", "-A")
        assert rag_paths(git(root, "status", "--porcelain", "--untracked-files=all")) == []
        assert keyword_hits("betatoken") == [str(root / "sub" / "b.md")]


def test_a_folder_whose_documents_all_left_loses_its_store_and_takes_new_ones(
    tmp_path: Path, config: Path
) -> None:
    root = tmp_path / "kb"
    write_doc(root / "keep.md", "keeptoken")
    folder = root / "emptied"
    for i in range(3):
        write_doc(folder / f"d{i}.md", "emptiedtoken")
    with running_agent(tmp_path / "agent.log", str(root), idle=True) as agent:
        assert (folder / ".rag" / "d0.md.ragjson").exists()
        for i in range(3):
            (folder / f"d{i}.md").unlink()
        ragctl("wait")
        poll(lambda: not (folder / ".rag").exists(), timeout=30, what="the emptied folder's .rag/ removed")
        assert folder.is_dir() and os.listdir(folder) == []  # the folder is the user's: it stays
        assert keyword_hits("emptiedtoken") == []
        assert (root / ".rag" / "emptied.ragjson").exists()  # still a tracked folder of its parent

        write_doc(folder / "back.md", "backtoken")
        ragctl("wait")
        assert keyword_hits("backtoken") == [str(folder / "back.md")]
        assert (folder / ".rag" / "back.md.ragjson").exists() and (folder / ".rag" / ".gitignore").exists()
        assert "job for" not in agent.log() and "Traceback" not in agent.log()
