"""Configuration: resolved once at start-up from TOML (or the ragjson tool's ~/.rag.config), validated by pydantic.

Precedence: `--config FILE` > `$RAGD_CONFIG` > `<user config dir>/ragd/config.toml` > `~/.rag.config` (JSON of the
ragjson tool: sections embedding_model, splitter, vector_database) > built-in defaults. Directory overrides:
`$RAGD_DATA_DIR`, `$RAGD_RUNTIME_DIR`, `$RAGD_SOCKET`.

The sections (`sections`, `running`, `serving`), the whole `Config` and the agent's directories (`settings`),
loading it (`load`); this module re-exports them.
"""

from .load import config_file_candidates, from_ragjson_config, load_config
from .running import MIN_WORKER_MEMORY, HistoryConfig, RunConfig, WatchConfig
from .sections import (
    DEFAULT_IGNORE,
    DEFAULT_SKIP_DIRS,
    KNOWN_DIMENSIONS,
    LOCAL_DIMENSION,
    LOCAL_MODEL,
    EmbeddingConfig,
    IgnoreConfig,
    IndexConfig,
    LimitsConfig,
    MetadataConfig,
    ParseConfig,
    SplitterConfig,
    expand_paths,
    parse_size,
)
from .serving import AccessConfig, McpConfig
from .settings import APP, Config, data_dir, runtime_dir

__all__ = [
    "APP",
    "DEFAULT_IGNORE",
    "DEFAULT_SKIP_DIRS",
    "KNOWN_DIMENSIONS",
    "LOCAL_DIMENSION",
    "LOCAL_MODEL",
    "MIN_WORKER_MEMORY",
    "AccessConfig",
    "Config",
    "EmbeddingConfig",
    "HistoryConfig",
    "IgnoreConfig",
    "IndexConfig",
    "LimitsConfig",
    "McpConfig",
    "MetadataConfig",
    "ParseConfig",
    "RunConfig",
    "SplitterConfig",
    "WatchConfig",
    "config_file_candidates",
    "data_dir",
    "expand_paths",
    "from_ragjson_config",
    "load_config",
    "parse_size",
    "runtime_dir",
]
