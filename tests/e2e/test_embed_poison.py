"""A poisoned vector under the real agent: the API answers a zero or NaN vector for one file's chunk, in a request
shared with its neighbours. That file is FAILED with the reason and a retry time, no unusable vector reaches its sidecar, and
every other file of the directory is indexed and found; once the API is sane, a forced sync embeds it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragd.pipeline import sidecar
from ragd.vocabulary import FileState
from tests.e2e.agent import AgentProcess, keyword_hits, ragctl, ragctl_json, running_agent
from tests.e2e.conftest import write_api_config
from tests.support.fake_openai import FakeOpenAI
from tests.support.poll import poll

WORDS = ["alphorn", "bassoon", "celesta", "didgeridoo", "euphonium"]
POISONED = "celesta.md"
MARKER = "poisonpill"


def _vectors_usable(entry: sidecar.FileEntry) -> bool:
    """No chunk of `entry` holds a zero or non-finite vector (a chunk not embedded has none)."""
    for chunk in entry.chunks:
        if chunk.vector_base64 is not None:
            v = sidecar.decode_vector(chunk.vector_base64)
            if not np.isfinite(v).all() or not np.linalg.norm(v) > 0:
                return False
    return True


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "band").mkdir(parents=True)
    for word in WORDS:
        extra = f" It also says {MARKER}." if f"{word}.md" == POISONED else ""
        (root / "band" / f"{word}.md").write_text(f"# {word}\n\nThe instrument {word} plays here.{extra}\n")
    return root


KINDS = {"zero": "a zero vector", "nan": "a non-finite (NaN or infinite) vector"}
# ... of the poisoned file's two texts, its chunk and its lead (both hold the marker)
BOTH = {"zero": "2 zero vectors", "nan": "2 non-finite (NaN or infinite) vectors"}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def agent(
    tmp_path: Path, kb: Path, kind: str, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> Iterator[AgentProcess]:
    cfg = write_api_config(tmp_path / "ragd.toml", fake_openai_server, concurrency=1)
    monkeypatch.setenv("RAGD_CONFIG", str(cfg))
    fake_openai_server.poison(MARKER, kind)
    fake_openai_server.hold_next(1)  # the first request waits, so the other files' texts share the next one
    try:
        with running_agent(tmp_path / "agent.log", str(kb)) as proc:
            yield proc
    finally:
        fake_openai_server.release()


def test_a_poisoned_vector_fails_only_its_file(agent: AgentProcess, kb: Path, kind: str, fake_openai_server: FakeOpenAI) -> None:  # fmt: skip
    server, band = fake_openai_server, kb / "band"
    poll(lambda: len(server.requests) == 1, what="the first (held) embedding request")
    queued = lambda: agent.call("status")["embedder"]["queued"]  # noqa: E731
    poll(
        lambda: queued() + len(server.requests[0].texts) >= len(WORDS), what="every file's texts to be queued"
    )
    server.release()
    ragctl("wait")

    poisoned_request = next(r for r in server.requests if any(MARKER in t for t in r.texts))
    assert len(poisoned_request.texts) > 1  # the poisoned text shared its request with other files' texts
    st = ragctl_json("status")
    failures = st["roots"][0]["failures"]
    assert [f["path"] for f in failures] == [str(band / POISONED)]
    reason = failures[0]["reason"]
    assert f"{server.base_url} returned {BOTH[kind]} for 2 of 2 texts (model fake-embed-8)" in reason
    assert failures[0]["retry_at"]
    assert st["embedder"]["errors"] >= 1 and BOTH[kind] in st["embedder"]["last_error"]
    entry = sidecar.try_read(sidecar.entry_path(band, POISONED))
    assert entry is not None and entry.status != FileState.EMBEDDED and _vectors_usable(entry)
    for word in WORDS:
        if f"{word}.md" != POISONED:
            assert keyword_hits(word) == [str(band / f"{word}.md")], word
    assert keyword_hits("celesta") == []

    server.unpoison()  # the API is sane again
    ragctl_json("sync", str(band / POISONED), "--force", "--wait")
    assert keyword_hits("celesta") == [str(band / POISONED)]
    assert ragctl_json("status")["roots"][0]["failures"] == []
    entry = sidecar.try_read(sidecar.entry_path(band, POISONED))
    assert entry is not None and entry.status == FileState.EMBEDDED and _vectors_usable(entry)
