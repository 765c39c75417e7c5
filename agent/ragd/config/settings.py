"""The whole configuration (`Config`): every section together, the embedding identity it implies, and its
redacted form for `ragd config show`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ..model import EmbeddingIdentity
from .dirs import data_dir
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
