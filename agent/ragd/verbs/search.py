"""`search`: the best passages for a query (docs/protocol.md), the same for ragctl, MCP and `ragd search`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path, PurePosixPath
from typing import Any, NotRequired, TypedDict

from .. import access
from ..access.scope import Scope
from ..index import MAX_K
from ..index.query.searchquery import SearchQuery
from ..index.ranking import hybrid
from ..paths import root_of
from ..resident.history import History
from ..resident.historydb import iso
from .arguments import bad
from .runtime import Runtime

__all__ = [
    "SearchQuery",
    "SearchResult",
    "search",
]  # the verb's arguments are the query (index/query/searchquery.py)


class SearchResult(TypedDict):
    query: str
    mode: str
    results: list[
        dict[str, Any]
    ]  # index.search.SearchResult.to_dict(): path, rel_path, root, chunk_index, ...
    files: NotRequired[list[dict[str, Any]]]  # with `files`: index.search.FileResult.to_dict()
    explain: NotRequired[dict[str, Any]]  # with `explain`: how the sides were fused


def search(rt: Runtime, args: SearchQuery) -> SearchResult:
    """The answer to `args`; with `explain`, each result (and each document's passage with `files`) carries its
    `explain` (fusion.Explanation.of) and the answer says how the sides were combined."""
    with hybrid.explaining() if args.explain else nullcontext() as why:
        found = _search(rt, args)
    if why is None:
        return found
    for hit in [*found["results"], *(c for f in found.get("files", ()) for c in f["chunks"])]:
        hit["explain"] = why.of(hit["path"], int(hit["chunk_index"]), float(hit["score"]))
    found["explain"] = why.query()
    return found


def _search(rt: Runtime, args: SearchQuery) -> SearchResult:
    rt.ready()
    _inside_roots(args.path_prefix, rt.roots, anywhere=args.reach == "all")
    history: History | None = getattr(rt, "history", None)
    # access scope: a scoped caller gets only hits it can read, so the index is asked for all it gives
    seen = access.scope()
    if args.reach == "all":
        access.require_full("searching every agent's files (reach all)")
    if args.files:
        k = args.top_k if seen.full else MAX_K
        files = rt.searcher().search_files(args, k=k)
        found = [f.to_dict() for f in seen.keep(files, lambda f: f.path)[: args.top_k]]
        if history is not None:
            _documents(history, found, seen)
            for f in found:
                _documents(history, f["chunks"], seen)
        return {"query": args.query, "mode": args.mode, "results": [f["chunks"][0] for f in found],
                "files": found}  # fmt: skip
    dups = history is not None and history.has_duplicates()
    # room for the copies folded into one hit, and for the hits a scoped caller may not see
    k = MAX_K if not seen.full else min(args.top_k * 2, MAX_K) if dups else args.top_k
    results = rt.searcher().search(args, k=k)
    hits = [r.to_dict() for r in seen.keep(results, lambda r: r.path)]
    if history is not None:
        hits = _documents(history, hits, seen, fold=dups)
    return {"query": args.query, "mode": args.mode, "results": hits[: args.top_k]}


def _documents(history: History, hits: list[dict[str, Any]], seen: Scope, *,
               fold: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Each hit with its document's identity and times (resident/history.py); with `fold`, the hits of files of
    the same content folded into the first, which lists the other paths of that content (those the caller may
    see) in `duplicates`."""
    known = history.live(h["path"] for h in hits)
    same = history.same_content(d.md5 for d in known.values()) if fold else {}
    done: set[tuple[str, int]] = set()
    out = []
    for hit in hits:
        doc = known.get(hit["path"])
        if doc is not None:
            hit.update(document_id=doc.id, modified_at=iso(doc.mtime), indexed_at=iso(doc.indexed_at))
            copies = same.get(doc.md5)
            if copies:
                key = (doc.md5, int(hit.get("chunk_index", -1)))
                if key in done:
                    continue
                done.add(key)
                hit["duplicates"] = seen.keep((p for p in copies if p != hit["path"]), lambda p: p)
        out.append(hit)
    return out


def _inside_roots(prefixes: Sequence[str], roots: Sequence[Path], *, anywhere: bool = False) -> None:
    """Each `path_prefix` a directory under a root: never one with `..` (it would step out of the roots) and, unless
    `anywhere` (every agent's files), never an absolute one outside them (it matched nothing and looked like "no
    results")."""
    names = ", ".join(str(r) for r in roots) or "(none)"
    for raw in prefixes:
        if "\0" in raw or ".." in PurePosixPath(raw).parts:
            raise bad(f"path_prefix {raw!r} may not contain '..' or a NUL byte",
                      f"give a directory inside a root; roots: {names}")  # fmt: skip
        path = os.path.normpath(raw)
        if os.path.isabs(path) and not anywhere and root_of(Path(path), roots) is None:
            raise bad(f"path_prefix {path} is not under any root of this agent",
                      f"search under one of the roots: {names}")  # fmt: skip
