"""The real `ragd` command in subprocesses: run --once, status, config check, and crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from ragd.pipeline import mushroom, sidecar
from ragd.vocabulary import FileState
from tests.e2e.conftest import RAGD, ragd, ragd_json, write_api_config
from tests.integration.helpers import all_json_valid
from tests.support.fake_openai import FakeOpenAI
from tests.support.interrupt import with_sigint
from tests.support.poll import poll


def _tree(root: Path, n: int = 6) -> Path:
    (root / "sub").mkdir(parents=True)
    for i in range(n):
        (root / ("sub" if i % 2 else "") / f"note {i}.md").write_text(
            f"# Note {i}\n\nSentence {i} about vectors. 第{i}个笔记讲向量检索。\n"
        )
    return root


def test_the_summary_counts_in_the_right_number(tmp_path: Path, api_config_file: Path) -> None:
    root = tmp_path / "one"
    root.mkdir()
    (root / "only.md").write_text("a single short file\n")
    out = ragd("run", "--once", str(root)).stdout
    assert "1 file embedded, 0 unchanged, 0 skipped, 0 failed in 1 directory\n" in out
    assert (
        "1 chunk: 1 embedded, 0 vectors reused;" in out
        and "index: 1 chunk; 1 change note applied, 0 sources" in out
    )


def test_run_once_summary_status_and_exit_codes(tmp_path: Path, api_config_file: Path) -> None:
    root = _tree(tmp_path / "kb")
    out = ragd("run", "--once", str(root))
    assert "6 files embedded, 0 unchanged, 0 skipped, 0 failed in 2 directories" in out.stdout
    assert f"{root}: 3 embedded, 0 skipped, 0 failed, 3 events" in out.stderr  # plain progress, not a TTY
    assert "vectors reused" in out.stdout
    summary = ragd_json("run", "--once", str(root))
    assert summary["embedded"] == 0 and summary["unchanged"] == 6 and summary["failed"] == []
    (root / "bad.txt").write_bytes(b"\x00\x01\x02binary" * 100)
    failed = ragd("run", "--once", str(root), check=1)
    assert "FAILED" in failed.stdout and "bad.txt" in failed.stdout and "binary" in failed.stdout
    st = ragd_json("status", str(root), "-r")
    assert st["counts"] == {"EMBEDDED": 6, "FAILED": 1, "TRACKED": 1}
    bad = next(e for e in st["entries"] if e["path"].endswith("bad.txt"))
    assert bad["state"] == "FAILED" and "binary" in bad["reason"]
    (root / "note 0.md").write_text("changed")
    (root / "new.md").write_text("new")
    (root / "sub" / "note 1.md").unlink()
    st = ragd_json("status", str(root), "-r")
    by_name = {Path(e["path"]).name: e["state"] for e in st["entries"]}
    assert (
        by_name["note 0.md"] == "CHANGED" and by_name["new.md"] == "NEW" and by_name["note 1.md"] == "DELETED"
    )
    one = ragd_json("status", str(root / "new.md"))
    assert [e["state"] for e in one["entries"]] == ["NEW"]


def test_status_takes_several_paths_and_shows_a_links_own_entry(
    tmp_path: Path, api_config_file: Path
) -> None:
    """`ragd status` took one path, and a symbolic link showed its target's entry. It takes several, as `ls A B`
    does (what exists is shown, a missing one is named and the exit code is 2), and a link shows its own entry:
    the one beside it, under the link's name."""
    root = _tree(tmp_path / "kb")
    (root / "link.md").symlink_to("note 0.md")
    ragd("run", "--once", str(root))
    both = ragd_json("status", str(root / "note 2.md"), str(root / "sub"))
    names = sorted(Path(e["path"]).name for e in both["entries"])
    assert names == ["note 1.md", "note 2.md", "note 3.md", "note 5.md"], both
    link = ragd_json("status", str(root / "link.md"))
    assert [e["path"] for e in link["entries"]] == [str(root / "link.md")], link
    text = ragd("status", str(root / "link.md"), str(root / "note 2.md")).stdout
    assert f"{root / 'link.md'}\n" in text and "2 entries" in text, text
    missing = ragd("status", str(root / "nope.md"), str(root / "note 2.md"), check=2)
    assert "nope.md does not exist" in missing.stderr and "note 2.md" in missing.stdout


def test_usage_errors(tmp_path: Path, api_config_file: Path) -> None:
    missing = ragd("run", "--once", str(tmp_path / "nope"), check=2)
    assert "nope does not exist" in missing.stderr
    assert "no roots" in ragd("run", "--once", check=2).stderr


def test_config_check_redacts_and_broken_config_names_key(tmp_path: Path, api_config_file: Path) -> None:
    data = ragd_json("config", "check")
    assert data["embedding"]["api_key"] == "***" and data["embedding"]["model"] == "fake-embed-8"
    assert "sk-e2e-secret" not in ragd("config", "check").stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[splitter]\nchunk_size = 'big'\n")
    err = ragd("--config", str(bad), "config", "check", check=2).stderr
    assert "splitter.chunk_size" in err and str(bad) in err


def test_default_local_model_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "phone.md").write_text("# 小米 15 Pro\n\n小米 15 Pro 的电池容量是 6100mAh，支持 90W 快充。\n")
    (root / "ml.txt").write_text("Backpropagation computes gradients layer by layer.\n")
    summary = ragd_json("run", "--once", str(root))
    assert summary["embedded"] == 2
    e = sidecar.read_entry(sidecar.entry_path(root, "phone.md"))
    assert e is not None and e.model_name == "use-multilingual-v3" and e.dimension == 512
    assert e.chunks[0].vector is not None and e.chunks[0].vector.shape == (512,)


def _four_dirs(root: Path, files: int) -> Path:
    """d0..d3 under `root`, `files` markdown files each, long enough to take one embedding request per chunk."""
    for d in range(4):
        (root / f"d{d}").mkdir(parents=True)
        for i in range(files):
            (root / f"d{d}" / f"f{i}.md").write_text(f"# File {d}/{i}\n\n" + f"Line {i} of dir {d}. " * 40)
    return root


@pytest.mark.slow
def test_sigkill_mid_run_then_next_run_converges(tmp_path: Path) -> None:
    root = _four_dirs(tmp_path / "kb", files=12)
    with FakeOpenAI(dim=8, delay=0.05) as server:
        cfg = write_api_config(tmp_path / "c.toml", server, batch_size=1, concurrency=1)
        env = {**os.environ, "RAGD_CONFIG": str(cfg)}
        proc = subprocess.Popen(
            [*RAGD, "run", "--once", "-j", "4", str(root)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        poll(lambda: len(list(root.rglob("*.md.ragjson"))) >= 10, timeout=60, every=0.02, what="10 sidecars")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done_before = len(list(root.rglob("*.md.ragjson")))
        assert 0 < done_before < 48, "the kill should land mid-run"
        all_json_valid(root)  # only valid JSON was left behind
        # mushrooms complete: every file the killed run touched is announced by the notes it left
        touched = {
            str(p.parent.parent / p.name.removesuffix(".ragjson")) for p in root.rglob("f*.md.ragjson")
        }
        assert touched <= _announced(root)
        server.delay = 0
        out = ragd("run", "--once", str(root), env=env)
    assert "0 failed" in out.stdout and "change notes FAILED" not in out.stdout
    all_json_valid(root)
    files = sorted(root.rglob("f*.md"))
    for f in files:
        e = sidecar.read_entry(sidecar.entry_path(f.parent, f.name))
        assert e is not None and e.status == FileState.EMBEDDED and all(c.vector_base64 for c in e.chunks)
    assert not [p for p in root.rglob("*.tmp")]  # debris gone
    assert not list(root.rglob("*.mushroom"))  # every note applied to the index
    again = json.loads(ragd("run", "--once", str(root), "--json", env=env).stdout)
    assert again["embedded"] == 0 and again["unchanged"] == 48  # each file embedded once
    assert again["index"]["chunks"] == sum(
        len(sidecar.read_entry(sidecar.entry_path(f.parent, f.name)).chunks)  # type: ignore[union-attr]
        for f in files
    )


def _chunks_in_sidecars(root: Path) -> int:
    return sum(
        len(e.chunks)
        for p in root.rglob("*.md")
        if (e := sidecar.read_entry(sidecar.entry_path(p.parent, p.name)))
    )


def _big(root: Path, n: int) -> Path:
    (root / "big").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / "big" / f"n{i}.md").write_text(f"# Note {i}\n\nbignote{i} is here.\n")
    return root / "big"


def test_a_big_folders_files_reach_the_index_in_rounds_while_the_run_goes_on(
    tmp_path: Path, api_config_file: Path
) -> None:
    """The index is opened once texts are embedded, and each finished round of a big folder's files (and each
    finished folder) is applied then, not all at the end: a change note per round, none left, nothing repaired."""
    root = _four_dirs(tmp_path / "kb", files=3)
    _big(root, 150)
    summary = ragd_json("run", "--once", str(root))
    assert summary["embedded"] == 162 and summary["failed"] == []
    index = summary["index"]
    # rounds of 64 files: more notes than folders (5 before: one a folder)
    assert index["mushrooms_applied"] >= 7, index
    assert index["repaired"] == 0 and index["filled"] == 0 and index["mushrooms_failed"] == []
    assert index["chunks"] == _chunks_in_sidecars(root)
    assert not list(root.rglob("*.mushroom"))
    hits = ragd_json("search", "bignote149", "--mode", "keyword", "-k", "3")
    assert [Path(h["path"]).name for h in hits["results"]][:1] == ["n149.md"]


@pytest.mark.slow
def test_sigkill_after_a_round_was_applied_then_the_next_run_converges_without_repairs(
    tmp_path: Path,
) -> None:
    root = tmp_path / "kb"
    notes = _big(root, 200) / ".rag"

    def round_applied() -> bool:
        # a file of the second round embedded: the first round's note was written before (dirjob.py); only the
        # job's planned note left on disk: that round's note was applied, then deleted
        embedded = [
            p for p in notes.glob("n*.md.ragjson") if (e := sidecar.try_read(p)) and e.status == "EMBEDDED"
        ]
        return len(embedded) > 64 and len(list(notes.glob("*.mushroom"))) == 1

    with FakeOpenAI(dim=8, delay=0.05) as server:
        cfg = write_api_config(tmp_path / "c.toml", server, batch_size=2, concurrency=1)
        env = {**os.environ, "RAGD_CONFIG": str(cfg)}
        proc = subprocess.Popen([*RAGD, "run", "--once", str(root)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            poll(round_applied, timeout=120, every=0.05, what="a round applied")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        embedded = [
            p for p in notes.glob("n*.md.ragjson") if (e := sidecar.try_read(p)) and e.status == "EMBEDDED"
        ]
        assert len(embedded) < 200, "the kill should land mid-run"
        # the applied round is in the index: the killed run had flushed it before deleting its note
        hits = json.loads(ragd("search", "here", "--mode", "keyword", "-k", "100", "--json", env=env).stdout)
        assert len(hits["results"]) >= 64, hits
        server.delay = 0
        out = json.loads(ragd("run", "--once", "--json", str(root), env=env).stdout)
    assert out["embedded"] + out["unchanged"] == 200 and out["failed"] == []
    assert out["index"]["repaired"] == 0 and out["index"]["filled"] == 0, out["index"]
    assert out["index"]["chunks"] == _chunks_in_sidecars(root)
    assert not list(root.rglob("*.mushroom"))


def _announced(root: Path) -> set[str]:
    out = set()
    for p in root.rglob("*.mushroom"):
        for ev in mushroom.read(p).events:
            out.add(str(p.parent.parent / ev.file))
    return out


def test_progress_bar_on_a_terminal(tmp_path: Path, api_config_file: Path) -> None:
    import pty

    root = _tree(tmp_path / "kb")
    master, slave = pty.openpty()
    proc = subprocess.Popen([*RAGD, "run", "--once", str(root)], stdout=subprocess.PIPE, stderr=slave,
                            env=os.environ.copy())  # fmt: skip
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    screen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    assert proc.returncode == 0 and b"6 files embedded" in out
    text = screen.decode("utf-8", "replace")
    assert "\r[" in text and "] 2/2 dirs  6 embedded" in text  # one redrawn bar line


def _blocked(root: Path, name: str) -> Path:
    """A directory whose job fails as a whole: its `.rag` is a regular file, so no store can be made (root, which
    the tests run as, cannot bypass that the way it bypasses a read-only directory)."""
    blocked = root / name
    blocked.mkdir()
    (blocked / "inside.md").write_text("# Inside\n\nNever indexed while its store is blocked.\n")
    (blocked / ".rag").write_text("not a store")
    return blocked


def test_a_directory_whose_job_fails_is_reported_and_the_others_are_indexed(
    tmp_path: Path, api_config_file: Path
) -> None:
    root = _tree(tmp_path / "kb")
    blocked = _blocked(root, "blocked")
    summary = ragd_json("run", "--once", str(root), check=1)
    assert summary["dirs"] == 3 and summary["embedded"] == 6 and summary["failed"] == []
    assert [d["path"] for d in summary["failed_dirs"]] == [str(blocked)]
    reason = summary["failed_dirs"][0]["reason"]
    assert f"cannot lock {blocked / '.rag' / 'tmp'}" in reason and "Not a directory" in reason
    assert summary["index"]["chunks"] > 0 and summary["index"]["mushrooms_failed"] == []
    again = ragd("run", "--once", str(root), check=1)  # recorded again, not forgotten; the rest is unchanged
    assert "0 files embedded, 6 unchanged, 0 skipped, 0 failed in 3 directories" in again.stdout
    assert f"FAILED directory {blocked}: cannot lock" in again.stdout
    assert f"job for {blocked} failed: cannot lock" in again.stderr
    (blocked / ".rag").unlink()
    fixed = ragd_json("run", "--once", str(root))
    assert fixed["embedded"] == 1 and fixed["failed_dirs"] == []


def test_the_progress_bar_ends_with_the_last_directory_even_when_its_job_fails(
    tmp_path: Path, api_config_file: Path
) -> None:
    """The bar hears of every outcome: a failed directory finishing last still completes it (3/3, then a newline)."""
    import pty

    root = _tree(tmp_path / "kb")
    _blocked(root, "zz")  # walked last; with one job at a time, it finishes last
    master, slave = pty.openpty()
    proc = subprocess.Popen([*RAGD, "run", "--once", "-j", "1", str(root)], stdout=subprocess.PIPE, stderr=slave,
                            env=os.environ.copy())  # fmt: skip
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    screen = _read_all(master)
    assert proc.returncode == 1 and b"6 files embedded" in out and b"FAILED directory" in out
    assert "] 3/3 dirs  6 embedded  0 unchanged  0 skipped  0 failed\r\n" in screen


def _read_all(fd: int) -> str:
    screen = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    os.close(fd)
    return screen.decode("utf-8", "replace")


@pytest.mark.slow
def test_ctrl_c_finishes_the_directories_under_way_and_starts_no_other(tmp_path: Path) -> None:
    """Interrupted, `run --once` lets the running job end cleanly (its files embedded, none FAILED for the
    embedder closing under them) and exits 130 without working through every queued directory first."""
    root = _four_dirs(tmp_path / "kb", files=2)
    # d0's job outlasts the signal's way to the agent by seconds, even on a loaded machine
    for i in range(2, 16):
        (root / "d0" / f"f{i}.md").write_text(f"# File 0/{i}\n\n" + f"Line {i} of dir 0. " * 40)
    with FakeOpenAI(dim=8, delay=0.5) as server:
        cfg = write_api_config(tmp_path / "c.toml", server, batch_size=1, concurrency=1)
        env = {**os.environ, "RAGD_CONFIG": str(cfg)}
        proc = subprocess.Popen(with_sigint([*RAGD, "run", "--once", "-j", "1", str(root)]), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        # d0's first text at the embeddings API: its job is under way, 15 files (7.5 s) still to embed (a first
        # sidecar came too late under load: once as d0 ended, and d1 had started before the signal was handled)
        poll(lambda: server.requests, timeout=60, every=0.02, what="a first embeddings request")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted: finishing the directories under way" in err
    states = {
        p: e.status
        for p in root.rglob("f*.md")
        if (e := sidecar.try_read(sidecar.entry_path(p.parent, p.name))) is not None
    }
    assert set(states.values()) == {FileState.EMBEDDED}  # the job under way ended cleanly
    assert {p.parent.name for p in states} == {"d0"}, err  # and no other started


def test_a_new_index_is_filled_from_the_sidecars_not_repaired(tmp_path: Path, api_config_file: Path) -> None:
    """A new collection (a new index schema after an upgrade, or another data directory) over sidecars made
    before: its sources are filled in, and not reported as repairs (which say the index had gone wrong)."""
    root = _tree(tmp_path / "kb", 4)
    ragd("run", "--once", str(root))
    env = {**os.environ, "RAGD_DATA_DIR": str(tmp_path / "another-data-dir")}
    out = ragd("run", "--once", str(root), env=env).stdout
    assert "0 files embedded, 4 unchanged" in out
    assert "index: 4 chunks; 0 change notes applied, 0 sources repaired; a new index, filled from the sidecars " \
           "(4 sources)" in out, out  # fmt: skip
    again = ragd("run", "--once", str(root), env=env).stdout
    assert "0 sources repaired\n" in again and "filled" not in again
