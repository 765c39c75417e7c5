"""The zvec collection's schema, and the conversion between IndexChunk/Hit and zvec documents.

Fields: `source_path`, `source_dir`, `root`, `ext` (inverted indexes, for filters), `source_md5`, `content_hash`,
`chunk_index`, `content` (the exact chunk text), `fts_text` (header + content, `fts.normalize`d: what the keyword
index beside the collection cuts into words, kept here so that it can be rebuilt: keywords.py), `heading_path` (" > " joined), `page` (nullable), `start_line`, `end_line`, `meta_terms` (the document's
metadata as filter terms, where.py), `metadata` (the same fields as JSON, for results), `lead` (the vector of the
document's lead, the same on each of its chunks: records.encode_lead, hybrid.py), and the dense vector
`embedding` (cosine; flat or HNSW per IndexConfig). Document id: uuid5(NAMESPACE_DNS, f"{source_path}#{chunk_index}"),
the scheme of the ragjson tool.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import zvec

from ...config import IndexConfig
from ...errors import IndexError_
from ...model import EmbeddingIdentity
from ..backend import Hit, IndexChunk
from ..keyword.fts import chunk_text
from ..records import HEADING_SEP, check_vector, doc_id, extension, read_metadata

SOURCE_PATH, SOURCE_DIR, ROOT, EXT = "source_path", "source_dir", "root", "ext"
SOURCE_MD5, CONTENT_HASH, CHUNK_INDEX = "source_md5", "content_hash", "chunk_index"
CONTENT, FTS_TEXT, HEADING_PATH = "content", "fts_text", "heading_path"
PAGE, START_LINE, END_LINE, SOURCE_CHUNKS = "page", "start_line", "end_line", "source_chunks"
META_TERMS, METADATA, LEAD = "meta_terms", "metadata", "lead"
EMBEDDING = "embedding"
HIT_FIELDS = [
    METADATA,
    SOURCE_PATH,
    ROOT,
    CHUNK_INDEX,
    CONTENT,
    HEADING_PATH,
    PAGE,
    START_LINE,
    END_LINE,
    SOURCE_CHUNKS,
    LEAD,
]


# The vectors are kept in half precision: an index's vectors are most of what the agent maps into memory (60,000 chunks:
# 122 MiB of FP32, 63 of FP16), and FP16 keeps the cosine ranking (recall@10 1.000 against exact FP32 on 60,000
# clustered 512-d vectors, flat and HNSW; docs/benchmarks.md). The sidecars keep FP32 (RAG-Storage-Spec v2.4).
VECTOR_TYPE = zvec.DataType.VECTOR_FP16


def created_type(cfg: IndexConfig) -> str:
    """The vector index a new collection gets: HNSW when configured, else flat ("auto" starts flat)."""
    return "hnsw" if cfg.type == "hnsw" else "flat"


def vector_param(cfg: IndexConfig, kind: str | None = None) -> Any:
    """The vector index parameters of `kind` ("flat" or "hnsw"; `created_type` when None)."""
    if (kind or created_type(cfg)) == "hnsw":
        return zvec.HnswIndexParam(
            metric_type=zvec.MetricType.COSINE, m=cfg.hnsw_m, ef_construction=cfg.hnsw_ef_construction
        )
    return zvec.FlatIndexParam(metric_type=zvec.MetricType.COSINE)


def build_schema(
    identity: EmbeddingIdentity, cfg: IndexConfig, kind: str | None = None
) -> zvec.CollectionSchema:
    inverted, string, int32 = zvec.InvertIndexParam(), zvec.DataType.STRING, zvec.DataType.INT32
    fields = [
        zvec.FieldSchema(name, string, index_param=inverted) for name in (SOURCE_PATH, SOURCE_DIR, ROOT, EXT)
    ]
    fields += [
        zvec.FieldSchema(name, string)
        for name in (SOURCE_MD5, CONTENT_HASH, CONTENT, FTS_TEXT, HEADING_PATH, META_TERMS, METADATA, LEAD)
    ]
    fields += [zvec.FieldSchema(name, int32) for name in (CHUNK_INDEX, START_LINE, END_LINE, SOURCE_CHUNKS)]
    fields.append(zvec.FieldSchema(PAGE, int32, nullable=True))
    vector = zvec.VectorSchema(
        EMBEDDING,
        VECTOR_TYPE,
        dimension=identity.dimension,
        index_param=vector_param(cfg, kind),
    )
    return zvec.CollectionSchema(name="ragd", fields=fields, vectors=[vector])


def schema_problem(schema: zvec.CollectionSchema, identity: EmbeddingIdentity) -> str | None:
    """Why an existing collection cannot serve `identity` (None when it can)."""
    names = {f.name for f in schema.fields}
    missing = {
        SOURCE_PATH,
        SOURCE_DIR,
        ROOT,
        EXT,
        SOURCE_MD5,
        CONTENT_HASH,
        CONTENT,
        FTS_TEXT,
        HEADING_PATH,
        CHUNK_INDEX,
        START_LINE,
        END_LINE,
        PAGE,
        SOURCE_CHUNKS,
        META_TERMS,
        METADATA,
        LEAD,
    } - names
    if missing:
        return f"it lacks the fields {sorted(missing)}"
    vector = schema.vector(EMBEDDING)
    if vector is None:
        return f"it has no vector field {EMBEDDING!r}"
    if vector.dimension != identity.dimension:
        return f"its vectors have dimension {vector.dimension}, not {identity.dimension}"
    if vector.data_type != VECTOR_TYPE:
        return f"its vectors are {vector.data_type.name}, not {VECTOR_TYPE.name}"
    return None


def check_text(value: str, what: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise IndexError_(
            f"cannot index {what} {value!r}: it is not valid UTF-8",
            "rename the file (zvec stores only UTF-8 text)",
        ) from None
    return value


def to_doc(
    source_path: str,
    source_md5: str,
    root: str,
    chunk: IndexChunk,
    dimension: int,
    source_chunks: int,
    metadata: tuple[str, str] = ("", ""),
    lead: str = "",
    *,
    fts_text: str | None = None,
    vector: np.ndarray | None = None,
) -> zvec.Doc:
    """The chunk's row; `vector`: its vector checked already (records.check_vectors, a source's together)."""
    where = f"{source_path}#{chunk.chunk_index}"
    fields: dict[str, Any] = {
        SOURCE_PATH: source_path,
        SOURCE_DIR: os.path.dirname(source_path),
        ROOT: root,
        EXT: extension(source_path),
        SOURCE_MD5: source_md5,
        CONTENT_HASH: chunk.content_hash,
        CHUNK_INDEX: chunk.chunk_index,
        CONTENT: check_text(chunk.content, f"the text of {where}"),
        # made by a parse worker (pipeline/cutwords.py), or here
        FTS_TEXT: chunk_text(chunk.header, chunk.content) if fts_text is None else fts_text,
        HEADING_PATH: check_text(HEADING_SEP.join(chunk.heading_path), f"the headings of {where}"),
        PAGE: chunk.page,
        START_LINE: chunk.start_line,
        END_LINE: chunk.end_line,
        SOURCE_CHUNKS: source_chunks,
        META_TERMS: metadata[0],
        METADATA: metadata[1],
        LEAD: lead,
    }
    if chunk.page is None:
        del fields[PAGE]
    if vector is None:
        vector = check_vector(chunk.vector, dimension, where)
    doc = zvec.Doc(id=doc_id(source_path, chunk.chunk_index), fields=fields)
    # The array itself, which zvec's binding reads as it is (FP32 or FP16 columns alike): `Doc(vectors=...)` makes
    # each vector a list of Python floats, 16 KiB for 512 dimensions, and a write holds all its documents at once
    # (1,024 chunks: 16 MiB among short-lived objects, at the peak of a big folder renamed; docs/benchmarks/history.md).
    doc.vectors = {EMBEDDING: vector}
    return doc


def to_hit(doc: zvec.Doc, score: float) -> Hit:
    f = doc.fields or {}
    heading = f.get(HEADING_PATH) or ""
    return Hit(
        source_path=f.get(SOURCE_PATH, ""),
        chunk_index=int(f.get(CHUNK_INDEX, 0)),
        score=score,
        content=f.get(CONTENT, ""),
        heading_path=tuple(heading.split(HEADING_SEP)) if heading else (),
        page=f.get(PAGE),
        start_line=int(f.get(START_LINE, 0)),
        end_line=int(f.get(END_LINE, 0)),
        root=f.get(ROOT, ""),
        source_chunks=int(f.get(SOURCE_CHUNKS) or 1),
        metadata=read_metadata(f.get(METADATA)),
        lead=str(f.get(LEAD) or ""),
    )
