"""`ragd index migrate --to milvus|zvec`: the other backend filled from the sidecars, nothing embedded again; and
the config of the milvus backend checked like every other setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.agent import write_doc
from tests.e2e.conftest import api_config_text, ragd
from tests.support.fake_openai import FakeOpenAI

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")


def write_config(path: Path, api: FakeOpenAI, root: Path, **index: str) -> Path:
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in index.items())
    path.write_text(f'roots = ["{root}"]\n' + api_config_text(api) + "\n[index]\n" + lines)
    return path


def hits(config: Path, text: str) -> list[str]:
    found = json.loads(ragd("--config", str(config), "search", text, "--mode", "keyword", "--json").stdout)
    return sorted(r["path"] for r in found["results"])


def test_migrate_to_milvus_and_back_embeds_nothing(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    root = tmp_path / "kb"
    docs = [write_doc(root / "a.md", "alpha"), write_doc(root / "sub dir" / "b_%.md", "bravo"),
            write_doc(root / "中文" / "c.md", "charlie", "磁盘空间")]  # fmt: skip
    lite = tmp_path / "shared" / "kb.db"
    zvec_cfg = write_config(tmp_path / "zvec.toml", fake_openai_server, root, uri=str(lite))
    ragd("--config", str(zvec_cfg), "run", "--once")
    embedded = len(fake_openai_server.texts)
    assert embedded > 0

    out = ragd("--config", str(zvec_cfg), "index", "migrate", "--to", "milvus", "--json").stdout
    result = json.loads(out)
    assert result["to"] == "milvus" and result["sources"] == 3 and result["chunks"] >= 3
    assert len(fake_openai_server.texts) == embedded  # from the sidecars: nothing embedded

    milvus_cfg = write_config(
        tmp_path / "milvus.toml", fake_openai_server, root, backend="milvus", uri=str(lite)
    )
    for doc, word in zip(docs, ("alpha", "bravo", "charlie"), strict=True):
        assert hits(milvus_cfg, word) == [str(doc)]
        assert hits(zvec_cfg, word) == [str(doc)]
    assert hits(milvus_cfg, "磁盘空间") == [str(docs[2])]

    # again: nothing to write; then a file gone from the tree leaves the target too
    again = json.loads(ragd("--config", str(zvec_cfg), "index", "migrate", "--to", "milvus", "--json").stdout)
    assert again["sources"] == 0 and again["removed"] == 0
    docs[0].unlink()
    ragd("--config", str(zvec_cfg), "run", "--once")
    back = json.loads(ragd("--config", str(milvus_cfg), "index", "migrate", "--to", "zvec", "--json").stdout)
    assert back["to"] == "zvec"
    moved = json.loads(ragd("--config", str(zvec_cfg), "index", "migrate", "--to", "milvus", "--json").stdout)
    assert moved["removed"] == 1
    assert hits(milvus_cfg, "alpha") == []
    assert len(fake_openai_server.texts) == embedded


def test_migrate_to_the_configured_backend_is_refused(tmp_path: Path, fake_openai_server: FakeOpenAI) -> None:
    cfg = write_config(tmp_path / "zvec.toml", fake_openai_server, tmp_path)
    proc = ragd("--config", str(cfg), "index", "migrate", "--to", "zvec", check=2)
    assert "configured on zvec already" in proc.stderr


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('uri = "milvus:19530"', "index.uri"),
        ('collection_prefix = "bad-prefix"', "collection_prefix"),
        ('backend = "qdrant"', "backend"),
        ("timeout = 0", "timeout"),
    ],
)
def test_a_bad_milvus_setting_is_a_clear_config_error(tmp_path: Path, line: str, says: str) -> None:
    cfg = tmp_path / "ragd.toml"
    cfg.write_text(f"[index]\n{line}\n")
    proc = ragd("--config", str(cfg), "config", "check", check=2)
    assert says in proc.stderr


def test_the_token_is_redacted(tmp_path: Path) -> None:
    cfg = tmp_path / "ragd.toml"
    cfg.write_text('[index]\nbackend = "milvus"\ntoken = "root:Milvus-secret-42"\n')
    proc = ragd("--config", str(cfg), "config", "check")
    assert "Milvus-secret-42" not in proc.stdout + proc.stderr
