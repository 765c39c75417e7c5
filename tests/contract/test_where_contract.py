"""Metadata filters (`where`) against every backend: exact and prefix matches of values holding quotes,
backslashes, `%`, `_`, the terms' own separators, regular-expression characters, CJK and emoji match exactly
what the Python model (`where.matches`) says, alone, together and beside a path filter; hits carry their
document's metadata.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragd.index import MAX_K, IndexBackend, SourceWrite
from ragd.index.where import Where, matches, parse_where
from ragd.model import Fields, fields_json, md5_hex
from tests.contract.conftest import BACKENDS, basis, chunk
from tests.contract.test_index_contract import shared_index

ODD = ['q"uote', "it's", "back\\slash", "ends\\", "50%", "a_b", "a%b", "中文标签", "😀 emoji", "x|y", "k=v",
       "~7C", "(.*)+[x]^$", "tab\there"]  # fmt: skip
DOCS: dict[str, Fields] = {
    "/m/1.md": {"tags": ("invoice", "finance"), "product": ("X200",), "version": ("2.1",)},
    "/m/2.md": {"tags": ("invoice2",), "product": ("x200-pro",), "version": ("2.10",)},
    "/m/3.md": {"tags": ('q"uote', "it's"), "version": ("10.2",)},
    "/m/4.md": {"tags": ("back\\slash", "ends\\"), "product": ("50%",)},
    "/m/5.md": {"tags": ("a_b",), "product": ("a%b",), "customer": ("ACME Corp",)},
    "/m/6.md": {"tags": ("中文标签", "😀 emoji"), "title": ("中文 笔记😀",)},
    "/m/7.md": {"tags": ("x|y", "k=v", "~7C", "tab\there"), "product": ("(.*)+[x]^$",)},
    "/m/8.md": {},
    "/m/9.md": {"tags": ("axb", "ab"), "product": ("axb",), "title": ("k",)},
    "/m/sub/10.md": {"tags": ("invoice",), "version": ("2.1",), "type": ("manual",)},
}
WHERES = [
    *(Where("tags", v) for v in ODD),
    *(Where("tags", v[:-1], prefix=True) for v in ODD),
    *(Where("product", v) for v in ("X200", "x200", "50%", "a%b", "axb", "(.*)+[x]^$", "X2")),
    Where("tags", "invoice"), Where("tags", "INVOICE"), Where("tags", "invoice", prefix=True),
    Where("tags", "a", prefix=True), Where("tags", "a_", prefix=True), Where("tags", "a%", prefix=True),
    Where("tags", "x", prefix=True), Where("tags", "k"), Where("tags", "k=", prefix=True),
    Where("tags", "|", prefix=True), Where("tags", "%"), Where("tags", "_b"),
    Where("version", "2.1"), Where("version", "2.", prefix=True), Where("version", "2.1", prefix=True),
    Where("version", "", prefix=True), Where("title", "中文", prefix=True), Where("title", "k"),
    Where("customer", "acme", prefix=True), Where("type", "manual"), Where("nothere", "x"),
]  # fmt: skip


def fill(index: IndexBackend) -> None:
    writes = []
    for i, (path, fields) in enumerate(DOCS.items()):
        chunks = [chunk(path, j, f"marker text {i} {j}") for j in range(2)]
        writes.append(SourceWrite(path, md5_hex(path), "/m", chunks, metadata=fields))
    index.write_sources(writes)


@pytest.fixture(scope="module", params=BACKENDS)
def labelled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IndexBackend]:
    yield from shared_index(request, tmp_path_factory, fill)


def found(index: IndexBackend, where: list[Where], **kw: object) -> tuple[set[str], set[str]]:
    dense = index.query(vector=basis(0), text=None, k=MAX_K, where=where, **kw)  # type: ignore[arg-type]
    words = index.query(vector=None, text="marker", k=MAX_K, where=where, **kw)  # type: ignore[arg-type]
    return {h.source_path for h in dense}, {h.source_path for h in words}


def model(*where: Where) -> set[str]:
    return {p for p, f in DOCS.items() if all(matches(f, w) for w in where)}


@pytest.mark.parametrize("where", WHERES, ids=str)
def test_a_filter_finds_exactly_the_documents_it_matches(labelled: IndexBackend, where: Where) -> None:
    dense, words = found(labelled, [where])
    assert dense == words == model(where)


def test_the_model_is_what_the_filters_mean() -> None:
    """The model itself, on the cases that matter: exact, case-insensitive, prefix within one value, no wildcards."""
    assert model(Where("tags", "invoice")) == {"/m/1.md", "/m/sub/10.md"}
    assert model(Where("tags", "INVOICE", prefix=True)) == {"/m/1.md", "/m/2.md", "/m/sub/10.md"}
    assert model(Where("tags", "a_b")) == {"/m/5.md"}  # `_` is no wildcard: never axb
    assert model(Where("product", "a%b")) == {"/m/5.md"}  # nor is `%`
    assert model(Where("tags", "k")) == set()  # k=v is one value; title k is another key
    assert model(Where("version", "2.", prefix=True)) == {"/m/1.md", "/m/2.md", "/m/sub/10.md"}
    assert model(Where("version", "", prefix=True)) == {"/m/1.md", "/m/2.md", "/m/3.md", "/m/sub/10.md"}


def test_filters_together_must_all_match(labelled: IndexBackend) -> None:
    both = [Where("tags", "invoice"), Where("version", "2.1")]
    assert found(labelled, both) == (model(*both), model(*both)) == ({"/m/1.md", "/m/sub/10.md"},) * 2
    none = [Where("tags", "invoice"), Where("tags", "invoice2")]
    assert found(labelled, none) == (set(), set())
    three = [Where("tags", "invoice"), Where("version", "2", prefix=True), Where("product", "X200")]
    assert found(labelled, three) == ({"/m/1.md"}, {"/m/1.md"})


def test_a_filter_beside_a_path_and_an_extension_filter(labelled: IndexBackend) -> None:
    where = [Where("tags", "invoice")]
    assert found(labelled, where, path_prefixes=["/m/sub"]) == ({"/m/sub/10.md"},) * 2
    assert found(labelled, where, extensions=["txt"]) == (set(), set())


def test_every_chunk_of_a_matching_document_matches(labelled: IndexBackend) -> None:
    hits = labelled.query(vector=basis(0), text=None, k=MAX_K, where=[Where("tags", "中文标签")])
    assert sorted((h.source_path, h.chunk_index) for h in hits) == [("/m/6.md", 0), ("/m/6.md", 1)]


def test_hits_carry_their_documents_metadata(labelled: IndexBackend) -> None:
    hits = labelled.query(vector=basis(0), text=None, k=MAX_K)
    assert {h.source_path: dict(h.metadata) for h in hits} == {p: fields_json(f) for p, f in DOCS.items()}
    assert {h.source_path: dict(h.metadata) for h in labelled.chunks("/m/7.md")} == {
        "/m/7.md": fields_json(DOCS["/m/7.md"])
    }


def test_rewriting_a_source_replaces_its_metadata(ix: IndexBackend) -> None:
    path = "/w/a.md"
    ix.write_sources(
        [SourceWrite(path, "m1", "/w", [chunk(path, 0, "marker alpha")], metadata={"tags": ("old",)})]
    )
    ix.write_sources(
        [SourceWrite(path, "m1", "/w", [chunk(path, 0, "marker alpha")], metadata={"tags": ("new",)})]
    )
    assert found(ix, [Where("tags", "old")]) == (set(), set())
    assert found(ix, [Where("tags", "new")]) == ({path}, {path})
    ix.write_sources([SourceWrite(path, "m1", "/w", [chunk(path, 0, "marker alpha")])])
    assert found(ix, [Where("tags", "", prefix=True)]) == (set(), set())
    assert dict(ix.chunks(path)[0].metadata) == {}


@pytest.mark.parametrize(
    ("raw", "want"),
    [("tag=invoice", Where("tags", "invoice")), ("Product = X 200 ", Where("product", "X 200")),
     ("version^=2.", Where("version", "2.", True)), ("k=a=b", Where("k", "a=b")), ("date^=2024-03",
     Where("created", "2024-03", True)), ("type^=", Where("type", "", True))],
)  # fmt: skip
def test_the_filter_syntax(raw: str, want: Where) -> None:
    assert parse_where(raw) == want
