"""`ragd run --once` through an embeddings API: the slow parts of getting ready overlap the work instead of following
it. The embedder (the openai client's import) gets ready while the first files are parsed, and the index (zvec's
open) while the other directories' files still wait for their vectors."""

from __future__ import annotations

import threading
from pathlib import Path

from ragd.config import Config, data_dir
from ragd.index import collection_dir, open_index
from ragd.pipeline import sidecar
from ragd.pipeline.dirjob import run_directory
from ragd.pipeline.embed import LazyEmbedQueue
from ragd.pipeline.scan import Ignore
from ragd.pipeline.sidecar import CHUNKED
from ragd.resident.jobs import job_context
from ragd.resident.once import RunSummary, run_once
from tests.integration.helpers import api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll


def one_job_at_a_time(server: FakeOpenAI, root: Path) -> Config:
    base = api_config(server, [root], timeout=60)  # a held request stays held: no retry
    return Config.model_validate(
        {**base.model_dump(mode="json", exclude={"source"}), "run": {"jobs": 1, "workers": 0}}
    )


def test_the_embedder_gets_ready_without_a_request(fake_openai_server: FakeOpenAI, tmp_path: Path) -> None:
    queue = LazyEmbedQueue(api_config(fake_openai_server, [tmp_path]).embedding)
    try:
        queue.warm()
        poll(lambda: queue.loaded, what="the embedder to be built by warm()")
        assert fake_openai_server.requests == []
        assert queue.embed(["one text"]).shape == (1, fake_openai_server.dim)
    finally:
        queue.close()


def test_a_file_handed_to_the_parsers_warms_the_embedder(
    fake_openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "a.md").write_text("# A\n\nSome words to embed.\n")
    config = one_job_at_a_time(fake_openai_server, tmp_path)
    queue = LazyEmbedQueue(config.embedding)
    told = []
    ctx = job_context(config, queue.submit, Ignore(config.ignore), warm=lambda: told.append(True))
    try:
        result = run_directory(ctx, tmp_path)
    finally:
        queue.close()
    assert [f.state for f in result.files] == ["EMBEDDED"]
    assert told, "the job never told the embedder that texts were coming"


def test_the_index_opens_while_other_directories_wait_for_the_api(
    fake_openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    root = tmp_path / "kb"
    (root / "later").mkdir(parents=True)
    (root / "first.md").write_text("# First\n\nThe first directory's words.\n")
    (root / "later" / "second.md").write_text("# Second\n\nThe second directory's words.\n")
    config = one_job_at_a_time(fake_openai_server, root)
    collection = collection_dir(data_dir(config), config.identity)
    fake_openai_server.slow_next(1, 0.0)  # the root's request is answered,
    fake_openai_server.hold_next(1)  # the subdirectory's is held until released
    summaries: list[RunSummary] = []
    run = threading.Thread(target=lambda: summaries.append(run_once(config)), daemon=True)
    run.start()
    try:
        poll(lambda: len(fake_openai_server.requests) == 2, what="the second directory's request")
        poll(collection.is_dir, what="the index to be opened while a directory still waits for its vectors")
        assert len(fake_openai_server.requests) == 2  # still held: the second directory's job is not done
        assert sidecar.read_entry(sidecar.entry_path(root / "later", "second.md")).status == CHUNKED
    finally:
        fake_openai_server.release()
        run.join(60)
    assert not run.is_alive()
    summary = summaries[0]
    assert summary.ok and summary.embedded == 2
    assert summary.index["chunks"] == 2 and summary.index["opened"] is True
    idx = open_index(data_dir(config), config.identity, config.index, read_only=True)
    try:
        assert sorted(idx.sources()) == sorted(str(p) for p in root.rglob("*.md"))
    finally:
        idx.close()
