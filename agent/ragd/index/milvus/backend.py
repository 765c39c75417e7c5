"""IndexBackend on Milvus: a server or cluster shared by many agents, or Milvus Lite (docs/scale-out.md).

One collection per embedding identity (`<collection_prefix><collection_name>`), shared by every agent that indexes
with that identity. Every chunk carries its agent (`agent`: `[index] agent_id`, or "<host>:<data directory>"),
and its primary key is the agent's key and the ragjson document id (`<16 hex>-<uuid5>`), so two machines with the
same paths never overwrite each other. An agent lists, repairs and deletes only its own chunks; a search covers
this agent's files unless asked for every agent's (`scope="all"`).

The server is reached lazily: opening never fails because it is down. A call that cannot reach it raises
IndexUnavailable (the index writer keeps its change notes and retries; `ragctl status` shows the state), and the
next call after a back-off (1 s doubling to 60 s) tries again. Keyword search is Milvus's own BM25 over a jieba
analyzer; the hybrid ranking is ragd's (ranking/hybrid.py), the same as on zvec.

Here: opening, maintenance (the server's own), stats, rest, close; the connection is in connection.py, the reads in
reads.py, the writes in writes.py (the base classes, in that order).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from ...config import IndexConfig
from ...errors import IndexError_, IndexUnavailable
from ...model import EmbeddingIdentity
from .connection import client_ready
from .schema import (
    MAX_AGENT,
    checked_text,
    default_agent_id,
)
from .writes import MilvusWrites

log = logging.getLogger(__name__)


class MilvusIndex(MilvusWrites):
    # -- opening ------------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls, data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig, *, read_only: bool = False
    ) -> MilvusIndex:
        """A handle, connected now if the server answers; if it does not, the next use tries again (so an agent
        starts while its cluster is down). A collection that cannot serve this identity raises IndexError_."""
        uri = client_ready(data_dir, cfg)
        if uri.endswith(".db"):
            Path(uri).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        agent = checked_text(cfg.agent_id or default_agent_id(data_dir), MAX_AGENT, "the agent's name")
        index = cls(uri, identity, cfg, agent, read_only)
        try:
            index._connected()
        except IndexUnavailable as err:
            log.warning("%s; the agent keeps its change notes and tries again", err.message)
        return index

    # -- maintenance: the server's own -----------------------------------------------------------------------------
    @property
    def needs_optimize(self) -> bool:
        return False  # Milvus builds and merges its indexes itself

    def optimize(self) -> None:
        return None

    @property
    def needs_compaction(self) -> bool:
        return False

    @property
    def needs_compaction_busy(self) -> bool:
        return False

    def compact(self) -> int:
        return 0

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.health(), "path": str(self.path), "fingerprint": self._identity.fingerprint,
                               "dimension": self._identity.dimension, "read_only": self._read_only,
                               "index_type": self._cfg.type, "configured_type": self._cfg.type, "pending": 0,
                               "needs_optimize": False, "segments": 1, "blocks": 0}  # fmt: skip
        try:
            out["documents"] = self.count()
        except IndexError_ as err:
            out["documents"], out["error"] = None, err.message
        return out

    @property
    def resting(self) -> bool:
        return False

    def idle_s(self) -> float:
        return time.monotonic() - self._used

    def rest(self) -> bool:
        return False  # the memory is the server's

    def give_back_pages(self) -> int:
        return 0  # nothing mapped here

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
            if client is not None:
                try:
                    client.close()
                except Exception as err:
                    log.debug("closing the Milvus client: %s", err)
