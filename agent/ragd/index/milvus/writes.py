"""The write side of MilvusIndex: a source's chunks replaced, and this agent's sources, folders or every chunk
deleted, in batches of BATCH rows; one writer at a time (the handle's lock)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import IndexError_
from ..backend import IndexChunk, SourceWrite
from . import filters as M
from .connection import STRONG
from .reads import MilvusReads
from .schema import (
    PK,
    SOURCE_CHUNKS,
    SOURCE_PATH,
    to_rows,
)

BATCH = 256  # rows an upsert or delete sends at once (a few MB on the wire)


class MilvusWrites(MilvusReads):
    # -- writes -----------------------------------------------------------------------------------------------------
    def _writable(self) -> None:
        if self._read_only:
            raise IndexError_(f"the index at {self._uri} is open read-only", "writes go through the agent")

    def replace_source(
        self, source_path: str, source_md5: str, root: str, chunks: Sequence[IndexChunk]
    ) -> None:
        self.write_sources([SourceWrite(source_path, source_md5, root, chunks)])

    def write_sources(self, writes: Sequence[SourceWrite]) -> None:
        """As ZvecIndex.write_sources: stale chunks deleted (highest first, chunk 0 last), then the new ones
        upserted, chunk 0 first, each source's chunk 0 recording its count."""
        self._writable()
        last = {w.source_path: w for w in writes}
        dim = self._identity.dimension  # every row checked before anything is written
        rows = [row for w in last.values() for row in to_rows(w, self.agent_id, self._key, dim)]
        with self._lock, self._call("write") as client:
            held = self._held(client, list(last.values()))
            stale = [self._pk(w.source_path, i) for w in last.values()
                     for i in range(held[w.source_path] - 1, len(w.chunks) - 1, -1)]  # fmt: skip
            for start in range(0, len(stale), BATCH):
                client.delete(self._name, ids=stale[start : start + BATCH])
            for start in range(0, len(rows), BATCH):
                client.upsert(self._name, rows[start : start + BATCH])

    def _held(self, client: Any, writes: Sequence[SourceWrite]) -> dict[str, int]:
        held = {w.source_path: w.held for w in writes if w.held is not None}
        ask = {self._pk(w.source_path, 0): w.source_path for w in writes if w.held is None}
        ids = list(ask)
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            for row in client.get(
                self._name, ids=batch, output_fields=[SOURCE_CHUNKS], consistency_level=STRONG
            ):
                held[ask[row[PK]]] = max(1, int(row.get(SOURCE_CHUNKS) or 0))
        return {w.source_path: held.get(w.source_path, 0) for w in writes}

    def _delete_where(self, flt: str) -> int:
        self._writable()
        with self._lock, self._call("delete") as client:
            ids = [r[PK] for r in self._rows(client, flt, [PK])]
            for start in range(0, len(ids), BATCH):
                client.delete(self._name, ids=ids[start : start + BATCH])
            return len(ids)

    def delete_source(self, source_path: str) -> int:
        return self._delete_where(self._mine(M.equals(SOURCE_PATH, source_path)))

    def delete_subtree(self, dir_path: str) -> int:
        return self._delete_where(self._mine(M.below(SOURCE_PATH, dir_path)))

    def delete_all(self) -> int:
        """Every chunk of this agent (a rebuild); other agents' chunks stay."""
        return self._delete_where(self._mine())

    def flush(self) -> None:
        if self._read_only:
            return
        with self._lock, self._call("flush") as client:
            client.flush(self._name)
