"""Metadata in directory jobs (`ragd run --once`): entries carry it; changed folder defaults or `[metadata] keys`
relabel the files they cover without parsing or embedding anything; entries of split revision 2 get theirs with
their vectors reused."""

from __future__ import annotations

import json
from pathlib import Path

from ragd.config import Config
from ragd.pipeline import sidecar
from ragd.pipeline.folder_meta import FOLDER_FILE
from ragd.pipeline.mushroom import Event
from ragd.pipeline.structure import SPLIT_REVISION
from ragd.resident.once import RunSummary
from ragd.vocabulary import NoteStatus
from tests.integration import helpers
from tests.integration.helpers import all_events, api_config, clear_mushrooms, entry
from tests.support.fake_openai import FakeOpenAI


def run(config: Config) -> RunSummary:
    return helpers.run(config, index=False)


def tree(root: Path) -> None:
    (root / "m" / "sub").mkdir(parents=True)
    (root / "o").mkdir()
    (root / "m" / FOLDER_FILE).write_text('product = "X200"\ntags = ["manual"]\n')
    (root / "m" / "a.md").write_text("---\ntags: [invoice]\ncustomer: ACME\n---\n# A\n\nalpha text\n")
    (root / "m" / "sub" / "b.txt").write_text("bravo text\n")
    (root / "o" / "c.md").write_text("# C\n\ncharlie text\n")


def fields(directory: Path, name: str) -> dict[str, object]:
    meta = entry(directory, name).metadata
    return meta.to_json()["fields"] if meta else {}


def with_keys(cfg: Config, keys: list[str]) -> Config:
    return Config.model_validate({**cfg.model_dump(), "metadata": {"keys": keys}})


def test_defaults_and_keys_relabel_without_parsing_or_embedding(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    tree(root)
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).ok
    assert fields(root / "m", "a.md") == {"tags": ["manual", "invoice"], "product": "X200"}
    assert fields(root / "m" / "sub", "b.txt") == {"tags": ["manual"], "product": "X200"}
    assert entry(root / "o", "c.md").metadata is None  # nothing to record: no key at all
    clear_mushrooms(root)
    sent = len(fake_openai_server.texts)

    (root / "m" / FOLDER_FILE).write_text('product = "X300"\n')
    s = run(cfg)
    assert s.ok and s.texts_embedded == 0 and len(fake_openai_server.texts) == sent
    assert fields(root / "m", "a.md") == {"tags": ["invoice"], "product": "X300"}
    assert fields(root / "m" / "sub", "b.txt") == {"product": "X300"}
    assert all_events(root / "m") == [Event("a.md", NoteStatus.UPSERT)]  # the index takes the new fields
    assert all_events(root / "m" / "sub") == [Event("b.txt", NoteStatus.UPSERT)]
    assert all_events(root / "o") == []  # not under the defaults file: untouched
    clear_mushrooms(root)

    assert run(cfg).ok and all_events(root / "m") == []  # labelled already: nothing to do
    s = run(with_keys(cfg, ["customer"]))
    assert s.ok and s.texts_embedded == 0
    assert fields(root / "m", "a.md") == {"tags": ["invoice"], "product": "X300", "customer": "ACME"}
    assert fields(root / "o", "c.md") == {}  # labelled with the keys in force, no value
    assert len(fake_openai_server.texts) == sent


def test_entries_of_revision_2_get_their_metadata_with_vectors_reused(
    tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text('---\ntitle: "Pump: \\"P-7\\""\ntags: [pumps]\n---\n# Install\n\nMount it.\n')
    (root / "b.md").write_text("# Plain\n\nno front matter\n")
    cfg = api_config(fake_openai_server, [root])
    assert run(cfg).ok
    for name in ("a.md", "b.md"):  # as an older ragd wrote them
        path = sidecar.entry_path(root, name)
        data = json.loads(path.read_text())
        data.pop("metadata", None)
        data["split_revision"] = 2
        path.write_text(json.dumps(data))
    sent = len(fake_openai_server.texts)
    s = run(cfg)
    assert s.ok and s.embedded == 1 and s.texts_embedded == 0 and len(fake_openai_server.texts) == sent
    a = entry(root, "a.md")
    assert a.split_revision == SPLIT_REVISION and a.metadata is not None
    assert a.metadata.to_json()["fields"] == {"title": 'Pump: "P-7"', "tags": ["pumps"]}
    assert a.chunks[0].meta["header"] == 'File: a.md | Title: Pump: "P-7"'
    assert entry(root, "b.md").split_revision == 2  # nothing of it changes: left as it is
