"""The index the agent serves (agent.py opens it): `IndexServing` makes its searcher, records the roots it was made
to hold (rootstate.Served: a fill cut short is done again at the next start), and fills it from the sidecars of a
root new to it, or drops the entries of a root gone from it, before the first verification would repair them one by
one."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import numpy as np

from ..index import IndexBackend
from ..index.query.search import SearchService
from ..index.write.sync import IndexSync
from ..paths import is_under, outermost, under_any
from . import rootstate
from .runtime import AgentRuntime

# the agent's log: its lines keep the name they have always had (docs/operations.md quotes them)
log = logging.getLogger("ragd.resident.agent")

NOT_A_ROOT = "its root was removed"  # the detail of the "deleted" event of each of a removed root's documents


class IndexServing(AgentRuntime):
    """The index the agent serves: searched, filled from the sidecars, and told which roots it serves."""

    def _search_over(self, index: IndexBackend) -> SearchService:
        return SearchService(index, self._embed_query, self.roots)

    def _embed_query(self, text: str) -> np.ndarray:
        return self.embed.query(text)

    def _drop_gone(self, served: list[Path]) -> None:
        """At start-up, a root gone since the index last held it (the config file edited while the agent was
        stopped) leaves the index before the first verification, which would otherwise remove its sources one by
        one, each a warning."""
        for gone in outermost(served):
            if not under_any(gone, self.roots):
                log.info("%s is no longer a root; its entries leave the index", gone)
                nested = [r for r in self.roots if is_under(r, gone)]
                self.indexer.call(partial(drop_subtree, root=gone, keep=nested))
                self.changes.removed(gone, keep=nested, detail=NOT_A_ROOT)

    def _fill_new(self, served: list[Path]) -> None:
        """At start-up, a root new since the index last held it is filled from the sidecars already there (a tree
        indexed before, or by the ragjson tool), before the first verification, which would otherwise repair its
        sources one by one and skip a folder busy at that moment until the next periodic pass."""
        for r in outermost(self.roots):
            if not under_any(r, served):
                self.indexer.call(partial(fill_root, root=r))

    def _fill(self, sync: IndexSync) -> int:
        """(On the writer thread.) Fill the index from the sidecars of every root; only then are the roots recorded
        as served with the index filled (an agent killed before does the fill again at its next start)."""
        roots = list(sync.roots)
        report = sync.reconcile(None)
        if report.repaired:
            log.info("the index was filled from the sidecars already there: %d sources", report.repaired)
        self._filled = True
        self._save_served(roots)
        return report.repaired

    def _record_served(self) -> None:
        """Record the roots served now once the index has taken the writes queued before (their fills, their
        removals): on the writer thread, in order, so that a root is never recorded before its fill is done. The
        roots entering until now have then been filled (or dropped): no longer entering."""
        roots = list(self.roots)
        with self._served_lock:
            done = set(self._entering)

        def record(_sync: IndexSync) -> None:
            with self._served_lock:
                self._entering -= done
            self._save_served(roots)

        self.indexer.call(record)

    def _mark_entering(self, roots: list[Path]) -> None:
        """Before anything of these new roots is written to the index (their fill, their jobs' change notes):
        recorded as entering, so that a start after a kill knows the index may hold some of their sources."""
        if not roots:
            return
        # one hold: a record the writer makes meanwhile is never overwritten by an older one
        with self._served_lock:
            self._entering.update(roots)
            self._write_served(self._served_roots)

    def _save_served(self, roots: list[Path]) -> None:
        """Write served-roots.json: `roots` served, the fill done or not, and the roots entering now (in the order
        of the calls: a record queued earlier never drops a root marked entering since)."""
        with self._served_lock:
            self._write_served(roots)

    def _write_served(self, roots: list[Path]) -> None:
        """(Under `_served_lock`.) served-roots.json as `_save_served` describes it."""
        self._served_roots = list(roots)
        entering = [r for r in self._entering if r not in roots]
        try:
            rootstate.save_served(self.data_dir, str(self.indexer.index.path), roots, filled=self._filled,
                                  entering=entering)  # fmt: skip
        except OSError as err:  # the next start then fills the index from the sidecars
            log.warning("cannot record the roots served in %s: %s", self.data_dir, err)


def fill_root(sync: IndexSync, root: Path) -> int:
    """A root added while the agent runs: what its sidecars already hold (a root removed and added again, a folder
    the ragjson tool indexed) is served at once, not left to the verification after its rescan, which found it
    missing and repaired it, or skipped a folder busy at that moment and left its files out of search until the
    next periodic check. Its directory jobs then change only what changed; the sources of a root nested in it are
    already right and stay as they are."""
    n = sync.sync_subtree(root)
    if n:
        log.info("%s: %d sources served from the sidecars already there", root, n)
    return n


def drop_subtree(sync: IndexSync, root: Path, keep: list[Path]) -> int:
    """Remove a root's sources from the index, except those under a nested root that stays."""
    if not keep:
        n = sync.index.delete_subtree(str(root))
    else:
        n = 0
        for path in sync.index.sources(str(root)):
            if not under_any(Path(path), keep):
                n += sync.index.delete_source(path)
    sync.flush()
    return n
