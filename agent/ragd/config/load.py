"""Loading the configuration: which file is read (TOML, or the ragjson tool's ~/.rag.config mapped onto ragd's
sections), validated once, and a validation error turned into one message naming each wrong key."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError

from ..errors import ConfigError
from .sections import LOCAL_MODEL
from .settings import APP, Config


def _format_validation(origin: str, err: ValidationError) -> str:
    lines = [f"invalid configuration in {origin}:"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"  {key}: {msg}")
    return "\n".join(lines)


def _validate(data: dict[str, Any], origin: str) -> Config:
    try:
        return Config.model_validate({**data, "source": origin})
    except ValidationError as err:
        raise ConfigError(
            _format_validation(origin, err), "fix the key named above, then run `ragd config check`"
        ) from None


def from_ragjson_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """Map the ragjson tool's ~/.rag.config (embedding_model, splitter, vector_database) onto ragd's sections."""
    emb_in = data.get("embedding_model") or {}
    spl_in = data.get("splitter") or {}
    vdb_in = data.get("vector_database") or {}
    out: dict[str, Any] = {}
    emb: dict[str, Any] = {}
    model = emb_in.get("model_name") or emb_in.get("model")
    if emb_in.get("base_url") or emb_in.get("api_key") or (model and model != LOCAL_MODEL):
        emb["provider"] = "openai"
        for src, dst in (
            ("base_url", "base_url"),
            ("api_key", "api_key"),
            ("dimension", "dimension"),
            ("dimensions", "dimension"),
            ("batch_size", "batch_size"),
            ("timeout", "timeout"),
        ):
            if emb_in.get(src) is not None:
                emb[dst] = emb_in[src]
        if model:
            emb["model"] = model
    if emb:
        out["embedding"] = emb
    spl: dict[str, Any] = {}
    kind = spl_in.get("type") or spl_in.get("kind")
    if kind in ("recursive", "markdown"):
        spl["kind"] = kind
    for key in ("chunk_size", "chunk_overlap"):
        if spl_in.get(key) is not None:
            spl[key] = spl_in[key]
    if spl:
        out["splitter"] = spl
    index_type = vdb_in.get("index_type") or vdb_in.get("index")
    if index_type in ("flat", "hnsw"):
        out["index"] = {"type": index_type}
    return out


def config_file_candidates(environ: Mapping[str, str]) -> list[Path]:
    if environ.get("RAGD_CONFIG"):
        return [Path(environ["RAGD_CONFIG"]).expanduser()]
    return [Path(platformdirs.user_config_dir(APP)) / "config.toml"]


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Resolve the configuration once. An explicitly named file must exist; the default one may not."""
    env = os.environ if environ is None else environ
    explicit = path is not None or bool(env.get("RAGD_CONFIG"))
    candidate = Path(path).expanduser() if path is not None else config_file_candidates(env)[0]
    if candidate.exists():
        return _load_toml(candidate)
    if explicit:
        raise ConfigError(
            f"config file {candidate} does not exist", "create it or drop --config / RAGD_CONFIG"
        )
    legacy = Path(env.get("HOME", str(Path.home()))) / ".rag.config"
    if legacy.is_file():
        return _load_legacy(legacy)
    return Config()


def _load_toml(path: Path) -> Config:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(
            f"config file {path} is not valid TOML: {err}", "fix the syntax at that line"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}", "check the file's permissions") from None
    return _validate(data, str(path))


def _load_legacy(path: Path) -> Config:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(
            f"cannot read the ragjson config {path}: {err}",
            "fix it, or write a ragd config.toml, which takes precedence",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"the ragjson config {path} is not a JSON object", "fix it or write a ragd config.toml"
        )
    return _validate(from_ragjson_config(data), str(path))
