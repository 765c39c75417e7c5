"""The check of an existing Milvus collection (schema.collection_problems, check_collection) against collections made
in a real Milvus Lite: ragd's own passes; one made otherwise (as a server older than 2.5 leaves it, or by hand) is
named for each thing it lacks, not only for its field names; the agent refuses it with one message and keeps it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.config import IndexConfig
from ragd.errors import IndexError_
from ragd.index import open_index
from ragd.index.milvus.schema import (  # imports pymilvus only when called
    build_schema,
    check_collection,
    collection_problems,
    index_params,
    milvus_name,
)
from ragd.model import EmbeddingIdentity

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

DIM = 8
IDENTITY = EmbeddingIdentity("test-collection-check", DIM)
Schema = dict[str, Any]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Any]:
    from pymilvus import MilvusClient

    lite = MilvusClient(uri=str(tmp_path / "kb.db"))
    yield lite
    lite.close()


def field(schema: Schema, name: str) -> dict[str, Any]:
    return next(f for f in schema["fields"] if f["name"] == name)


def make(client: Any, edit: Callable[[Schema], None] | None = None, *, indexes: Any = "ragd's") -> str:
    """A collection of ragd's schema changed by `edit`, with ragd's indexes (or `indexes`: None for none)."""
    from pymilvus import CollectionSchema

    schema = build_schema(DIM).to_dict()
    if edit is not None:
        edit(schema)
    name = "made"
    client.create_collection(name, schema=CollectionSchema.construct_from_dict(schema))
    if indexes == "ragd's":
        indexes = index_params(client, IndexConfig())
    if indexes is not None:
        client.create_index(name, indexes, sync=False)
    return name


def problems(client: Any, name: str, dimension: int = DIM) -> str:
    return "; ".join(collection_problems(client, name, dimension))


def test_a_collection_ragd_made_has_all_it_needs(client: Any) -> None:
    assert collection_problems(client, make(client), DIM) == []
    check_collection(client, "made", DIM)  # no error


def test_one_without_its_indexes(client: Any) -> None:
    said = problems(client, make(client, indexes=None))
    assert said == (
        "the BM25 index on sparse; the COSINE vector index on embedding; "
        "INVERTED indexes on agent, source_path, ext"
    )


def test_one_without_the_bm25_function(client: Any) -> None:
    def no_function(schema: Schema) -> None:
        schema["functions"] = []
        field(schema, "sparse").pop("is_function_output", None)

    def sparse_by_hand(client: Any) -> Any:  # what a sparse field without the function can be indexed with
        params = client.prepare_index_params()
        params.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        params.add_index(field_name="embedding", index_type="FLAT", metric_type="COSINE")
        for name in ("agent", "source_path", "ext"):
            params.add_index(field_name=name, index_type="INVERTED")
        return params

    said = problems(client, make(client, no_function, indexes=sparse_by_hand(client)))
    assert said == "the BM25 function from fts_text to sparse; the BM25 index on sparse"


def test_one_whose_page_is_not_nullable(client: Any) -> None:
    def not_nullable(schema: Schema) -> None:
        field(schema, "page")["nullable"] = False

    assert problems(client, make(client, not_nullable)) == "a nullable page field"


@pytest.mark.parametrize(
    ("analyzer", "lacks"),
    [
        ({"tokenizer": "jieba"}, "the stemmer filter of fts_text's analyzer"),
        ({"tokenizer": "standard", "filter": ["lowercase"]}, "the jieba analyzer on fts_text"),
    ],
)
def test_one_analysed_otherwise(client: Any, analyzer: dict[str, Any], lacks: str) -> None:
    def analysed(schema: Schema) -> None:
        field(schema, "fts_text")["params"]["analyzer_params"] = analyzer

    assert problems(client, make(client, analysed)) == lacks


def test_one_whose_fields_are_of_other_types_or_shorter(client: Any) -> None:
    from pymilvus import DataType

    def otherwise(schema: Schema) -> None:
        field(schema, "chunk_index")["type"] = DataType.INT64
        field(schema, "content")["params"]["max_length"] = 1_000

    said = problems(client, make(client, otherwise))
    assert said == "content of up to 65535 bytes (it holds 1000); chunk_index as INT32 (it is INT64)"


def test_one_of_another_dimension_or_metric(client: Any) -> None:
    params = client.prepare_index_params()
    params.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    params.add_index(field_name="embedding", index_type="FLAT", metric_type="L2")
    for name in ("agent", "source_path", "ext"):
        params.add_index(field_name=name, index_type="INVERTED")
    name = make(client, indexes=params)
    assert problems(client, name, 16) == (
        "vectors of dimension 16 (it holds 8); the COSINE vector index on embedding"
    )


def test_the_agent_refuses_it_with_one_message_and_keeps_it(tmp_path: Path, client: Any) -> None:
    from pymilvus import CollectionSchema

    cfg = IndexConfig(backend="milvus", uri=str(tmp_path / "kb.db"))
    name = milvus_name(cfg.collection_prefix, IDENTITY)
    schema = build_schema(DIM).to_dict()
    field(schema, "page")["nullable"] = False
    client.create_collection(name, schema=CollectionSchema.construct_from_dict(schema))  # and no index
    client.close()  # a Lite file is open in one client at a time

    with pytest.raises(IndexError_) as err:
        open_index(tmp_path / "data", IDENTITY, cfg)
    said = err.value.message
    assert said.startswith(f"the Milvus collection {name} was not made as ragd needs it: it lacks ")
    for lacks in (
        "a nullable page field",
        "the BM25 index on sparse",
        "the COSINE vector index on embedding",
    ):
        assert lacks in said, said
    assert "Milvus 2.5 or newer" in (err.value.hint or "")

    from pymilvus import MilvusClient

    again = MilvusClient(uri=str(tmp_path / "kb.db"))
    try:
        assert again.has_collection(name)  # not ragd's to drop: it did not make it
    finally:
        again.close()
