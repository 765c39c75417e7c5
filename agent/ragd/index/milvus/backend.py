"""IndexBackend on Milvus: a server or cluster shared by many agents, or Milvus Lite (docs/scale-out.md).

One collection per embedding identity (`<collection_prefix><collection_name>`), shared by every agent that indexes
with that identity. Every chunk carries its agent (`agent`: `[index] agent_id`, or "<host>:<data directory>"),
and its primary key is the agent's key and the ragjson document id (`<16 hex>-<uuid5>`), so two machines with the
same paths never overwrite each other. An agent lists, repairs and deletes only its own chunks; a search covers
this agent's files unless asked for every agent's (`scope="all"`).

The server is reached lazily: opening never fails because it is down. A call that cannot reach it raises
IndexUnavailable (the index writer keeps its change notes and retries; `ragctl status` shows the state), and the
next call after a back-off (1 s doubling to 60 s) tries again. Keyword search is Milvus's own BM25 over a jieba
analyzer; the hybrid ranking is ragd's (hybrid.py), the same as on zvec.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ...config import IndexConfig
from ...errors import IndexBusy, IndexError_, IndexUnavailable
from ...model import EmbeddingIdentity
from .. import records
from ..backend import BUSY_HINT, Hit, IndexChunk, SourceSummary, SourceWrite
from ..keyword import fts
from ..ranking import hybrid
from ..records import check_vector
from ..where import Where
from . import filters as M
from . import phrases
from .schema import (
    AGENT,
    CHUNK_INDEX,
    EMBEDDING,
    EXT,
    FTS_TEXT,
    HIT_FIELDS,
    MAX_AGENT,
    META_TERMS,
    PK,
    SOURCE_CHUNKS,
    SOURCE_MD5,
    SOURCE_PATH,
    SPARSE,
    agent_key,
    build_schema,
    check_collection,
    check_server,
    checked_text,
    default_agent_id,
    index_params,
    milvus_name,
    primary_key,
    to_hit,
    to_rows,
)

log = logging.getLogger(__name__)
for _noisy in ("faiss", "milvus_lite"):  # each logs its every step at INFO
    logging.getLogger(_noisy).setLevel(logging.WARNING)
# a Lite file held by another process: said once, as IndexBusy, not with milvus_lite's traceback
logging.getLogger("milvus_lite.server_manager").setLevel(logging.CRITICAL)

BATCH = 256  # rows an upsert or delete sends at once (a few MB on the wire)
PAGE_ROWS = 4_096  # rows a listing reads at once (about)
QUERY_LIMIT = 16_384  # the most rows one Milvus query returns
# What the agent reads to keep its own chunks right (listings, counts, a source's chunk count before a rewrite)
# sees every write before it; a search sees this agent's writes at once and other agents' within the server's
# staleness bound (Milvus's default "Bounded" consistency would let a fresh edit be missed for a moment).
STRONG, SESSION = "Strong", "Session"
BACKOFF = (1.0, 60.0)  # seconds before the first retry after a failed connection, and the most
# why a server would not finish a collection ragd made on it: one that lacks what ragd needs of it
UNFINISHED = 'ragd needs Milvus 2.5 or newer (docs/scale-out.md, "Which server"); the server\'s log says why it refused'


def _unreachable(err: BaseException) -> bool:
    """Whether `err` says the server could not be reached (as opposed to a request it refused)."""
    from pymilvus.exceptions import MilvusUnavailableException  # installed: open() checked

    if isinstance(err, MilvusUnavailableException | ConnectionError | TimeoutError):
        return True
    code = getattr(err, "code", None)
    status = code() if callable(code) else None
    if status is not None and getattr(status, "name", "") in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return True
    text = str(err).lower()
    return any(w in text for w in ("unavailable", "fail connecting", "connection refused", "deadline exceeded",
                                   "failed to connect", "timed out", "timeout"))  # fmt: skip


def _client_ready(data_dir: Path, cfg: IndexConfig) -> str:
    """Import the client (IndexError_ naming the extra when it is missing) and quiet it; the uri to use."""
    try:
        import jieba  # Milvus Lite's analyzer: imported here to quiet it (it sets DEBUG when imported)
        import pymilvus  # noqa: F401

        jieba.setLogLevel(logging.WARNING)
        # pymilvus logs every failed call with its own handler; ragd reports them itself, once
        logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    except ImportError:
        raise IndexError_("[index] backend = \"milvus\" needs the Milvus client, which is not installed",
                          "install ragd with its milvus extra: pip install 'ragd[milvus]'") from None  # fmt: skip
    uri = cfg.uri or str(Path(data_dir) / "milvus.db")
    return str(Path(uri).expanduser().resolve()) if uri.endswith(".db") else uri


def _client(uri: str, cfg: IndexConfig) -> Any:
    from pymilvus import MilvusClient

    token = cfg.token.get_secret_value() or os.environ.get("RAGD_MILVUS_TOKEN", "")
    return MilvusClient(uri=uri, token=token, db_name=cfg.db_name, timeout=cfg.timeout)


def _close(client: Any) -> None:
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()


def check_server_of(data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig) -> str:
    """`ragd config check` on `[index] backend = "milvus"`: the server's version and the state of this identity's
    collection, in a line; IndexError_ when the server is too old or the collection was not made as ragd needs it.
    Nothing is created. A server that does not answer is said, not raised (the agent starts without it)."""
    uri = _client_ready(data_dir, cfg)
    name = milvus_name(cfg.collection_prefix, identity)
    if uri.endswith(".db"):  # opened by one process at a time (perhaps the agent): checked when it opens it
        return f"Milvus Lite file {uri}, collection {name}"
    try:
        client = _client(uri, cfg)
    except Exception as err:
        if not _unreachable(err):
            raise IndexError_(f"cannot connect to the Milvus server at {uri}: {err}",
                              "check [index] uri and token") from err  # fmt: skip
        return f"Milvus server {uri}: UNREACHABLE ({str(err).splitlines()[0][:300]}); not checked"
    try:
        version = check_server(client, uri)
        if not client.has_collection(name):
            return (
                f"Milvus server {uri} ({version}): collection {name} not created yet (the agent creates it)"
            )
        check_collection(client, name, identity.dimension)
        return f"Milvus server {uri} ({version}): collection {name} as ragd needs it"
    except IndexError_:
        raise
    except Exception as err:
        if not _unreachable(err):
            raise IndexError_(f"the Milvus server at {uri} refused a check: {err}", "see its log") from err
        return f"Milvus server {uri}: UNREACHABLE ({str(err).splitlines()[0][:300]}); not checked"
    finally:
        _close(client)


class MilvusIndex:
    def __init__(
        self,
        uri: str,
        identity: EmbeddingIdentity,
        cfg: IndexConfig,
        agent_id: str,
        read_only: bool,
    ) -> None:
        self._uri = uri
        self._identity = identity
        self._cfg = cfg
        self.agent_id = agent_id
        self._key = agent_key(agent_id)
        self._name = milvus_name(cfg.collection_prefix, identity)
        self._read_only = read_only
        self._client: Any = None
        self._closed = False
        self._lock = threading.RLock()  # one writer; connection set-up
        self._failures = 0
        self._retry_at = 0.0
        self._last_error: str | None = None
        self._used = time.monotonic()

    # -- opening ------------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls, data_dir: Path, identity: EmbeddingIdentity, cfg: IndexConfig, *, read_only: bool = False
    ) -> MilvusIndex:
        """A handle, connected now if the server answers; if it does not, the next use tries again (so an agent
        starts while its cluster is down). A collection that cannot serve this identity raises IndexError_."""
        uri = _client_ready(data_dir, cfg)
        if uri.endswith(".db"):
            Path(uri).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        agent = checked_text(cfg.agent_id or default_agent_id(data_dir), MAX_AGENT, "the agent's name")
        index = cls(uri, identity, cfg, agent, read_only)
        try:
            index._connected()
        except IndexUnavailable as err:
            log.warning("%s; the agent keeps its change notes and tries again", err.message)
        return index

    @property
    def path(self) -> Path:
        return Path(self._uri) if self._uri.endswith(".db") else PurePosixPath(self._uri, self._name)  # type: ignore[return-value]

    def _connected(self) -> Any:
        with self._lock:
            if self._closed:
                raise IndexError_(f"the index at {self._uri} ({self._name}) is closed", "reopen it")
            if self._client is not None:
                return self._client
            wait = self._retry_at - time.monotonic()
            if wait > 0:
                raise IndexUnavailable(f"the Milvus server at {self._uri} is unreachable ({self._last_error})",
                                       f"tried again in {wait:.0f} s; check the server and [index] uri")  # fmt: skip
            client = None
            try:
                client = _client(self._uri, self._cfg)
                self._prepare(client)
            except IndexError_ as err:  # a server too old, a collection made wrong: shown by `ragctl status`
                self._last_error = err.message
                _close(client)
                raise
            except Exception as err:
                _close(client)
                if self._uri.endswith(".db") and "open local milvus failed" in str(err).lower():
                    raise IndexBusy(f"the Milvus Lite file {self._uri} is open in another process (one process "
                                    "at a time may open one)", BUSY_HINT) from None  # fmt: skip
                raise self._failed(err, "connect") from err
            self._client, self._failures, self._last_error = client, 0, None
            log.info("index on Milvus at %s, collection %s, agent %s", self._uri, self._name, self.agent_id)
            return client

    def _failed(self, err: BaseException, op: str) -> IndexError_:
        if not _unreachable(err):
            return IndexError_(f"Milvus {op} failed ({self._uri}, {self._name}): {err}", "see the agent log")
        client, self._client = self._client, None
        if client is not None:  # its channel: not left open
            with contextlib.suppress(Exception):
                client.close()
        self._failures += 1
        delay = min(BACKOFF[0] * 2 ** (self._failures - 1), BACKOFF[1])
        self._retry_at = time.monotonic() + delay
        said = str(getattr(err, "message", "") or err or type(err).__name__)
        self._last_error = said.splitlines()[0][:300]
        return IndexUnavailable(f"the Milvus server at {self._uri} is unreachable ({self._last_error})",
                                "the agent keeps its change notes and tries again; check the server")  # fmt: skip

    @contextmanager
    def _call(self, op: str) -> Iterator[Any]:
        client = self._connected()
        self._used = time.monotonic()
        try:
            yield client
        except IndexError_:
            raise
        except Exception as err:
            raise self._failed(err, op) from err

    def _prepare(self, client: Any) -> None:
        """Check the server, create the collection if it is missing (the first agent with this identity), check
        it, load it. A server older than Milvus 2.5 is refused before anything is created on it; a collection this
        call created and could not finish (its indexes, its check, its load) is dropped again: nothing half-made
        is left on the server."""
        check_server(client, self._uri)
        if client.has_collection(self._name):
            check_collection(client, self._name, self._identity.dimension)
            client.load_collection(self._name)
            return
        if self._read_only:
            raise IndexError_(f"Milvus has no collection {self._name} at {self._uri}",
                              "start the agent once to create it")  # fmt: skip
        client.create_collection(self._name, schema=build_schema(self._identity.dimension))
        try:
            # not waited for here (Milvus Lite cannot tell when an index is done); loading waits for them
            client.create_index(self._name, index_params(client, self._cfg), sync=False)
            check_collection(client, self._name, self._identity.dimension)
            client.load_collection(self._name)
        except Exception as err:
            left = self._drop_unfinished(client, err)
            if _unreachable(err) and not isinstance(err, IndexError_):
                raise  # the server went away meanwhile: tried again later, as any connection
            said = str(getattr(err, "message", "") or err).splitlines()[0][:300]
            raise IndexError_(f"the Milvus server at {self._uri} could not make the collection {self._name} as "
                              f"ragd needs it ({said}); {left}", UNFINISHED) from err  # fmt: skip

    def _drop_unfinished(self, client: Any, err: BaseException) -> str:
        """Drop the collection `_prepare` created and could not finish; what is left on the server, said."""
        log.warning("dropping the Milvus collection %s just created at %s: %s", self._name, self._uri, err)
        try:
            client.drop_collection(self._name)
        except Exception as drop:
            log.warning("could not drop the unfinished collection %s at %s: %s", self._name, self._uri, drop)
            return f"dropping it again failed too ({str(drop).splitlines()[0][:200]}): drop it on the server"
        return "ragd dropped it again (nothing is left on the server)"

    # -- health ---------------------------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return {
            "backend": "milvus",
            "uri": self._uri,
            "collection": self._name,
            "agent": self.agent_id,
            "reachable": self._client is not None,
            "last_error": self._last_error,
            "retry_in_s": round(max(0.0, self._retry_at - time.monotonic()), 1)
            if self._client is None
            else 0.0,
        }

    # -- ids and filters ------------------------------------------------------------------------------------------
    def _pk(self, source_path: str, chunk_index: int) -> str:
        return primary_key(self._key, source_path, chunk_index)

    def _mine(self, *exprs: str | None) -> str:
        return M.all_of(M.equals(AGENT, self.agent_id), *exprs)

    def _rows(self, client: Any, flt: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """Every row of this agent matching `flt`. A query returns at most QUERY_LIMIT rows, and Milvus Lite has
        no query iterator, so the agent's primary keys (its key, "-", a uuid in hex) are read a range of them at a
        time: ranges by the uuid's first hex digits, as many as the count asks for, split again when one is full."""
        total = self._count(client, flt)
        if total == 0:
            return
        depth = 0
        while total / 16**depth > PAGE_ROWS:
            depth += 1
        prefixes = [""] if depth == 0 else [format(i, f"0{depth}x") for i in range(16**depth)]
        while prefixes:
            lo = f"{self._key}-{prefixes.pop()}"
            rows = client.query(self._name, filter=M.all_of(flt, f"{PK} >= {M.literal(lo)}",
                                                           f"{PK} < {M.literal(lo + '~')}"),
                                output_fields=[PK, *fields], limit=QUERY_LIMIT, consistency_level=STRONG)  # fmt: skip
            if len(rows) >= QUERY_LIMIT:  # perhaps more: ask again, a sixteenth at a time
                prefixes.extend(lo[len(self._key) + 1 :] + c for c in "0123456789abcdef")
                continue
            yield from rows

    def _count(self, client: Any, flt: str) -> int:
        rows = client.query(self._name, filter=flt, output_fields=["count(*)"], consistency_level=STRONG)
        return int(rows[0]["count(*)"]) if rows else 0

    # -- reads ----------------------------------------------------------------------------------------------------
    def count(self) -> int:
        with self._call("count") as client:
            return self._count(client, self._mine())

    def sources(self, prefix: str | None = None) -> dict[str, SourceSummary]:
        flt = self._mine(M.under(SOURCE_PATH, prefix) if prefix is not None else None)
        with self._call("scan") as client:
            rows = self._rows(client, flt, [SOURCE_PATH, SOURCE_MD5, CHUNK_INDEX])
            return records.summaries((r[SOURCE_PATH], r[SOURCE_MD5], int(r[CHUNK_INDEX])) for r in rows)

    def chunks(self, source_path: str) -> list[Hit]:
        with self._call("lookup") as client:
            rows = list(self._rows(client, self._mine(M.equals(SOURCE_PATH, source_path)), HIT_FIELDS))
        return sorted((to_hit(r, 0.0) for r in rows), key=lambda h: h.chunk_index)

    def query(
        self,
        *,
        vector: np.ndarray | None,
        text: str | None,
        k: int,
        path_prefixes: Sequence[str] = (),
        extensions: Sequence[str] = (),
        scope: str = "agent",
        where: Sequence[Where] = (),
    ) -> list[Hit]:
        if scope not in ("agent", "all"):
            raise ValueError(f"scope must be 'agent' or 'all', not {scope!r}")
        exts = records.extensions(extensions)
        flt = M.all_of(
            M.equals(AGENT, self.agent_id) if scope == "agent" else None,
            M.under_any(SOURCE_PATH, path_prefixes) if path_prefixes else None,
            M.any_of(EXT, exts) if exts else None,
            *(M.like(META_TERMS, w.pattern()) for w in where),
        )
        dense: hybrid.Dense | None = None
        if vector is not None:
            near = check_vector(vector, self._identity.dimension, "the query").tolist()
            dense = functools.partial(self._search, near, EMBEDDING, flt=flt)

        def keyword(terms: list[fts.Term], top: int, evidence: bool) -> list[Hit]:
            words = " ".join(t.text for t in terms)
            if not words:
                return []
            holds = phrases.matcher(terms)  # BM25 is a bag of words: phrases and identifiers checked here
            fields = HIT_FIELDS if holds is None else [*HIT_FIELDS, FTS_TEXT]
            rows = self._found(words, SPARSE, top, flt, fields)
            return [to_hit(row, score) for row, score in rows
                    if score > 0 and (holds is None or holds(str(row.get(FTS_TEXT, ""))))]  # fmt: skip

        return hybrid.query(dense, keyword, text, k, vector)

    def _search(self, data: Any, field: str, top: int, *, flt: str) -> list[Hit]:
        return [to_hit(row, score) for row, score in self._found(data, field, top, flt, HIT_FIELDS)]

    def _found(
        self, data: Any, field: str, top: int, flt: str, fields: list[str]
    ) -> list[tuple[dict[str, Any], float]]:
        """The top rows and their scores: COSINE similarity, or BM25 (which Milvus Lite gives negated)."""
        with self._call("query") as client:
            found = client.search(self._name, data=[data], anns_field=field, limit=top, filter=flt,
                                  output_fields=fields, consistency_level=SESSION)  # fmt: skip
        bm25 = field == SPARSE
        return [(h["entity"], abs(float(h["distance"])) if bm25 else float(h["distance"])) for h in found[0]]

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
        return self._delete_where(self._mine(M.under(SOURCE_PATH, dir_path)))

    def delete_all(self) -> int:
        """Every chunk of this agent (a rebuild); other agents' chunks stay."""
        return self._delete_where(self._mine())

    def flush(self) -> None:
        if self._read_only:
            return
        with self._lock, self._call("flush") as client:
            client.flush(self._name)

    # -- maintenance: the server's own -----------------------------------------------------------------------------
    @property
    def needs_optimize(self) -> bool:
        return False  # Milvus builds and merges its indexes itself

    def optimize(self) -> None:
        return None

    @property
    def needs_compaction(self) -> bool:
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

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
            if client is not None:
                try:
                    client.close()
                except Exception as err:
                    log.debug("closing the Milvus client: %s", err)
