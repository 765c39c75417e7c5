"""Configuration: resolved once at start-up from TOML (or the ragjson tool's ~/.rag.config), validated by pydantic.

Precedence: `--config FILE` > `$RAGD_CONFIG` > `<user config dir>/ragd/config.toml` > `~/.rag.config` (JSON of the
ragjson tool: sections embedding_model, splitter, vector_database) > built-in defaults. Directory overrides:
`$RAGD_DATA_DIR`, `$RAGD_RUNTIME_DIR`, `$RAGD_SOCKET`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigError
from .model import EmbeddingIdentity, SplitterSettings

APP = "ragd"
LOCAL_MODEL = "use-multilingual-v3"
LOCAL_DIMENSION = 512
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$")  # what useradd accepts (a trailing $: machines)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


def parse_size(value: int | float | str) -> int:
    """`1048576`, `"50MB"`, `"64 MiB"` -> bytes."""
    if isinstance(value, int | float):
        return int(value)
    m = _SIZE.match(value)
    if not m or (m.group(2) is None and not m.group(1)):
        raise ValueError(f"not a size: {value!r} (expected bytes or e.g. '50MB', '64 MiB')")
    unit = (m.group(2) or "").lower()
    if unit not in _UNITS:
        raise ValueError(f"unknown size unit in {value!r}")
    return int(float(m.group(1)) * _UNITS[unit])


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingConfig(_Section):
    provider: Literal["local", "openai"] = "local"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str = "OPENAI_API_KEY"
    dimension: int | None = Field(default=None, gt=0)
    send_dimensions: bool = False
    batch_size: int = Field(default=64, ge=1, le=2048)
    concurrency: int = Field(default=4, ge=1, le=64)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=6, ge=0, le=50)
    max_backoff: float = Field(default=60.0, gt=0)
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _check_provider(self) -> EmbeddingConfig:
        if self.provider == "local":
            if self.model not in (None, LOCAL_MODEL):
                raise ValueError(
                    f"the local provider has one model, {LOCAL_MODEL!r}; set provider = 'openai' "
                    f"to use {self.model!r}"
                )
            if self.dimension not in (None, LOCAL_DIMENSION):
                raise ValueError(f"the local model has dimension {LOCAL_DIMENSION}")
        elif self.dimension is None and (self.model or "text-embedding-3-small") not in KNOWN_DIMENSIONS:
            raise ValueError(f"embedding.dimension is required for model {self.model!r}")
        return self

    @property
    def model_name(self) -> str:
        if self.provider == "local":
            return LOCAL_MODEL
        return self.model or "text-embedding-3-small"

    @property
    def dim(self) -> int:
        if self.provider == "local":
            return LOCAL_DIMENSION
        return self.dimension or KNOWN_DIMENSIONS[self.model_name]

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return (os.environ if environ is None else environ).get(self.api_key_env)


class SplitterConfig(_Section):
    kind: Literal["recursive", "markdown"] = "recursive"
    chunk_size: int = Field(default=1000, ge=50, le=100_000)
    chunk_overlap: int = Field(default=200, ge=0)

    @model_validator(mode="after")
    def _overlap_smaller(self) -> SplitterConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("splitter.chunk_overlap must be smaller than splitter.chunk_size")
        return self

    def settings(self) -> SplitterSettings:
        return SplitterSettings(self.kind, self.chunk_size, self.chunk_overlap)


class IndexConfig(_Section):
    backend: Literal["zvec", "milvus"] = "zvec"
    # "auto": flat (exact) until the collection holds `hnsw_after` chunks, then an HNSW graph, built in the
    # background on a copy while searches go on (docs/zvec-notes.md)
    type: Literal["flat", "hnsw", "auto"] = "auto"
    hnsw_after: int = Field(default=50_000, ge=1_000)
    hnsw_m: int = Field(default=16, ge=4, le=128)
    hnsw_ef_construction: int = Field(default=200, ge=16, le=2000)
    # how wide an HNSW search looks (recall against speed); 0: by size, from 512 to zvec's limit of 2048
    hnsw_ef: int = Field(default=0, ge=0, le=2048)
    optimize_after: int = Field(default=5000, ge=100)
    # backend = "milvus" (docs/scale-out.md): a server or cluster (`http://host:19530`), or a Milvus Lite file
    # (`~/kb.db`; "" is `milvus.db` in the data directory)
    uri: str = ""
    token: SecretStr = SecretStr("")  # "user:password" or an API key; $RAGD_MILVUS_TOKEN when empty
    db_name: str = ""  # "" is the server's default database
    collection_prefix: str = Field(default="ragd_", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    agent_id: str = Field(default="", max_length=200)  # "" is "<host name>:<data directory>"
    timeout: float = Field(default=10.0, gt=0, le=600)  # seconds a call to the Milvus server may take

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        value = value.strip()
        if not value or re.match(r"^(https?|tcp|grpc|unix)://", value) or value.endswith(".db"):
            return value
        raise ValueError("index.uri must be a Milvus server's address (http://host:19530, https://…) or the path "
                         f"of a Milvus Lite file ending in .db, not {value!r}")  # fmt: skip


DEFAULT_IGNORE = (
    "*~",
    ".*.swp",
    ".*.swx",
    ".#*",
    "*.tmp",
    ".goutputstream-*",
    "4913",
    "~$*",
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
)
DEFAULT_SKIP_DIRS = ("node_modules", "__pycache__", "venv", "site-packages")


class IgnoreConfig(_Section):
    patterns: tuple[str, ...] = ()  # extra file-name globs, on top of the built-in editor-temp patterns
    skip_dirs: tuple[str, ...] = DEFAULT_SKIP_DIRS  # directory names never descended into (dot-dirs always)

    @property
    def file_patterns(self) -> tuple[str, ...]:
        return DEFAULT_IGNORE + self.patterns


class LimitsConfig(_Section):
    max_file_size: int = 64 * 1024**2
    max_text_chars: int = Field(default=5_000_000, ge=1000)
    parse_timeout: float = Field(default=120.0, gt=0)

    @field_validator("max_file_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        return parse_size(v)


class ParseConfig(_Section):
    """OCR of images and of PDF pages without a text layer (parse/ocr.py)."""

    ocr: bool = (
        True  # only where rapidocr is installed; off: images are SKIPPED, scanned PDF pages left empty
    )
    ocr_page_timeout: float = Field(
        default=30.0, gt=0, le=3600
    )  # seconds one page may take: then it is stopped, listed as not read, and the next page read
    ocr_max_pages: int = Field(
        default=50, ge=1, le=10_000
    )  # pages OCR'd per file; the rest are listed as skipped
    ocr_min_confidence: float = Field(default=0.8, ge=0, le=1)  # a page whose mean confidence is below: "low"


class MetadataConfig(_Section):
    """Document metadata (docs/metadata.md): the keys, beyond the built-in ones, that become search fields."""

    keys: tuple[
        str, ...
    ] = ()  # e.g. ["customer", "status"]: front matter and folder default keys to filter on

    @field_validator("keys", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        from .pipeline.metadata import STANDARD, canonical_key

        if not isinstance(value, list | tuple):
            return value
        out = []
        for raw in value:
            key = canonical_key(raw) if isinstance(raw, str) else None
            if key is None:
                raise ValueError(
                    f"{raw!r} is not a metadata key (lower-case letters, digits, _ . -; at most 64)"
                )
            if key not in STANDARD and key not in out:
                out.append(key)
        return tuple(out)


def expand_paths(v: Any) -> Any:
    """A list of paths from the config or the command line: `~` expanded, made absolute and resolved."""
    if isinstance(v, list | tuple):
        return tuple(Path(os.path.expanduser(str(p))).resolve() for p in v)
    return v


MIN_WORKER_MEMORY = 256  # MiB: a worker with the parsers loaded needs about 200


class HistoryConfig(_Section):
    """Each document's versions and events, kept by the agent (resident/history.py, docs/history.md)."""

    max_versions: int = Field(default=50, ge=1, le=100_000)  # versions kept per document (the oldest go)
    max_events: int = Field(default=200, ge=1, le=100_000)  # events kept per document (the oldest go)
    max_size_mb: int = Field(default=256, ge=1, le=1_000_000)  # the whole history file; past it the oldest go
    move_window: float = Field(
        default=600.0, ge=0, le=86_400 * 30
    )  # seconds: a file deleted and one with its content created within this are one document moved


class RunConfig(_Section):
    # directories processed in parallel; 0: 2, and 8 once texts go to an embeddings API (whose requests a
    # directory job mostly waits for; a no-op rescan, all CPU in one process, is slower with more): job_slots
    jobs: int = Field(default=0, ge=0, le=64)
    workers: int | None = Field(default=None, ge=0, le=64)  # parse worker processes; None: one per core
    # MiB of address space per worker; 0: no cap. 2048: OCR of an A4 scan peaks at 1.35 GB (1024 fails it)
    worker_memory: int = Field(default=2048, ge=0)
    worker_idle: float = Field(default=60.0, gt=0, le=86400)  # seconds without a file before the workers exit
    rest_after: float = Field(
        default=120.0, ge=0
    )  # seconds unused before the agent rests (lifecycle.py); 0: never
    # MiB free below which disk space is shown degraded (resident/capabilities.py); 0: not checked
    min_free_space: int = Field(default=1024, ge=0)

    @field_validator("worker_memory")
    @classmethod
    def _memory(cls, v: int) -> int:
        if 0 < v < MIN_WORKER_MEMORY:
            raise ValueError(f"a worker needs at least {MIN_WORKER_MEMORY} MiB to start (0: no cap)")
        return v


class WatchConfig(_Section):
    quiet: float = Field(default=0.3, gt=0, le=60)  # seconds without events before a directory's job runs
    ceiling: float = Field(default=3.0, gt=0, le=600)  # at most this long after its first event, even if busy
    poll: tuple[Path, ...] = ()  # roots watched by polling instead of inotify (network file systems)
    poll_interval: float = Field(default=5.0, ge=0.1, le=3600)
    reconcile_interval: float = Field(
        default=3600.0, ge=0
    )  # full stat rescan of every root; 0: only at start
    verify_interval: float = Field(
        default=600.0, ge=0
    )  # the index checked against the sidecars of every root while idle; 0: only after rescans

    _expand = field_validator("poll", mode="before")(lambda v: expand_paths(v))

    @model_validator(mode="after")
    def _ceiling(self) -> WatchConfig:
        if self.ceiling < self.quiet:
            raise ValueError(f"ceiling ({self.ceiling}) must not be shorter than quiet ({self.quiet})")
        return self


class McpConfig(_Section):
    """The agent's MCP endpoint (streamable HTTP on loopback); `ragctl mcp` (stdio) works whatever this says."""

    enabled: bool = True
    host: str = "127.0.0.1"  # a loopback address only: 127.0.0.1 (or another 127.x), ::1, localhost
    port: int = Field(default=8739, ge=0, le=65535)  # 0: any free port (the bound one is in `ragctl status`)
    token: SecretStr | None = None  # optional bearer token clients must send (Authorization: Bearer ...)
    token_env: str | None = None  # or: the environment variable holding that token
    allowed_origins: tuple[str, ...] = ()  # extra browser Origins (http://127.0.0.1:PORT is always allowed)
    # access scope (docs/access.md): a user name -> that user's token (or "$VAR": the variable holding it)
    tokens: dict[str, SecretStr] = Field(default_factory=dict)
    anonymous: Literal["auto", "public", "refuse"] = "auto"  # a request without a token (see `http.Tokens`)
    ui: bool = True  # the web page at /ui/ on this endpoint (docs/web.md)

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, v: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for user, token in v.items():
            if not _USER_NAME.match(user):
                raise ValueError(f"mcp.tokens: {user!r} is not a user name")
            value = token.get_secret_value()
            if not value.strip():
                raise ValueError(f"mcp.tokens: the token of {user} is empty")
            if value.startswith("$") and not _ENV_NAME.match(value[1:]):
                raise ValueError(f"mcp.tokens: the token of {user} names no environment variable: {value!r}")
        return v

    @field_validator("host")
    @classmethod
    def _loopback(cls, v: str) -> str:
        if v == "localhost":
            return v
        try:
            loopback = ipaddress.ip_address(v).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"mcp.host must be a loopback address (127.0.0.1, ::1 or localhost), not {v!r}")
        return v

    def resolved_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The token, or None when none is configured. Raises ConfigError when token_env names an unset variable."""
        if self.token is not None:
            return self.token.get_secret_value()
        if self.token_env is None:
            return None
        value = (os.environ if environ is None else environ).get(self.token_env)
        if not value:
            raise ConfigError(
                f"mcp.token_env names ${self.token_env}, which is not set",
                f"set {self.token_env} in the agent's environment, or drop mcp.token_env",
            )
        return value

    def resolved_tokens(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each user's token ("$VAR" read from the environment). ConfigError for an unset variable, or for a token
        given twice (to two users, or also as the agent's own `token`)."""
        env = os.environ if environ is None else environ
        out: dict[str, str] = {}
        for user, secret in self.tokens.items():
            value = secret.get_secret_value()
            if value.startswith("$"):
                value = env.get(value[1:], "")
                if not value:
                    raise ConfigError(f"mcp.tokens.{user} names ${secret.get_secret_value()[1:]}, which is not set",
                                      "set it in the agent's environment (e.g. a systemd drop-in), or drop the entry")  # fmt: skip
            out[user] = value
        if len(set(out.values())) < len(out) or self.resolved_token(env) in out.values():
            raise ConfigError(
                "mcp.tokens: the same token is given twice", "give every user a token of their own"
            )
        return out


class AccessConfig(_Section):
    """Who may use the control socket (docs/access.md); what each caller sees is limited by file permissions."""

    connect: Literal["owner", "group", "anyone"] = "owner"  # besides the agent's own user and root
    group: str | None = None  # with connect = "group": its members may connect

    @model_validator(mode="after")
    def _group(self) -> AccessConfig:
        if self.connect == "group" and not self.group:
            raise ValueError('access.connect = "group" needs access.group, the name of the group')
        if self.connect != "group" and self.group:
            raise ValueError('access.group is used only with access.connect = "group"')
        return self

    @property
    def shared(self) -> bool:
        """Other local users may connect: the agent serves several users."""
        return self.connect != "owner"


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
