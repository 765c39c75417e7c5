from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragd.config import Config, load_config, parse_size
from ragd.errors import ConfigError


def test_defaults_work_offline_with_the_local_model() -> None:
    cfg = load_config()
    assert cfg.embedding.provider == "local"
    assert cfg.identity.model_name == "use-multilingual-v3" and cfg.identity.dimension == 512
    assert cfg.splitter.chunk_size == 1000 and cfg.splitter.chunk_overlap == 200
    assert cfg.source == "defaults"


def test_toml_at_the_platform_dir(isolated_env: Path) -> None:
    p = isolated_env / "config" / "ragd" / "config.toml"
    p.parent.mkdir(parents=True)
    p.write_text(
        'roots = ["~/notes"]\n[embedding]\nprovider = "openai"\nmodel = "bge-m3"\ndimension = 1024\n'
        'base_url = "http://127.0.0.1:1/v1"\napi_key = "sk-secret"\n[limits]\nmax_file_size = "2 MiB"\n'
    )
    cfg = load_config()
    assert cfg.roots == ((isolated_env / "notes").resolve(),)
    assert cfg.identity.dimension == 1024
    assert cfg.limits.max_file_size == 2 * 1024 * 1024
    red = cfg.redacted()
    assert red["embedding"]["api_key"] == "***" and "sk-secret" not in json.dumps(red)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[embedding]\nprovder = 'local'\n", "embedding.provder: unknown key"),
        ("[splitter]\nchunk_size = 100\nchunk_overlap = 200\n", "chunk_overlap must be smaller"),
        ("[embedding]\nprovider = 'openai'\nmodel = 'custom'\n", "embedding.dimension is required"),
        ("[index]\ntype = 'ivf'\n", "index.type"),
        ("[limits]\nmax_file_size = 'lots'\n", "limits.max_file_size"),
        ("nonsense = = 1\n", "not valid TOML"),
    ],
)
def test_broken_config_names_the_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert needle in info.value.message and str(p) in info.value.message


def test_explicit_missing_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGD_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config()


def test_ragjson_tool_config_is_accepted_when_no_toml(isolated_env: Path) -> None:
    (isolated_env / ".rag.config").write_text(
        json.dumps(
            {
                "embedding_model": {
                    "model_name": "fake-embed-8",
                    "base_url": "http://127.0.0.1:9/v1",
                    "api_key": "k",
                    "dimension": 8,
                },
                "splitter": {"chunk_size": 1000, "chunk_overlap": 200, "type": "recursive"},
                "vector_database": {"type": "zvec", "index_type": "hnsw"},
            }
        )
    )
    cfg = load_config()
    assert cfg.embedding.provider == "openai" and cfg.identity.model_name == "fake-embed-8"
    assert cfg.identity.dimension == 8 and cfg.index.type == "hnsw"
    assert cfg.source.endswith(".rag.config")


def test_sizes() -> None:
    assert parse_size("50MB") == 50_000_000
    assert parse_size("64 MiB") == 64 * 1024 * 1024
    assert parse_size(123) == 123
    with pytest.raises(ValueError):
        parse_size("12 parsecs")


def test_api_key_from_env_never_in_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    cfg = Config.model_validate({"embedding": {"provider": "openai", "api_key_env": "MY_KEY"}})
    assert cfg.embedding.resolved_api_key() == "sk-from-env"
    assert "sk-from-env" not in json.dumps(cfg.redacted())


def test_parse_section_defaults_and_validation(tmp_path: Path) -> None:
    cfg = load_config(environ={"HOME": str(tmp_path)})
    assert (cfg.parse.ocr, cfg.parse.ocr_page_timeout, cfg.parse.ocr_max_pages) == (True, 30.0, 50)
    assert cfg.parse.ocr_min_confidence == 0.8
    path = tmp_path / "c.toml"
    path.write_text("[parse]\nocr = false\nocr_max_pages = 3\n")
    assert load_config(path, environ={}).parse.ocr_max_pages == 3
    path.write_text("[parse]\nocr_min_confidence = 1.5\n")
    with pytest.raises(ConfigError, match=r"parse\.ocr_min_confidence"):
        load_config(path, environ={})
    path.write_text("[parse]\nocr_langs = 'zh'\n")
    with pytest.raises(ConfigError, match=r"parse\.ocr_langs: unknown key"):
        load_config(path, environ={})
