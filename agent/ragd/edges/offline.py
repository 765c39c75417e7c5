"""The verbs' `Runtime` without an agent: the offline `ragd search` and `ragd orphans` (when no agent holds the index).

The index is opened for the command (read-only unless it writes); a write runs at once on the calling thread,
which is the only one; the search embeds the query with the configured embedder, loaded only if a query needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..config import Config, data_dir
from ..errors import RagdError
from ..index import collection_dir
from ..pipeline.scan import Ignore

if TYPE_CHECKING:
    from ..index import IndexBackend
    from ..index.query.search import SearchService
    from ..index.write.sync import IndexSync
    from ..resident.history import History

T = TypeVar("T")


class Offline:
    def __init__(self, config: Config, index: IndexBackend) -> None:
        self.config = config
        # a path argument must lie under a root; with none configured (the index was made by `ragd run --once DIR`)
        # any path may be named, as the index may hold any
        self.roots = [Path(r) for r in config.roots] or [Path("/")]
        self.ignore = Ignore(config.ignore)
        self._index = index
        self._searcher: SearchService | None = None
        self._history: History | None = None

    @property
    def history(self) -> History | None:
        """The data directory's document history, if there is one (search results then carry document ids)."""
        from ..resident.history import open_history
        from ..resident.historydb import FILE_NAME

        if self._history is None and (data_dir(self.config) / FILE_NAME).is_file():
            self._history = open_history(self.config, data_dir(self.config))
        return self._history

    def close(self) -> None:
        if self._history is not None:
            self._history.close()

    def ready(self) -> None:
        pass

    def searcher(self) -> SearchService:
        if self._searcher is None:
            from ..index.query.search import SearchService
            from ..pipeline.embed import MODELS, make_embedder

            # loads nothing until a query needs a vector
            embedder = make_embedder(self.config.embedding, models=data_dir(self.config) / MODELS)
            self._searcher = SearchService(self._index, lambda q: embedder.embed([q])[0], self.config.roots)
        return self._searcher

    def reader(self) -> IndexBackend:
        return self._index

    def write(self, fn: Callable[[IndexSync], T]) -> Future[T]:
        from ..index.write.sync import IndexSync

        fut: Future[T] = Future()
        try:
            fut.set_result(
                fn(IndexSync(self._index, self.config.identity, list(self.config.roots), self.ignore))
            )
        except BaseException as err:  # handed to the caller, as the agent's writer does
            fut.set_exception(err)
        return fut


@contextmanager
def offline(config: Config, *, writes: bool = False) -> Iterator[Offline]:
    """The index of `config` opened for one command; RagdError(usage) when there is none yet."""
    from ..index import open_index
    from ..index.keyword import lexicon

    if config.index.backend == "zvec" and not collection_dir(data_dir(config), config.identity).exists():
        raise RagdError(f"no index for {config.identity.model_name} in {data_dir(config)}",
                        "index a folder first: `ragd run --once DIR`", code="usage")  # fmt: skip
    idx = open_index(data_dir(config), config.identity, config.index, read_only=not writes)
    lexicon.use_cache(data_dir(config))
    rt = Offline(config, idx)
    try:
        yield rt
    finally:
        rt.close()
        idx.close()
