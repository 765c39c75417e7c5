"""The whole configuration (`Config`): every section together, the embedding identity it implies, and its
redacted form for `ragd config show`; and the directories it resolves: where the agent keeps its data (the data
directory, made 0700) and its control socket (the runtime directory, resolved by the wire protocol so that ragctl
finds the same place)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import Field, field_validator

from ..model import EmbeddingIdentity
from .running import HistoryConfig, RunConfig, WatchConfig
from .sections import (
    EmbeddingConfig,
    IgnoreConfig,
    IndexConfig,
    LimitsConfig,
    MetadataConfig,
    ParseConfig,
    SplitterConfig,
    _Section,
    expand_paths,
)
from .serving import AccessConfig, McpConfig

APP = "ragd"


class Config(_Section):
    roots: tuple[Path, ...] = ()
    data_dir: Path | None = None
    embedding: EmbeddingConfig = EmbeddingConfig()
    splitter: SplitterConfig = SplitterConfig()
    index: IndexConfig = IndexConfig()
    ignore: IgnoreConfig = IgnoreConfig()
    limits: LimitsConfig = LimitsConfig()
    parse: ParseConfig = ParseConfig()
    metadata: MetadataConfig = MetadataConfig()
    run: RunConfig = RunConfig()
    history: HistoryConfig = HistoryConfig()
    watch: WatchConfig = WatchConfig()
    access: AccessConfig = AccessConfig()
    mcp: McpConfig = McpConfig()
    source: str = Field(default="defaults", exclude=True)

    _expand_roots = field_validator("roots", mode="before")(lambda v: expand_paths(v))

    @property
    def identity(self) -> EmbeddingIdentity:
        return EmbeddingIdentity(self.embedding.model_name, self.embedding.dim, self.splitter.settings())

    def with_roots(self, roots: list[Path]) -> Config:
        return self.model_copy(update={"roots": expand_paths(roots)})

    def redacted(self) -> dict[str, Any]:
        """The effective configuration as plain data, secrets replaced by '***'."""
        data = self.model_dump(mode="json")
        if self.embedding.api_key is not None:
            data["embedding"]["api_key"] = "***"
        if self.mcp.token is not None:
            data["mcp"]["token"] = "***"
        data["mcp"]["tokens"] = {user: "***" for user in self.mcp.tokens}
        data["embedding"]["model"] = self.embedding.model_name
        data["embedding"]["dimension"] = self.embedding.dim
        data["data_dir"] = str(data_dir(self))
        data["source"] = self.source
        return data


def data_dir(config: Config | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The agent's data directory: created 0700 when missing, and its `index/` (the documents' text) kept 0700."""
    env = os.environ if environ is None else environ
    if env.get("RAGD_DATA_DIR"):
        path = Path(env["RAGD_DATA_DIR"]).expanduser()
    elif config is not None and config.data_dir is not None:
        path = config.data_dir.expanduser()
    else:
        path = Path(platformdirs.user_data_dir(APP))
    with contextlib.suppress(
        OSError
    ):  # best effort: whoever uses the directory reports what is wrong with it
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        (path / "index").mkdir(mode=0o700, exist_ok=True)
        if (path / "index").stat().st_mode & 0o077:  # made by an older version
            (path / "index").chmod(0o700)
    return path


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the control socket lives; resolved by the protocol module so that ragctl finds the same place."""
    from ragctl.protocol import runtime_dir as resolve

    return resolve(os.environ if environ is None else environ)
