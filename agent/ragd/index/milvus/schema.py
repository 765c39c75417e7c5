"""The Milvus collection's schema, its check, and the conversion between IndexChunk/Hit and Milvus rows.

Fields: `pk` (primary key: the agent's key, "-", the ragjson document id), `doc_id`, `agent`, `source_path`,
`source_dir`, `root`, `ext`, `source_md5`, `content_hash`, `content`, `fts_text` (header + content, `fts.normalize`d,
analysed by jieba for BM25), `sparse` (its BM25 vector, made by Milvus), `heading_path`, `chunk_index`,
`source_chunks`, `start_line`, `end_line`, `page` (nullable), `meta_terms` (the document's metadata as filter terms,
where.py), `metadata` (the same fields as JSON, for results), `lead` (the vector of the document's lead, the same on
each of its chunks: records.encode_lead, hybrid.py) and `embedding` (COSINE; FLAT or HNSW per IndexConfig).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any

from ...config import IndexConfig
from ...errors import IndexError_
from ...model import EmbeddingIdentity
from ..backend import MILVUS_SCHEMA_VERSION, Hit, SourceWrite, collection_name
from ..keyword.fts import normalize
from ..records import (
    HEADING_SEP,
    check_vector,
    doc_id,
    encode_lead,
    extension,
    metadata_columns,
    read_metadata,
)

PK, DOC_ID, AGENT = "pk", "doc_id", "agent"
SOURCE_PATH, SOURCE_DIR, ROOT, EXT = "source_path", "source_dir", "root", "ext"
SOURCE_MD5, CONTENT_HASH, CHUNK_INDEX, SOURCE_CHUNKS = (
    "source_md5",
    "content_hash",
    "chunk_index",
    "source_chunks",
)
CONTENT, FTS_TEXT, SPARSE, HEADING_PATH = "content", "fts_text", "sparse", "heading_path"
PAGE, START_LINE, END_LINE, EMBEDDING = "page", "start_line", "end_line", "embedding"
META_TERMS, METADATA, LEAD = "meta_terms", "metadata", "lead"
HIT_FIELDS = [SOURCE_PATH, ROOT, AGENT, CHUNK_INDEX, CONTENT, HEADING_PATH, PAGE, START_LINE, END_LINE,
              SOURCE_CHUNKS, METADATA, LEAD]  # fmt: skip
REQUIRED = {PK, DOC_ID, AGENT, SOURCE_PATH, SOURCE_DIR, ROOT, EXT, SOURCE_MD5, CONTENT_HASH, CHUNK_INDEX,
            SOURCE_CHUNKS, CONTENT, FTS_TEXT, SPARSE, HEADING_PATH, PAGE, START_LINE, END_LINE, EMBEDDING,
            META_TERMS, METADATA, LEAD}  # fmt: skip
# English words stemmed on a Milvus server (run finds running); Milvus Lite 3.2 accepts the filter, applies none
ANALYZER = {"tokenizer": "jieba", "filter": ["lowercase", {"type": "stemmer", "language": "english"}]}
MAX_TEXT = 65_535  # bytes in a VARCHAR (Milvus's largest)
MAX_AGENT = 1_024  # bytes of an agent's name
MAX_PATH = 4_096
MAX_TERMS = 32_768  # bytes of a document's filter terms (pipeline.metadata.MAX_TERMS_BYTES keeps them below)


def default_agent_id(data_dir: Path) -> str:
    return f"{socket.gethostname()}:{Path(data_dir).expanduser().resolve()}"


def agent_key(agent_id: str) -> str:
    return hashlib.sha256(agent_id.encode("utf-8")).hexdigest()[:16]


def milvus_name(prefix: str, identity: EmbeddingIdentity) -> str:
    """Milvus allows letters, digits and underscores in a collection's name (at most 255, not a digit first)."""
    return (prefix + re.sub(r"[^A-Za-z0-9_]", "_", collection_name(identity, MILVUS_SCHEMA_VERSION)))[:255]


def checked_text(value: str, limit: int, what: str) -> str:
    size = len(value.encode("utf-8", "surrogatepass"))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise IndexError_(f"cannot index {what} {value[:80]!r}: it is not valid UTF-8",
                          "rename the file (Milvus stores only UTF-8 text)") from None  # fmt: skip
    if size > limit:
        raise IndexError_(f"cannot index {what}: {size} bytes, Milvus holds at most {limit}",
                          "use a smaller [splitter] chunk_size")  # fmt: skip
    return value


def build_schema(dimension: int) -> Any:
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field(PK, DataType.VARCHAR, is_primary=True, max_length=64)
    s.add_field(DOC_ID, DataType.VARCHAR, max_length=64)
    s.add_field(AGENT, DataType.VARCHAR, max_length=MAX_AGENT)
    for name in (SOURCE_PATH, SOURCE_DIR, ROOT):
        s.add_field(name, DataType.VARCHAR, max_length=MAX_PATH)
    s.add_field(EXT, DataType.VARCHAR, max_length=256)
    s.add_field(SOURCE_MD5, DataType.VARCHAR, max_length=64)
    s.add_field(CONTENT_HASH, DataType.VARCHAR, max_length=128)
    s.add_field(CONTENT, DataType.VARCHAR, max_length=MAX_TEXT)
    s.add_field(
        FTS_TEXT, DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True, analyzer_params=ANALYZER
    )
    s.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
    s.add_field(HEADING_PATH, DataType.VARCHAR, max_length=MAX_TEXT)
    for name in (CHUNK_INDEX, SOURCE_CHUNKS, START_LINE, END_LINE):
        s.add_field(name, DataType.INT32)
    s.add_field(PAGE, DataType.INT32, nullable=True)
    s.add_field(META_TERMS, DataType.VARCHAR, max_length=MAX_TERMS)
    s.add_field(METADATA, DataType.VARCHAR, max_length=MAX_TEXT)
    s.add_field(LEAD, DataType.VARCHAR, max_length=lead_length(dimension))
    s.add_field(EMBEDDING, DataType.FLOAT_VECTOR, dim=dimension)
    s.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=[FTS_TEXT],
                            output_field_names=[SPARSE]))  # fmt: skip
    return s


def lead_length(dimension: int) -> int:
    """The base64 characters of a lead vector of `dimension` (records.encode_lead: two bytes a coordinate)."""
    return 4 * ((2 * dimension + 2) // 3)


def index_params(client: Any, cfg: IndexConfig) -> Any:
    params = client.prepare_index_params()
    params.add_index(field_name=SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    if cfg.type == "hnsw":
        params.add_index(field_name=EMBEDDING, index_type="HNSW", metric_type="COSINE",
                         params={"M": cfg.hnsw_m, "efConstruction": cfg.hnsw_ef_construction})  # fmt: skip
    else:
        params.add_index(field_name=EMBEDDING, index_type="FLAT", metric_type="COSINE")
    for name in (AGENT, SOURCE_PATH, EXT):
        params.add_index(field_name=name, index_type="INVERTED")
    return params


# What ragd needs of a server: full-text search (a BM25 function over an analysed VARCHAR), the jieba tokenizer and
# the stemmer filter, and nullable fields all came with Milvus 2.5 (sparse vectors and INVERTED indexes with 2.4).
# An older server accepts create_collection and drops what it does not know, leaving a collection that cannot work.
MIN_VERSION = (2, 5, 0)
NEEDS = "full-text (BM25) search with the jieba analyzer, and nullable fields"
UPGRADE = "upgrade the server to Milvus 2.5 or newer (docs/scale-out.md), or use the zvec backend"
SCALAR_INDEXED = (AGENT, SOURCE_PATH, EXT)


def parse_version(said: str) -> tuple[int, int, int] | None:
    """`v2.3.5-lite`, `2.5.4`, `v2.6.0-rc1`: (major, minor, patch); None when it names no version."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", said or "")
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def check_server(client: Any, uri: str) -> str:
    """The server's version, as it says it; IndexError_ when it is older than MIN_VERSION (checked before ragd
    creates anything on it)."""
    said = str(client.get_server_version() or "").strip()
    version = None if said.startswith("milvus_lite") else parse_version(said)  # Lite 3.2+ (pyproject.toml)
    if version is not None and version < MIN_VERSION:
        raise IndexError_(f"the Milvus server at {uri} is {said}: ragd needs Milvus "
                          f"{'.'.join(map(str, MIN_VERSION[:2]))} or newer ({NEEDS})", UPGRADE)  # fmt: skip
    return said


def _params(field: dict[str, Any]) -> dict[str, Any]:
    params = dict(field.get("params") or {})
    analyzer = params.get("analyzer_params")
    if isinstance(analyzer, str):
        try:
            params["analyzer_params"] = json.loads(analyzer)
        except ValueError:
            params["analyzer_params"] = {}
    return params


def _is_bm25(kind: Any) -> bool:
    """A function's type as a server says it: FunctionType.BM25, its number (1) or its name."""
    from pymilvus import FunctionType

    return kind == FunctionType.BM25 or str(kind) in ("1", "BM25") or str(kind).endswith(".BM25")


def _names(said: Any) -> list[str]:
    """Field names as a list, or as Milvus Lite says them ("['fts_text']")."""
    if isinstance(said, str):
        return re.findall(r"[A-Za-z0-9_]+", said)
    return [str(n) for n in said or []]


def _type_name(kind: Any) -> str:
    from pymilvus import DataType

    try:
        return DataType(int(kind)).name
    except ValueError:
        return str(kind)


def _unlike(fields: dict[str, dict[str, Any]], dimension: int) -> list[str]:
    """The fields of another type than ragd's, or a VARCHAR shorter than ragd writes (for vectors of `dimension`), as
    what the collection lacks."""
    out = []
    for want in build_schema(dimension).to_dict()["fields"]:
        name, kind, has = want["name"], want["type"], fields[want["name"]]
        if int(has.get("type", -1)) != int(kind):
            out.append(f"{name} as {_type_name(kind)} (it is {_type_name(has.get('type'))})")
            continue
        longest = int((want.get("params") or {}).get("max_length", 0))
        if longest and int(_params(has).get("max_length", 0)) < longest:
            out.append(f"{name} of up to {longest} bytes (it holds {_params(has).get('max_length')})")
    return out


def collection_problems(client: Any, name: str, dimension: int) -> list[str]:
    """What the existing collection `name` lacks of what ragd relies on (empty: it is right)."""
    described = client.describe_collection(name)
    fields = {f["name"]: f for f in described.get("fields") or []}
    missing = REQUIRED - set(fields)
    if missing:
        return [f"the fields {sorted(missing)}"]
    dim = int(_params(fields[EMBEDDING]).get("dim", 0))
    # the fields as ragd makes them for the dimension the collection holds (a lead's length follows it): a wrong
    # dimension is said once, below
    out = _unlike(fields, dim or dimension)
    if dim != dimension:
        out.append(f"vectors of dimension {dimension} (it holds {dim})")
    fts = _params(fields[FTS_TEXT])
    analyzer = fts.get("analyzer_params") or {}
    if (
        str(fts.get("enable_analyzer")).lower() != "true"
        or analyzer.get("tokenizer") != ANALYZER["tokenizer"]
    ):
        out.append(f"the jieba analyzer on {FTS_TEXT}")
    elif not any(isinstance(f, dict) and f.get("type") == "stemmer" for f in analyzer.get("filter") or []):
        out.append(f"the stemmer filter of {FTS_TEXT}'s analyzer")
    bm25 = [f for f in described.get("functions") or []
            if _is_bm25(f.get("type")) and _names(f.get("input_field_names")) == [FTS_TEXT]
            and _names(f.get("output_field_names")) == [SPARSE]]  # fmt: skip
    if not bm25:
        out.append(f"the BM25 function from {FTS_TEXT} to {SPARSE}")
    if not fields[PAGE].get("nullable"):
        out.append(f"a nullable {PAGE} field")
    indexed = {}
    for index in client.list_indexes(name) or []:
        said = client.describe_index(name, index) or {}
        indexed[said.get("field_name", index)] = said
    sparse = indexed.get(SPARSE)
    if sparse is None or str(sparse.get("metric_type", "")).upper() != "BM25":
        out.append(f"the BM25 index on {SPARSE}")
    vector = indexed.get(EMBEDDING)
    if vector is None or str(vector.get("metric_type", "")).upper() != "COSINE":
        out.append(f"the COSINE vector index on {EMBEDDING}")
    unindexed = [f for f in SCALAR_INDEXED if f not in indexed]
    if unindexed:
        out.append(f"INVERTED indexes on {', '.join(unindexed)}")
    return out


def check_collection(client: Any, name: str, dimension: int) -> None:
    """Raise IndexError_ when the existing collection `name` cannot hold this identity's chunks, or lacks what
    ragd's searches rely on (a server older than 2.5 drops them silently when the collection is created)."""
    problems = collection_problems(client, name, dimension)
    if problems:
        raise IndexError_(f"the Milvus collection {name} was not made as ragd needs it: it lacks "
                          f"{'; '.join(problems)}", "drop it (ragd creates it again on a Milvus 2.5 or newer "
                          "server) or choose another [index] collection_prefix")  # fmt: skip


def primary_key(key: str, source_path: str, chunk_index: int) -> str:
    return f"{key}-{doc_id(source_path, chunk_index)}"


def to_rows(w: SourceWrite, agent: str, key: str, dimension: int) -> list[dict[str, Any]]:
    """A source's chunks as rows of `agent` (whose key starts every primary key); checked, nothing written."""
    checked_text(w.source_path, MAX_PATH, "the path")
    meta_terms, meta_json = metadata_columns(w.metadata)
    lead = encode_lead(w.lead, dimension, w.source_path)
    checked_text(meta_terms, MAX_TERMS, f"the metadata of {w.source_path}")
    checked_text(meta_json, MAX_TEXT, f"the metadata of {w.source_path}")
    out = []
    for i, chunk in enumerate(w.chunks):
        if chunk.chunk_index != i or chunk.source_path != w.source_path:
            raise ValueError(f"chunk {i} of {w.source_path} is {chunk.source_path}#{chunk.chunk_index}")
        where = f"{w.source_path}#{i}"
        body = f"{chunk.header}\n\n{chunk.content}" if chunk.header else chunk.content
        out.append({
            PK: primary_key(key, w.source_path, i),
            DOC_ID: doc_id(w.source_path, i),
            AGENT: agent,
            SOURCE_PATH: w.source_path,
            SOURCE_DIR: os.path.dirname(w.source_path),
            ROOT: checked_text(w.root, MAX_PATH, "the root"),
            EXT: extension(w.source_path).encode("utf-8")[:255].decode("utf-8", "ignore"),  # a VARCHAR's bytes
            SOURCE_MD5: w.source_md5,
            CONTENT_HASH: chunk.content_hash,
            CONTENT: checked_text(chunk.content, MAX_TEXT, f"the text of {where}"),
            FTS_TEXT: checked_text(normalize(body), MAX_TEXT, f"the text of {where}"),
            HEADING_PATH: checked_text(HEADING_SEP.join(chunk.heading_path), MAX_TEXT, f"the headings of {where}"),
            CHUNK_INDEX: i,
            SOURCE_CHUNKS: len(w.chunks),
            START_LINE: chunk.start_line,
            END_LINE: chunk.end_line,
            PAGE: chunk.page,
            META_TERMS: meta_terms,
            METADATA: meta_json,
            LEAD: lead,
            EMBEDDING: check_vector(chunk.vector, dimension, where).tolist(),
        })  # fmt: skip
    return out


def to_hit(row: dict[str, Any], score: float) -> Hit:
    heading = row.get(HEADING_PATH) or ""
    page = row.get(PAGE)
    return Hit(
        source_path=row.get(SOURCE_PATH, ""),
        chunk_index=int(row.get(CHUNK_INDEX) or 0),
        score=score,
        content=row.get(CONTENT, ""),
        heading_path=tuple(heading.split(HEADING_SEP)) if heading else (),
        page=int(page) if page is not None else None,
        start_line=int(row.get(START_LINE) or 0),
        end_line=int(row.get(END_LINE) or 0),
        root=row.get(ROOT, ""),
        source_chunks=int(row.get(SOURCE_CHUNKS) or 1),
        agent=row.get(AGENT, ""),
        metadata=read_metadata(row.get(METADATA)),
        lead=str(row.get(LEAD) or ""),
    )
