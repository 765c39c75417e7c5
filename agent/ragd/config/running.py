"""The configuration's sections about how the agent runs: its workers and job slots (`run`), watching the roots
(`watch`) and what each document's history keeps (`history`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from .sections import _Section, expand_paths

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
    # seconds before a file failed by a passing cause (BACKOFF_CODES: the embeddings API, the disk, a worker) is
    # tried again; doubled at each further failure, up to RETRY_MAX_S (pipeline/outcome.py)
    retry_after: float = Field(default=60.0, ge=1, le=86400)
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
