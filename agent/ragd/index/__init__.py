"""The index: a derived, rebuildable store of embedded chunks that answers vector, keyword and hybrid queries.

The parts, each importing only those below it: `backend` (the interface and its value types), `where` and
`records` (what every backend stores the same way), `keyword/` (the keyword engine: words, terms, the tantivy
index, the Chinese-English lexicon), `ranking/` (the hybrid ranking every backend's query uses), the backends
`zvec/` and `milvus/`, `factory` (opening the configured one), and over them `query/` (the search service,
retrieval metrics) and `write/` (the index writer, sync with the sidecars, self-verification).

This package only re-exports the interface and the factory; importing it loads no storage engine.
"""

from .backend import (
    MAX_K,
    Hit,
    IndexBackend,
    IndexChunk,
    SourceSummary,
    SourceWrite,
    collection_dir,
    collection_name,
)
from .factory import check_index, destroy_index, open_index, open_or_rebuild

__all__ = [
    "MAX_K",
    "Hit",
    "IndexBackend",
    "IndexChunk",
    "SourceSummary",
    "SourceWrite",
    "check_index",
    "collection_dir",
    "collection_name",
    "destroy_index",
    "open_index",
    "open_or_rebuild",
]
