"""Sidecars -> mushrooms -> zvec index, kept exactly equal; known-answer search on the bilingual corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragd.config import Config, data_dir
from ragd.index import IndexBackend, open_index
from ragd.index.backend import IndexChunk, SourceWrite
from ragd.index.query.search import SearchService
from ragd.index.query.searchquery import SearchQuery
from ragd.index.write.sync import IndexSync
from ragd.pipeline import mushroom
from ragd.pipeline.scan import Ignore, walk_dirs
from tests.conftest import DATA
from tests.integration.helpers import api_config, copy_fixture, run
from tests.support.fake_openai import FakeOpenAI

BILINGUAL = DATA / "bilingual"


def _open(cfg: Config) -> IndexBackend:
    return open_index(data_dir(cfg), cfg.identity, cfg.index)


def assert_index_equals_sidecars(cfg: Config, root: Path) -> None:
    """Every EMBEDDED source is indexed with its md5 and chunk count, and nothing else is."""
    idx = _open(cfg)
    try:
        sync = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore))
        expected = sync.expected(walk_dirs(root, Ignore(cfg.ignore)))
        indexed = idx.sources(str(root))
        assert set(indexed) == set(expected)
        for path, want in expected.items():
            assert (indexed[path].source_md5, indexed[path].chunk_count) == (
                want.source_md5,
                want.chunk_count,
            )
        assert sync.orphans(root) == []
        on_disk = {str(p) for p in root.rglob("*") if p.is_file() and ".rag" not in p.parts}
        assert set(indexed) <= on_disk
    finally:
        idx.close()


def test_index_follows_every_kind_of_change(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    (root / "a" / "deep").mkdir(parents=True)
    (root / "ab").mkdir()
    for d in ("a", "a/deep", "ab", "."):
        for i in range(3):
            (root / d / f"n{i}.md").write_text(f"# {d} {i}\n\nBody of note {i} in {d}. 第{i}篇。")
    cfg = api_config(fake_openai_server, [root])
    steps = [
        lambda: None,
        lambda: (root / "a" / "n0.md").write_text("# edited\n\nNew body entirely."),  # edit
        lambda: (root / "a" / "n1.md").rename(root / "a" / "renamed.md"),  # rename
        lambda: (root / "ab" / "n2.md").unlink(),  # delete
        lambda: shutil.move(root / "a" / "deep", tmp_path / "deep.away"),  # directory delete
        lambda: shutil.move(tmp_path / "deep.away", root / "a" / "deep"),  # directory recover
        lambda: shutil.move(root / "ab", root / "a" / "ab-moved"),  # directory move
        lambda: (root / "junk.md").write_bytes(b"\x00\xff" * 100),  # a failing file is not indexed
    ]
    for step in steps:
        step()
        s = run(cfg)
        assert s.index.get("mushrooms_failed") == []
        assert not list(mushroom.walk_pending(walk_dirs(root, Ignore(cfg.ignore))))  # all consumed
        assert_index_equals_sidecars(cfg, root)


def test_odd_names_and_prefix_directories(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    names = [
        "q \"double\" 'single'.md",
        "back\\slash.md",
        "50%.md",
        "under_score.md",
        "中文.md",
        "emoji 🍄.md",
    ]
    for d in ("a", "ab", "a_b", "axb", "50%", "50x"):
        (root / d).mkdir(parents=True)
        for n in names:
            (root / d / n).write_text(f"# {d}/{n}\n\nshared words about lighthouses in {d}")
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).ok
    assert_index_equals_sidecars(cfg, root)
    idx = _open(cfg)
    try:
        service = SearchService(idx, lambda q: fake_openai_server.vector(q), [root])
        for d, others in (("a", ("ab", "a_b", "axb")), ("a_b", ("axb", "ab")), ("50%", ("50x",))):
            got = service.search(
                SearchQuery(query="lighthouses", top_k=50, mode="keyword", path_prefix=(str(root / d),))
            )
            assert got and {Path(r.path).parent.name for r in got} == {d}, (d, others)
            assert {Path(r.path).name for r in got} == set(names)
        idx.delete_subtree(str(root / "a"))
        left = {Path(p).parent.name for p in idx.sources(str(root))}
        assert left == {"ab", "a_b", "axb", "50%", "50x"}
    finally:
        idx.close()


def test_ragjson_tool_mushrooms_are_consumed(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    tree = copy_fixture(tmp_path)
    cfg = api_config(fake_openai_server, [tree])
    s = run(cfg)
    assert s.index["mushrooms_applied"] == 3 and fake_openai_server.requests == []
    assert list(tree.rglob("*.mushroom")) == []
    idx = _open(cfg)
    try:
        assert set(idx.sources()) == {str(tree / "docs" / "ml.txt"), str(tree / "docs" / "phone.md"),
                                      str(tree / "docs" / "sub" / "page.html")}  # fmt: skip
    finally:
        idx.close()


def test_missing_index_is_rebuilt_from_sidecars(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(5):
        (root / f"{i}.md").write_text(f"note {i}")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    shutil.rmtree(data_dir(cfg) / "index")
    s = run(cfg)
    assert s.index["filled"] == 5 and s.index["repaired"] == 0 and s.texts_embedded == 0
    assert_index_equals_sidecars(cfg, root)


@pytest.fixture(scope="module")
def bilingual_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, Path]:
    """The bilingual corpus indexed once with the real bundled model."""
    base = tmp_path_factory.mktemp("bilingual")
    root = base / "corpus"
    shutil.copytree(BILINGUAL / "corpus", root)
    cfg = Config.model_validate({"roots": [str(root)], "data_dir": str(base / "data")})
    s = run(cfg)
    assert s.ok and s.embedded == len([p for p in root.rglob("*") if p.is_file() and ".rag" not in p.parts])
    return cfg, root


def _ranks(cfg: Config, root: Path, mode: str) -> dict[str, int | None]:
    from ragd.pipeline.embed import make_embedder

    queries = json.loads((BILINGUAL / "queries.json").read_text())
    embedder = make_embedder(cfg.embedding)
    idx = open_index(data_dir(cfg), cfg.identity, cfg.index, read_only=True)
    try:
        service = SearchService(idx, lambda q: embedder.embed([q])[0], [root])
        out: dict[str, int | None] = {}
        for q in queries:
            files = [
                r.rel_path
                for r in service.search(SearchQuery(query=q["query"], mode=mode, one_per_file=True))
            ]
            out[q["query"]] = files.index(q["answer"]) + 1 if q["answer"] in files else None
        return out
    finally:
        idx.close()


def test_known_answers_hybrid_beats_each_mode_alone(bilingual_index: tuple[Config, Path]) -> None:
    cfg, root = bilingual_index
    hybrid = _ranks(cfg, root, "hybrid")
    vector = _ranks(cfg, root, "vector")
    keyword = _ranks(cfg, root, "keyword")
    missing = [q for q, r in hybrid.items() if r is None]
    assert missing == [], f"hybrid missed {missing}"

    def found(r: dict[str, int | None]) -> int:
        return sum(v is not None for v in r.values())

    assert found(hybrid) >= found(vector) and found(hybrid) >= found(keyword)
    mrr = {name: sum(1 / v for v in r.values() if v) for name, r in
           (("hybrid", hybrid), ("vector", vector), ("keyword", keyword))}  # fmt: skip
    assert mrr["hybrid"] >= max(mrr["vector"], mrr["keyword"]) * 0.95, mrr


def test_a_note_naming_a_file_that_is_not_utf8_is_applied_without_it(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Another producer's note may name such a file (JSON escapes a lone surrogate): the index cannot hold the name,
    so that event is left out and the note's other events are applied (it failed, and was retried, forever)."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "good.md").write_text("a good file about wombats\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    note = root / ".rag" / "20261201T095411Z.mushroom"
    note.write_text(
        '{"file": "caf\\udce9.txt", "status": "delete"}\n{"file": "good.md", "status": "upsert"}\n'
    )
    idx = _open(cfg)
    try:
        report = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)).apply_batch([note])
        assert report.failed == [] and report.events == 2
        assert not note.exists() and set(idx.sources()) == {str(root / "good.md")}
    finally:
        idx.close()


def test_a_note_applied_after_its_root_was_removed_indexes_nothing(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A job still running when its root is removed hands its note over afterwards: the source is outside every
    root, so it must leave the index, not enter it (it stayed there for good, found by search and by nothing
    else)."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "late.md").write_text("a late file about numbats\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg, index=False)
    notes = mushroom.pending(root)
    assert notes
    idx = _open(cfg)
    try:
        report = IndexSync(idx, cfg.identity, [], Ignore(cfg.ignore)).apply_batch(notes)  # no root any more
        assert report.failed == [] and idx.sources() == {}
    finally:
        idx.close()


def test_a_note_whose_folder_was_deleted_before_it_was_applied_is_gone_not_failed(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """Another producer makes `new/.rag/` and drops a note; the folder is deleted before the writer reaches it. The
    note went with its folder: nothing to apply, nothing to retry (it was reported as a failed note, 'cannot lock
    new/.rag/tmp', and `ragctl wait` returned while its retry was due; found by the model-based soak)."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "kept.md").write_text("a kept file about quokkas\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    folder = root / "new"
    (folder / ".rag").mkdir(parents=True)  # the producer's store: no `tmp/` of ours yet
    note = folder / ".rag" / "20261201T101136Z.mushroom"
    note.write_text('{"file": "ghost.md", "status": "upsert"}\n')
    here = folder / ".rag" / "20261201T101137Z.mushroom"
    here.write_text('{"file": "ghost.md", "status": "delete"}\n')
    shutil.rmtree(folder)
    kept = root / "also" / ".rag"
    kept.mkdir(parents=True)  # a folder that stays, its store made by the producer too: applied
    note_kept = kept / "20261201T101138Z.mushroom"
    note_kept.write_text('{"file": "ghost.md", "status": "delete"}\n')
    idx = _open(cfg)
    try:
        report = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)).apply_batch([note, here, note_kept])
        assert report.failed == [] and report.mushrooms == 1
        assert not note_kept.exists() and set(idx.sources()) == {str(root / "kept.md")}
    finally:
        idx.close()


def test_a_note_applied_while_its_file_is_away_for_a_moment_leaves_it_searchable(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A git checkout deletes a file and writes it again with the same text. A change note applied in between (here
    another producer's) must not drop the source: the file comes back with the text its sidecar holds, its folder's
    job records only the new stat, with no change note, and the index lost it for good (found by the model-based
    test: `verify` repaired it at a quiet point)."""
    root = tmp_path / "kb"
    root.mkdir()
    doc = root / "a.md"
    text = "a note about bilbies and their burrows\n"
    doc.write_text(text)
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    doc.unlink()  # the checkout's delete ...
    note = root / ".rag" / "20261204T210927Z.mushroom"
    note.write_text('{"file": "a.md", "status": "delete"}\n')
    idx = _open(cfg)
    try:
        report = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)).apply_batch([note])
        assert report.failed == [] and set(idx.sources()) == {str(doc)}
    finally:
        idx.close()
    doc.write_text(text)  # ... and its write of the same text: a new inode, a new mtime
    s = run(cfg)
    assert s.index.get("mushrooms_failed") == []
    assert_index_equals_sidecars(cfg, root)
    doc.unlink()  # gone for good: its folder's job records the deletion, and its note removes it
    run(cfg)
    assert_index_equals_sidecars(cfg, root)
    idx = _open(cfg)
    try:
        assert idx.sources() == {}
    finally:
        idx.close()


def test_a_late_note_of_a_folder_replaced_by_a_file_leaves_the_file_in_search(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A folder `d` replaced by a file `d`: a note naming the folder (its recovery or its deletion) applied after
    the file's (a note that failed, retried once the index was rebuilt under it) must not take the file out of
    the index: the folder's events touch what is below `d/`, not `d`. Found by the model-based test (the data
    directory deleted while a job ran: `verify` repaired the file)."""
    root = tmp_path / "kb"
    (root / "d").mkdir(parents=True)
    (root / "d" / "x.md").write_text("a note about wombats in the old folder\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    shutil.rmtree(root / "d")
    (root / "d").write_text("a file about echidnas where the folder was\n")
    run(cfg)
    assert_index_equals_sidecars(cfg, root)
    late = []
    for i, status in enumerate(("dir_recover", "dir_delete")):
        late.append(root / ".rag" / f"20261205T16325{i}Z.mushroom")
        late[-1].write_text(json.dumps({"file": "d", "status": status}) + "\n")
    idx = _open(cfg)
    try:
        stale = str(root / "d") + "/x.md"  # the old folder's file, left in the index: the notes remove it
        vector = np.ones(cfg.identity.dimension, dtype=np.float32) / np.sqrt(cfg.identity.dimension)
        old = IndexChunk(stale, 0, "wombats", "h", "", vector)
        idx.write_sources([SourceWrite(stale, "m", str(root), [old])])
        report = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore)).apply_batch(late)
        assert report.failed == [] and set(idx.sources()) == {str(root / "d")}
        service = SearchService(idx, lambda q: fake_openai_server.vector(q), [root])
        got = service.search(SearchQuery(query="echidnas", top_k=5, mode="keyword"))
        assert [r.path for r in got] == [str(root / "d")]
    finally:
        idx.close()
    assert_index_equals_sidecars(cfg, root)


def test_notes_applied_in_a_folder_replaced_by_a_file_before_their_flush_do_not_stop_the_others(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The writer applies notes, and deletes them only after the index's next flush; a folder of theirs replaced by
    a file of the same name meanwhile made the deletion raise NotADirectoryError, and every later flush failed on it
    (the notes of every folder left on disk, the agent busy for good; found by the model-based test)."""
    root = tmp_path / "kb"
    for d in ("d", "e"):
        (root / d).mkdir(parents=True)
        (root / d / "x.md").write_text(f"a note about quolls in {d}\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg, index=False)
    notes = [*mushroom.pending(root / "d"), *mushroom.pending(root / "e")]
    assert len(notes) == 2
    idx = _open(cfg)
    try:
        sync = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore))
        report = sync.apply_batch(notes, flush=False)
        assert report.failed == [] and report.applied == notes
        shutil.rmtree(root / "d")
        (root / "d").write_text("the folder is a file now\n")
        sync.flushed(report.applied)
        assert not notes[1].exists()
        assert set(idx.sources()) == {str(root / d / "x.md") for d in ("d", "e")}
    finally:
        idx.close()


def _strip_lead(root: Path, name: str) -> None:
    """The entry as a ragd from before leads wrote it."""
    path = root / ".rag" / f"{name}.ragjson"
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["lead"]
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_a_documents_lead_is_embedded_with_it_and_held_by_each_of_its_chunks(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """The lead (title and first prose) goes to the embedder with the file's chunks, into its entry, and onto each
    of its chunks in the index. An entry of an earlier ragd (no lead) gets one at the next run: one text embedded,
    its chunks and their vectors as they were; when the embedder fails then, the entry stays EMBEDDED and served."""
    from ragd.index.records import decode_lead
    from ragd.pipeline.lead import lead_text
    from tests.integration.helpers import entry

    root = tmp_path / "kb"
    root.mkdir()
    body = "".join(
        f"## Part {i}\n\nSection {i} of the manual, 第{i}节。 " + "more words " * 60 + "\n\n"
        for i in range(6)
    )
    (root / "guide.md").write_text("# Backup guide\n\nHow to back up a laptop to a USB disk.\n\n" + body)
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).ok
    first = entry(root, "guide.md")
    assert first.lead is not None and first.lead.vector is not None
    assert first.lead.content == lead_text(first.chunks[0].meta["header"], [c.content for c in first.chunks])
    assert first.lead.content.startswith("Backup guide\nHow to back up a laptop to a USB disk.")
    assert fake_openai_server.texts[-1] == first.lead.content  # one request: the chunks, then the lead
    idx = _open(cfg)
    try:
        held = idx.chunks(str(root / "guide.md"))
        assert len(held) == len(first.chunks) > 3
        want = first.lead.vector / np.linalg.norm(first.lead.vector)
        for hit in held:
            lead = decode_lead(hit.lead, 8)
            assert lead is not None and float(lead @ want) > 0.999
    finally:
        idx.close()

    _strip_lead(root, "guide.md")
    sent = len(fake_openai_server.texts)
    summary = run(cfg)
    assert summary.ok and summary.leads == 1 and summary.embedded == 0 and summary.texts_embedded == 0
    again = entry(root, "guide.md")
    assert fake_openai_server.texts[sent:] == [first.lead.content]  # the lead alone: no chunk embedded again
    assert again.lead == first.lead and again.chunks == first.chunks and again.status == "EMBEDDED"
    idx = _open(cfg)
    try:
        assert all(h.lead for h in idx.chunks(str(root / "guide.md")))
    finally:
        idx.close()

    _strip_lead(root, "guide.md")
    fake_openai_server.fail_next(20, status=500)
    run(cfg)
    kept = entry(root, "guide.md")
    assert (
        kept.status == "EMBEDDED" and kept.lead is None and kept.chunks == first.chunks and kept.error is None
    )
    assert_index_equals_sidecars(cfg, root)  # still served, without a lead until the next job


def test_a_note_in_a_folder_that_cannot_be_read_waits_and_fails_nothing() -> None:
    """Found by the model-based test (seed 3092366387): a folder made unreadable (chmod 000) while its change note
    waited for the index writer failed the whole batch the note was in (its stat raised PermissionError), and the
    writer's retry died on the same stat. The note now waits on disk and the batch's other notes are applied. Run
    where the process really cannot read the folder: as root, in a forked child that drops to `nobody`."""
    import os
    import pwd
    import tempfile

    from tests.integration.test_dirjob_odd import _in_child

    as_nobody = os.geteuid() == 0
    nobody = pwd.getpwnam("nobody")
    base = Path(
        tempfile.mkdtemp(prefix="ragd-note-perm-")
    )  # not under pytest's 0700 tmp dir: nobody must get in
    try:
        kb, sub = base / "kb", base / "kb" / "sub"
        for d in (kb, sub):
            (d / ".rag" / "tmp").mkdir(parents=True)
        readable = mushroom.write(kb, [mushroom.Event("gone.md", "delete")])
        waiting = mushroom.write(sub, [mushroom.Event("gone.md", "delete")])
        assert readable is not None and waiting is not None
        for d, _dirs, files in os.walk(base) if as_nobody else ():
            for path in (d, *(os.path.join(d, f) for f in files)):
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
        sub.chmod(0o000)

        def apply() -> dict[str, object]:
            os.environ["RAGD_DATA_DIR"] = str(base / "data")  # the child's own: nobody writes the index there
            cfg = Config()
            idx = _open(cfg)
            try:
                report = IndexSync(idx, cfg.identity, [kb], Ignore(cfg.ignore)).apply_batch(
                    [readable, waiting]
                )
            finally:
                idx.close()
            return {"failed": [str(p) for p, _ in report.failed], "mushrooms": report.mushrooms}

        result = _in_child(apply, as_nobody=as_nobody)
        assert result == {"failed": [], "mushrooms": 1}, result
        assert not readable.exists()
        sub.chmod(0o755)
        assert waiting.exists()  # it waits on disk, applied once its folder can be read
    finally:
        for d, dirs, _files in os.walk(base):
            for name in dirs:
                os.chmod(os.path.join(d, name), 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_pruning_a_folder_drops_only_the_sources_whose_file_and_sidecar_are_both_gone(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """`prune_gone`, for a folder found with no store: a source whose file is there (its `.rag/` deleted alone:
    its job embeds it again) or whose sidecar is there (its job records the deletion) stays; one with neither, in
    the folder or below it, goes; the folder's neighbours are not looked at."""
    root = tmp_path / "kb"
    for rel in ("sub/kept-file.md", "sub/kept-entry.md", "sub/gone.md", "sub/deep/gone.md", "sub2/other.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"a note named {rel}\n")
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    sub = root / "sub"
    shutil.rmtree(sub / ".rag")  # kept-file.md stays without its sidecar
    (sub / "kept-entry.md").unlink()  # its sidecar stays without its file
    (sub / "gone.md").unlink()
    shutil.rmtree(sub / "deep")
    (sub / ".rag").mkdir()
    (sub / ".rag" / "kept-entry.md.ragjson").write_text("{}")
    (root / "sub2" / "other.md").unlink()  # not below the folder pruned: its own job's
    idx = _open(cfg)
    try:
        sync = IndexSync(idx, cfg.identity, [root], Ignore(cfg.ignore))
        assert sync.prune_gone(sub) == 2
        assert set(idx.sources()) == {
            str(sub / "kept-file.md"),
            str(sub / "kept-entry.md"),
            str(root / "sub2" / "other.md"),
        }
        assert sync.prune_gone(sub) == 0
    finally:
        idx.close()


def test_a_folder_moved_in_with_a_note_left_in_it_is_indexed_whole(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    """A folder moved out of every root before its last change note was deleted (the writer flushes a moment
    later), then moved back in under another name: the note names one of its files, not the others. A folder with
    notes pending was taken for one its own first job fills (which names every file it writes), so nothing
    re-synced it, and its other files stayed out of the index until the verification repaired them (found by the
    soak, seed 2735582741). It is re-synced whole; a folder whose notes name all its entries is not."""
    root, away = tmp_path / "kb", tmp_path / "away"
    for name in ("x/a.md", "x/b.md", "top.md"):  # (top.md: the index is never empty, never filled anew)
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"a note about {name} and lighthouses\n")
    away.mkdir()
    cfg = api_config(fake_openai_server, [root])
    run(cfg)
    (root / "x").rename(away / "x")
    run(cfg)  # x leaves the index
    mushroom.write(away / "x", [mushroom.Event("b.md", "upsert")])  # the note left behind
    (away / "x").rename(root / "y")
    summary = run(cfg)
    assert summary.index.get("repaired") == 0, summary.index
    assert_index_equals_sidecars(cfg, root)
    idx = _open(cfg)
    try:
        assert set(idx.sources()) == {str(root / name) for name in ("y/a.md", "y/b.md", "top.md")}
    finally:
        idx.close()
