"""Search service: embed a query (cached), ask the index, and shape the hits for people and tools.

It takes a `SearchQuery` (searchquery.py), validated where it came in, and trusts it: the control verb, MCP, the
web page and `ragd search` all reach it through the `search` verb (verbs/search.py) with the same results.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import RagdError
from ..backend import MAX_K, Hit, IndexBackend
from ..keyword.fts import fold_char, terms
from ..zvec.filters import is_under
from .searchquery import SearchQuery

SNIPPET_CHARS = 240
ONE_PER_FILE_FACTOR = 5  # candidates fetched per wanted result when only the best chunk of each file is kept
FILE_CANDIDATES = 10  # chunks fetched per wanted document in file mode (at most MAX_K in all)
CHUNKS_PER_FILE = 3  # a document's best chunks shown in file mode
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class SearchResult:
    path: str  # absolute
    rel_path: str  # relative to `root`
    root: str
    chunk_index: int
    score: float  # cosine similarity (vector), BM25 (keyword) or reciprocal-rank fusion (hybrid): higher is better
    content: str
    heading_path: tuple[str, ...]
    page: int | None
    start_line: int
    end_line: int
    snippet: str
    agent: str = ""  # on a shared index (Milvus): the agent whose machine holds the file
    metadata: dict[str, Any] = field(
        default_factory=dict
    )  # its document's metadata fields (docs/metadata.md)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["heading_path"] = list(self.heading_path)
        for key in ("agent", "metadata"):
            if not data[key]:
                del data[key]
        return data


@dataclass(frozen=True)
class FileResult:
    """A document that matched: ranked by its best chunk, with how many of its chunks were among the candidates."""

    path: str
    rel_path: str
    root: str
    score: float  # its best chunk's
    matches: int  # its chunks among the query's candidates (FILE_CANDIDATES per document asked for)
    chunks: tuple[SearchResult, ...]  # its best chunks, best first (at most CHUNKS_PER_FILE)

    def to_dict(self) -> dict[str, Any]:
        agent = {"agent": self.chunks[0].agent} if self.chunks and self.chunks[0].agent else {}
        metadata = {"metadata": self.chunks[0].metadata} if self.chunks and self.chunks[0].metadata else {}
        return {"path": self.path, "rel_path": self.rel_path, "root": self.root, "score": self.score,
                "matches": self.matches, "chunks": [c.to_dict() for c in self.chunks], **agent,
                **metadata}  # fmt: skip


def _usage(message: str, hint: str) -> RagdError:
    return RagdError(message, hint, code="usage")


def _norm(path: str | Path) -> str:
    return os.path.normpath(os.path.expanduser(str(path)))


class SearchService:
    def __init__(
        self,
        index: IndexBackend,
        embed_query: Callable[[str], np.ndarray],
        roots: Sequence[Path],
        *,
        cache_size: int = 256,
    ) -> None:
        self._index = index
        # longest first, so that a file in nested roots belongs to the innermost one
        self._roots = sorted({_norm(r) for r in roots}, key=len, reverse=True)

        def embed(text: str) -> np.ndarray:
            vec = np.array(embed_query(text), dtype=np.float32).reshape(-1)
            vec.setflags(write=False)  # shared by every caller of the cache
            return vec

        self._embed = functools.lru_cache(maxsize=cache_size)(embed)

    def search(
        self, q: SearchQuery, *, k: int | None = None, roots: Sequence[str] = ()
    ) -> list[SearchResult]:
        """The best `k` (default `q.top_k`) chunks for `q`, of the documents whose metadata matches every filter of
        `q.where` (index/where.py); `roots`: only under these of the service's roots."""
        k = k or q.top_k
        fetch = min(k * ONE_PER_FILE_FACTOR, MAX_K) if q.one_per_file else k
        hits = self._hits(q, fetch, roots)
        if q.one_per_file:
            hits = _best_per_file(hits)
        return [self._result(h, q.text) for h in hits[:k]]

    def search_files(
        self, q: SearchQuery, *, k: int | None = None, roots: Sequence[str] = ()
    ) -> list[FileResult]:
        """The best `k` (default `q.top_k`) documents for `q` (for "which files are about ..."), each with its best
        chunks."""
        k = k or q.top_k
        hits = self._hits(q, min(k * FILE_CANDIDATES, MAX_K), roots)
        by_file: dict[tuple[str, str], list[Hit]] = {}
        for (
            h
        ) in hits:  # best first: a document's rank is its best chunk's (the same path on two machines: two)
            by_file.setdefault((h.agent, h.source_path), []).append(h)
        found = []
        for chunks in list(by_file.values())[:k]:
            best = [self._result(h, q.text) for h in chunks[:CHUNKS_PER_FILE]]
            found.append(FileResult(best[0].path, best[0].rel_path, best[0].root, best[0].score, len(chunks),
                                    tuple(best)))  # fmt: skip
        return found

    def _hits(self, q: SearchQuery, fetch: int, roots: Sequence[str]) -> list[Hit]:
        # every agent's files: under the prefixes asked for, not under this agent's roots
        within = self._scope(q.path_prefix, roots, every_root=q.reach != "all" or bool(roots))
        if within is None:
            return []
        vector = self._embed(q.text) if q.mode != "keyword" else None
        return self._index.query(vector=vector, text=q.text if q.mode != "vector" else None, k=fetch,
                                 path_prefixes=within, extensions=q.ext, scope=q.reach, where=q.filters)  # fmt: skip

    def _scope(
        self, path_prefixes: Sequence[str], roots: Sequence[str], *, every_root: bool = True
    ) -> list[str] | None:
        """The path prefixes a query is limited to ([] = everything), or None when nothing can match.
        `every_root` False: no root limits it (another agent's files lie under that agent's roots)."""
        chosen = [_norm(r) for r in roots]
        unknown = [r for r in chosen if r not in self._roots]
        if unknown:
            raise _usage(
                f"not a configured root: {unknown[0]}", f"roots are: {', '.join(self._roots) or '(none)'}"
            )
        bases = chosen or (self._roots if every_root else [])
        prefixes: list[str] = []
        for p in path_prefixes:
            if os.path.isabs(_norm(p)):
                prefixes.append(_norm(p))
            else:
                prefixes.extend(_norm(os.path.join(b, p)) for b in bases)
        if not prefixes:
            return list(bases)
        if not bases:
            return prefixes
        kept = [p for p in prefixes if any(is_under(p, b) for b in bases)]
        kept += [b for b in bases if any(is_under(b, p) for p in prefixes)]
        return list(dict.fromkeys(kept)) or None

    def _root_of(self, hit: Hit) -> str:
        for r in self._roots:
            if is_under(hit.source_path, r):
                return r
        return hit.root

    def _result(self, hit: Hit, query: str) -> SearchResult:
        root = self._root_of(hit)
        rel = (
            os.path.relpath(hit.source_path, root)
            if root and is_under(hit.source_path, root)
            else hit.source_path
        )
        return SearchResult(
            path=hit.source_path,
            rel_path=rel,
            root=root,
            chunk_index=hit.chunk_index,
            score=hit.score,
            content=hit.content,
            heading_path=hit.heading_path,
            page=hit.page,
            start_line=hit.start_line,
            end_line=hit.end_line,
            snippet=snippet(hit.content, query),
            agent=hit.agent,
            metadata=dict(hit.metadata),
        )


def _best_per_file(hits: list[Hit]) -> list[Hit]:
    seen: set[tuple[str, str]] = set()
    out = []
    for h in hits:
        if (h.agent, h.source_path) not in seen:
            seen.add((h.agent, h.source_path))
            out.append(h)
    return out


def _candidates(query: str) -> list[str]:
    out = []
    for t in terms(query):
        out.append(t.text)
        if not t.phrase:  # a CJK run: its words are unknown here, so also try its shorter pieces
            run = t.text[:12]
            out += [run[i : i + n] for n in range(len(run) - 1, 1, -1) for i in range(len(run) - n + 1)]
    return out


def _find(content: str, query: str) -> tuple[int, int] | None:
    """(position, length) of the longest query term found in `content`, case-insensitively."""
    hay = "".join(fold_char(ch) for ch in content)  # same length as content: offsets stay valid
    best: tuple[int, int] | None = None
    for cand in _candidates(query):
        pos = hay.find(cand.lower())
        if pos >= 0 and (best is None or len(cand) > best[1]):
            best = (pos, len(cand))
    return best


def snippet(content: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """About `width` characters of `content` around the best matching query term (else its start)."""
    found = _find(content, query)
    start = 0
    if found is not None:
        pos, length = found
        start = max(0, min(pos - (width - length) // 3, len(content) - width))
        space = content.rfind(" ", max(0, start - 15), start + 1)
        start = space + 1 if start > 0 and space >= 0 else start
    end = min(len(content), start + width)
    if end < len(content):
        space = content.rfind(" ", end - 15, end)
        end = space if space > start else end
    text = _SPACES.sub(" ", content[start:end]).strip()
    return ("…" if start > 0 else "") + text + ("…" if end < len(content) else "")
