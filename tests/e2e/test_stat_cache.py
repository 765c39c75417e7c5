"""The stat cache through the real `ragd run --once`: unchanged entries are not opened again, and every real
change (to a source or to its entry, by ragd or by another tool, a deleted entry, a damaged or foreign cache) is
still seen. What was opened is watched from outside the process (inotify on the `.rag/` folder)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ragd.config import data_dir, load_config
from ragd.index import collection_dir, open_index
from ragd.index.keyword import keywords
from ragd.pipeline import mushroom, sidecar, statcache
from ragd.vocabulary import FileState, NoteStatus
from tests.e2e.conftest import ragd, ragd_json
from tests.support.opens import OpenWatch
from tests.support.poll import poll

KEEP = ("keep 1.md", "keep 2.md", "keep 3.md")
CHANGES = ("same size.md", "touched.md", "rewritten.md", "replaced.md", "gone.md")


def _tree(root: Path) -> Path:
    root.mkdir()
    for name in (*KEEP, *CHANGES):
        (root / name).write_text(f"# {name}\n\nalpha words of {name} about sidecars.\n")
    return root


def _entry_files(root: Path) -> list[Path]:
    return sorted(sidecar.rag_dir(root).glob("*" + sidecar.ENTRY_SUFFIX))


def _settled(root: Path) -> None:
    """Wait until every entry is older than the cache's racy window, so the next run may cache it."""
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in _entry_files(root))
    poll(
        lambda: time.time_ns() > newest + statcache.RACY_NS + 50_000_000, timeout=10, what="entries to settle"
    )


def _run(root: Path) -> tuple[dict, list[str]]:
    """`ragd run --once --json`, and the entry files it opened."""
    with OpenWatch(sidecar.rag_dir(root)) as seen:
        summary = ragd_json("run", "--once", str(root))
    return summary, [n for n in seen.names() if n.endswith(sidecar.ENTRY_SUFFIX)]


def _cached_tree(tmp_path: Path) -> Path:
    """A tree indexed, then run again once its entries settled, until the cache holds every entry: a run that
    rewrites an entry (a source whose stat was still racy when the first run recorded it is hashed again and its
    entry touched) caches that entry only at the next run."""
    root = _tree(tmp_path / "kb")
    assert ragd_json("run", "--once", str(root))["embedded"] == len(KEEP) + len(CHANGES)
    for _ in range(3):
        _settled(root)
        summary, _ = _run(root)
        assert summary["unchanged"] == len(KEEP) + len(CHANGES)
        cache = statcache.StatCache.load(data_dir())
        if all(cache.get(str(root), n) is not None for n in (*KEEP, *CHANGES)):
            return root
    raise AssertionError(f"the stat cache does not hold every entry of {root} after three settled runs")


def _write_keeping_stat(path: Path, data: bytes) -> None:
    """Rewrite a file in place with bytes of the same length, its mtime put back (only its ctime tells)."""
    st = path.stat()
    assert len(data) == st.st_size
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_unchanged_entries_are_not_opened_and_every_change_is_still_seen(
    tmp_path: Path, api_config_file: Path
) -> None:
    root = _cached_tree(tmp_path)
    summary, opened = _run(root)
    assert summary["unchanged"] == len(KEEP) + len(CHANGES) and summary["embedded"] == 0
    assert opened == []  # every entry came from the cache
    assert summary["index"]["chunks"] == len(KEEP) + len(CHANGES) and summary["index"]["repaired"] == 0

    src = root / "same size.md"  # a source edited to the same size, its mtime put back
    _write_keeping_stat(src, src.read_bytes().replace(b"alpha", b"omega"))
    os.utime(root / "touched.md")  # a touch: same content, new stat
    touched_before = json.loads(sidecar.entry_path(root, "touched.md").read_bytes())["source"]["mtime_ns"]
    rewritten = sidecar.entry_path(root, "rewritten.md")  # another tool rewrote an entry in place
    _write_keeping_stat(rewritten, rewritten.read_bytes().replace(b'"EMBEDDED"', b'"CHUNKING"'))
    replaced = sidecar.entry_path(
        root, "replaced.md"
    )  # ...or replaced one (tmp + rename, like the ragjson tool)
    data = json.loads(replaced.read_bytes())
    data["processing"]["status"] = "INITIAL"
    tmp = sidecar.rag_dir(root) / "tmp" / "replaced.tmp"
    tmp.write_bytes(json.dumps(data).encode())
    os.replace(tmp, replaced)
    sidecar.entry_path(root, "gone.md").unlink()  # an entry deleted

    summary = ragd_json("run", "--once", str(root))
    redone = {"same size.md", "rewritten.md", "replaced.md", "gone.md"}
    assert summary["embedded"] == len(redone) and summary["failed"] == []
    assert summary["unchanged"] == len(KEEP) + 1  # and the touched file
    for name in redone:
        entry = sidecar.read_entry(sidecar.entry_path(root, name))
        assert entry is not None and entry.status == FileState.EMBEDDED, name
    touched = sidecar.read_entry(sidecar.entry_path(root, "touched.md"))
    assert touched is not None and touched.source.mtime_ns == (root / "touched.md").stat().st_mtime_ns
    assert touched.source.mtime_ns != touched_before
    hits = ragd_json("search", "omega", "--mode", "keyword", "-k", "1")["results"]
    assert hits and hits[0]["path"] == str(src)
    assert summary["index"]["chunks"] == len(KEEP) + len(CHANGES)


def _header(head: bytes, **changes: object) -> bytes:
    return json.dumps({**json.loads(head), **changes}, separators=(",", ":")).encode()


def test_a_damaged_or_foreign_cache_is_ignored(tmp_path: Path, api_config_file: Path) -> None:
    root = _cached_tree(tmp_path)
    cache = data_dir() / statcache.FILE_NAME
    everything = sorted(n + sidecar.ENTRY_SUFFIX for n in (*KEEP, *CHANGES))
    good = cache.read_bytes()
    head, _, body = good.partition(b"\n")

    damaged = [
        good[: len(good) // 2],  # truncated
        head + b"\n" + body.replace(b"EMBEDDED", b"CHUNKING", 1),  # changed: its md5 no longer matches
        _header(head, format=99) + b"\n" + body,  # another format
        _header(head, ragd="0.0.1") + b"\n" + body,  # another version of ragd
        b"\0" * len(good),  # garbage
    ]
    for bad in damaged:
        cache.write_bytes(bad)
        summary, opened = _run(root)
        assert summary["unchanged"] == len(KEEP) + len(CHANGES), bad[:80]
        assert sorted(opened) == everything, bad[:80]  # all read again...
        summary, opened = _run(root)
        assert opened == [], bad[:80]  # ...and cached anew


def test_a_run_with_nothing_to_sync_leaves_the_index_closed(tmp_path: Path, api_config_file: Path) -> None:
    root = _tree(tmp_path / "kb")
    files = len(KEEP) + len(CHANGES)
    assert ragd_json("run", "--once", str(root))["index"]["opened"] is True
    again = ragd_json("run", "--once", str(root))["index"]
    assert again["opened"] is False and again["chunks"] == files and again["repaired"] == 0

    cfg = load_config()  # the index changed behind the run's back: opened, checked and repaired
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index)
    assert idx.delete_source(str(root / KEEP[0])) == 1
    idx.flush()
    idx.close()
    changed = ragd_json("run", "--once", str(root))["index"]
    assert changed["opened"] is True and changed["repaired"] == 1 and changed["chunks"] == files
    checked = ragd_json("run", "--once", str(root))[
        "index"
    ]  # a repair is checked once more before it is trusted
    assert checked["opened"] is True and checked["repaired"] == 0
    assert ragd_json("run", "--once", str(root))["index"]["opened"] is False

    mushroom.write(root, [mushroom.Event(KEEP[1], NoteStatus.UPSERT)])  # another producer's change note
    noted = ragd_json("run", "--once", str(root))["index"]
    assert noted["opened"] is True and noted["mushrooms_applied"] == 1 and not mushroom.pending(root)

    collection = collection_dir(data_dir(cfg), cfg.identity)
    shutil.rmtree(
        keywords.place(collection)
    )  # the keyword index lost: opened, and made again from the collection
    assert ragd_json("run", "--once", str(root))["index"]["opened"] is True
    assert ragd_json("run", "--once", str(root))["index"]["opened"] is False
    hits = ragd_json("search", '"keep 1"', "--mode", "keyword", "--path-prefix", str(root))["results"]
    assert [h["path"] for h in hits] == [str(root / KEEP[0])]

    shutil.rmtree(collection)  # the index lost: filled from the sidecars
    lost = ragd_json("run", "--once", str(root))["index"]
    assert lost["opened"] is True and lost["filled"] == files and lost["chunks"] == files
    other = _tree(
        tmp_path / "other"
    )  # another root's run changes the index: the next run of this one opens it
    assert ragd_json("run", "--once", str(other))["index"]["opened"] is True
    assert ragd_json("run", "--once", str(root))["index"]["opened"] is True
    human = ragd("run", "--once", str(root)).stdout
    assert f"index: {2 * files} chunks; 0 change notes applied, 0 sources repaired; nothing to sync" in human
