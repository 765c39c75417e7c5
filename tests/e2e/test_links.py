"""Symbolic and hard links (DESIGN §4.1): a link to a file under a root is indexed under its own path, and an edit
through any path reaches every path's entry at once; a link leading outside every root is SKIPPED with the reason;
an edit made through a path outside the roots is seen through a watch on the hard-linked file itself, or, where
no job listed the file as hard-linked yet, caught and redone by the verification."""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.agent import keyword_hits, ragctl, ragctl_json, running_agent, write_doc
from tests.e2e.conftest import ragd_json
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


def _edit_in_place(path: Path, token: str) -> None:
    """Rewritten through this path, its inode kept (what `>` in a shell does): every link sees the new text."""
    with path.open("r+", encoding="utf-8") as fh:
        fh.truncate(0)
        fh.write(f"# {token}\n\nThe marker {token} appears here.\n")


def _linked(root: Path, token: str) -> tuple[Path, Path]:
    """`root/a/l.md`, a symbolic link to `../b/t.md`, a note holding `token`: (the link, its target)."""
    target = write_doc(root / "b" / "t.md", token)
    (root / "a").mkdir()
    link = root / "a" / "l.md"
    link.symlink_to("../b/t.md")
    return link, target


def _root(status: dict, root: Path) -> dict:
    return next(r for r in status["roots"] if r["path"] == str(root))


def _skipped(status: dict, root: Path) -> dict[str, str]:
    return {s["path"]: s["reason"] for s in _root(status, root)["skipped"]}


def test_a_symlinked_file_follows_an_edit_of_its_target_in_another_folder(
    tmp_path: Path, config: Path
) -> None:
    root = tmp_path / "kb"
    link, target = _linked(root, "oldtarget")
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("oldtarget") == [str(link), str(target)]
        _edit_in_place(target, "newtarget")
        ragctl("wait")
        assert keyword_hits("newtarget") == [str(link), str(target)]
        assert keyword_hits("oldtarget") == []
        assert ragctl_json("verify")["redone"] == 0  # the watcher's path got there: nothing left to redo
        target.unlink()  # the link dangles now: out of search, SKIPPED with the reason
        ragctl("wait")
        assert keyword_hits("newtarget") == []
        assert _skipped(ragctl_json("status"), root) == {str(link): "dangling symbolic link to ../b/t.md"}


def test_a_link_into_a_folder_moved_out_of_every_root_leaves_search(tmp_path: Path, config: Path) -> None:
    """`mv ROOT/b OUTSIDE`: the watcher reports the folder gone, no event for each of its files; a link elsewhere to
    one of them dangles now, and its folder is looked at again (the soak's seed 639260074)."""
    root = tmp_path / "kb"
    link, target = _linked(root, "movedtarget")
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("movedtarget") == [str(link), str(target)]
        (root / "b").rename(tmp_path / "b")
        ragctl("wait")
        assert keyword_hits("movedtarget") == []
        assert _skipped(ragctl_json("status"), root) == {str(link): "dangling symbolic link to ../b/t.md"}


def test_a_file_moved_out_of_every_root_and_linked_back_under_its_name_leaves_search(
    tmp_path: Path, config: Path
) -> None:
    """`mv ROOT/a.md OUT/; ln -s OUT/a.md ROOT/a.md`: the link leads to the very file its entry recorded (same inode,
    size, mtime; only its ctime moved), so its stat says "touched", yet it now leads outside every root: SKIPPED and
    out of search (the model-based test's seed 500877935)."""
    root, out = tmp_path / "kb", tmp_path / "out"
    out.mkdir()
    doc = write_doc(root / "a.md", "movedoutside")
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("movedoutside") == [str(doc)]
        doc.rename(out / "a.md")
        doc.symlink_to(out / "a.md")
        ragctl("wait")
        assert keyword_hits("movedoutside") == []
        assert "outside the roots" in _skipped(ragctl_json("status"), root)[str(doc)]
        (out / "a.md").rename(root / "b.md")  # its target moved into the root: the link is indexed again
        doc.unlink()
        doc.symlink_to(root / "b.md")
        ragctl("wait")
        assert keyword_hits("movedoutside") == [str(doc), str(root / "b.md")]


def test_a_symlink_across_roots_follows_an_edit_of_its_target(tmp_path: Path, config: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    target = write_doc(two / "b" / "t.md", "oldacross")
    (one / "a").mkdir(parents=True)
    link = one / "a" / "l.md"
    link.symlink_to(target)
    with running_agent(tmp_path / "agent.log", str(one), str(two), idle=True):
        assert keyword_hits("oldacross") == [str(link), str(target)]
        _edit_in_place(target, "newacross")
        ragctl("wait")
        assert keyword_hits("newacross") == [str(link), str(target)]
        assert keyword_hits("oldacross") == []
        # an editor's save (a new file renamed over the target) reaches the link too
        tmp = target.with_name("t.md.new")
        write_doc(tmp, "savedacross")
        tmp.rename(target)
        ragctl("wait")
        assert keyword_hits("savedacross") == [str(link), str(target)]
        assert keyword_hits("newacross") == []


def test_a_file_hard_linked_into_two_roots_edited_through_one_path(tmp_path: Path, config: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    first = write_doc(one / "h.md", "oldhard")
    (two / "sub").mkdir(parents=True)
    second = two / "sub" / "h2.md"
    os.link(first, second)
    with running_agent(tmp_path / "agent.log", str(one), str(two), idle=True):
        assert keyword_hits("oldhard") == [str(first), str(second)]
        _edit_in_place(second, "newhard")
        ragctl("wait")
        assert keyword_hits("newhard") == [str(first), str(second)]
        assert keyword_hits("oldhard") == []
        _edit_in_place(first, "againhard")  # and the other way round
        ragctl("wait")
        assert keyword_hits("againhard") == [str(first), str(second)]


def test_links_leading_outside_every_root_are_skipped_with_the_reason(tmp_path: Path, config: Path) -> None:
    root, outside = tmp_path / "kb", tmp_path / "elsewhere"
    write_doc(root / "inside.md", "insidetoken")
    write_doc(outside / "secret.md", "secrettoken")
    (root / "folder").symlink_to(outside)
    (root / "leak.md").symlink_to(outside / "secret.md")
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("secrettoken") == []
        skipped = _skipped(ragctl_json("status"), root)
        assert set(skipped) == {str(root / "folder"), str(root / "leak.md")}
        assert "outside the roots" in skipped[str(root / "folder")]
        assert str(outside) in skipped[str(root / "folder")]
        assert "outside the roots" in skipped[str(root / "leak.md")]
        # a link made while the agent runs is reported as well
        (root / "later").symlink_to(outside)
        ragctl("wait")
        assert str(root / "later") in _skipped(ragctl_json("status"), root)
    offline = {e["path"]: e for e in ragd_json("status", str(root))["entries"]}
    assert offline[str(root / "folder")]["state"] == "SKIPPED"
    assert "outside the roots" in offline[str(root / "folder")]["reason"]
    assert offline[str(root / "leak.md")]["state"] == "SKIPPED"


def test_a_file_hard_linked_outside_every_root_follows_an_edit_made_there(
    tmp_path: Path, config: Path
) -> None:
    """inotify reports a write to a folder's watch only for the path it was made through, and a path outside every
    root is in no watched folder: such an edit (found by the soak, as a `chmod 000` through it) left the file stale
    in search until the verification. A file its folder's job listed with more than one hard link is watched itself,
    and told of every change to it, through whichever path."""
    root, outside = tmp_path / "kb", tmp_path / "elsewhere"
    inside = write_doc(root / "docs" / "h.md", "oldoutside")
    outside.mkdir()
    os.link(inside, outside / "h.md")
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("oldoutside") == [str(inside)]
        _edit_in_place(outside / "h.md", "newoutside")
        ragctl("wait")
        assert keyword_hits("newoutside") == [str(inside)]
        assert keyword_hits("oldoutside") == []
        (outside / "h.md").unlink()  # no longer hard-linked: its watch goes with its folder's next listing
        _edit_in_place(inside, "lastoutside")
        ragctl("wait")
        assert keyword_hits("lastoutside") == [str(inside)]
        assert ragctl_json("verify")["redone"] == 0


def test_verify_redoes_a_file_edited_through_a_path_outside_every_root(tmp_path: Path, config: Path) -> None:
    """A file hard-linked outside every root after its folder's job listed it (a new link changes only its inode,
    which no folder's watch reports) is watched by nothing: an edit through that link reaches no watched folder.
    The verification sees the source's own stat differ from its entry's record and has the file indexed again (its
    sidecar was as stale as the index, so a re-sync from it would change nothing)."""
    root, outside = tmp_path / "kb", tmp_path / "elsewhere"
    inside = write_doc(root / "docs" / "h.md", "oldunseen")
    outside.mkdir()
    with running_agent(tmp_path / "agent.log", str(root), idle=True):
        assert keyword_hits("oldunseen") == [str(inside)]
        os.link(inside, outside / "h.md")
        _edit_in_place(outside / "h.md", "newunseen")
        ragctl("wait")
        assert keyword_hits("oldunseen") == [str(inside)]  # nothing saw it
        report = ragctl_json("verify")
        assert report["redone_paths"] == [str(inside)]
        ragctl("wait")
        assert keyword_hits("newunseen") == [str(inside)]
        assert keyword_hits("oldunseen") == []
        assert ragctl_json("verify")["redone"] == 0


def test_a_link_is_judged_again_when_its_targets_root_is_removed_or_added(
    tmp_path: Path, config: Path
) -> None:
    """The link's own stat and its target's did not change, so its entry stood: still searchable (the target's
    text) after the target's root was removed, and still SKIPPED after the target's folder became a root."""
    one, two = tmp_path / "one", tmp_path / "two"
    target = write_doc(two / "t.md", "roottoken")
    one.mkdir()
    link = one / "l.md"
    link.symlink_to(target)
    with running_agent(tmp_path / "agent.log", str(one), str(two), idle=True):
        assert keyword_hits("roottoken") == [str(link), str(target)]
        ragctl("roots", "remove", str(two))
        ragctl("wait")
        assert keyword_hits("roottoken") == []
        assert "outside the roots" in _skipped(ragctl_json("status"), one)[str(link)]
        ragctl("roots", "add", str(two))
        ragctl("wait")
        assert keyword_hits("roottoken") == [str(link), str(target)]
        assert _skipped(ragctl_json("status"), one) == {}


def test_a_link_whose_target_goes_while_its_first_job_runs_ends_skipped(
    tmp_path: Path, config: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Found by the model-based test (seed 748550650): a link's folder is queued when its target changes only once
    a job there has listed the link. A target renamed away while the link's first job waited for its vectors left
    the link EMBEDDED, its old text in search, and nothing to look at it again: the end of a job looks once more at
    the links it listed."""
    one, two = tmp_path / "one", tmp_path / "two"
    target = write_doc(two / "t.md", "firsttoken")
    one.mkdir()
    with running_agent(tmp_path / "agent.log", str(one), str(two), idle=True):
        fake_openai_server.hold_next(2)  # the target's new text, asked for by its folder's job and the link's
        try:
            _edit_in_place(target, "secondtoken")
            link = one / "l.md"
            link.symlink_to(target)
            poll(lambda: _root(ragctl_json("status"), one)["waiting_files"], 30, what="the link's job")
            target.rename(two / "moved.md")
        finally:
            fake_openai_server.release()
        ragctl("wait")
        assert _skipped(ragctl_json("status"), one) == {str(link): f"dangling symbolic link to {target}"}
        assert keyword_hits("secondtoken") == [str(two / "moved.md")]
        assert ragctl_json("verify")["removed"] == 0
