"""Reaching a Milvus server for MilvusIndex: the client made lazily, the collection checked or created on first
contact, and a server that does not answer retried after a back-off (1 s doubling to 60 s), as IndexUnavailable
meanwhile; `check_server_of` is `ragd config check`'s look at the server."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from ...config import IndexConfig
from ...errors import IndexBusy, IndexError_, IndexUnavailable
from ...model import EmbeddingIdentity
from ..backend import BUSY_HINT
from . import filters as M
from .schema import (
    AGENT,
    agent_key,
    build_schema,
    check_collection,
    check_server,
    index_params,
    milvus_name,
    primary_key,
)

log = logging.getLogger(__name__)
for _noisy in ("faiss", "milvus_lite"):  # each logs its every step at INFO
    logging.getLogger(_noisy).setLevel(logging.WARNING)
# a Lite file held by another process: said once, as IndexBusy, not with milvus_lite's traceback
logging.getLogger("milvus_lite.server_manager").setLevel(logging.CRITICAL)

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


def said(err: BaseException, limit: int = 300) -> str:
    """What an error of the server or the client says, in a line (pymilvus's own message, not its repr)."""
    return (str(getattr(err, "message", "") or err or type(err).__name__).splitlines() or [""])[0][:limit]


def client_ready(data_dir: Path, cfg: IndexConfig) -> str:
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
    uri = client_ready(data_dir, cfg)
    name = milvus_name(cfg.collection_prefix, identity)
    if uri.endswith(".db"):  # opened by one process at a time (perhaps the agent): checked when it opens it
        return f"Milvus Lite file {uri}, collection {name}"
    try:
        client = _client(uri, cfg)
    except Exception as err:
        if not _unreachable(err):
            raise IndexError_(f"cannot connect to the Milvus server at {uri}: {said(err)}",
                              "check [index] uri and token") from err  # fmt: skip
        return f"Milvus server {uri}: UNREACHABLE ({said(err)}); not checked"
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
            raise IndexError_(
                f"the Milvus server at {uri} refused a check: {said(err)}", "see its log"
            ) from err
        return f"Milvus server {uri}: UNREACHABLE ({said(err)}); not checked"
    finally:
        _close(client)


class MilvusConnection:
    """The handle's connection and identity: which server, collection and agent, and whether it answers."""

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
        self._last_error = said(err)
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
            raise IndexError_(f"the Milvus server at {self._uri} could not make the collection {self._name} as "
                              f"ragd needs it ({said(err)}); {left}", UNFINISHED) from err  # fmt: skip

    def _drop_unfinished(self, client: Any, err: BaseException) -> str:
        """Drop the collection `_prepare` created and could not finish; what is left on the server, said."""
        log.warning("dropping the Milvus collection %s just created at %s: %s", self._name, self._uri, err)
        try:
            client.drop_collection(self._name)
        except Exception as drop:
            log.warning("could not drop the unfinished collection %s at %s: %s", self._name, self._uri, drop)
            return f"dropping it again failed too ({said(drop, 200)}): drop it on the server"
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
