"""Ranking variants on the development set, scored offline (issue 13). Prints figures; asserts nothing.

    python -m bench.bench_ranking [--cache DIR]

Needs the development corpus indexed by `python -m bench.bench_eval --cache DIR` (same DIR): the chunks, their
headers and vectors are read back from the corpus's sidecars, so nothing is embedded again but the 230 questions.
Then, for every question:

- the dense side is exact (cosine against every chunk vector, numpy), as the flat index ranks it;
- the keyword side as shipped runs against a scratch keyword index (index/keyword/keywords.py, tantivy) built from the same
  chunks; variants against a scratch zvec collection with several full-text fields: zvec's jieba in its `search`
  cut mode (the keyword field of ragd before issue 14), `mix` and `full`, CJK character bigrams (zvec's ngram
  tokenizer over the Chinese text only) next to the shipped list, the header alone next to it; every variant keeps
  the glosses list unless it says otherwise;
- the glosses list: the English glosses of a question's Chinese words (`lexicon`) against the shipped keyword
  index, `fusion.TRANSLATED_DEPTH` hits as the search asks for;
- each variant's lists go through the shipped `fusion.fuse_documents` (or, for the dense-side variants, a document
  score built the same way with one term added), and `evaluate` scores the document ranking;
- a document's lead (`ragd.pipeline.lead`: its title and the first paragraphs of prose of its first three chunks,
  headings, tables and markup skipped, at most LEAD_CHARS characters) embedded once per document, as one more
  passage of it on the dense side, added to its dense score, or the leads nearest to the question as a list of
  their own (the search as shipped since: the leads of the documents found, ranked, `fusion.LEAD_WEIGHT`).

The row "hybrid as shipped" reproduces `ragd eval --mode hybrid` (up to the keyword side's depth: DEPTH here, 40
for ten results there); the others say what a change would buy. Figures: MRR@10 per
group, and over all questions recall@5, nDCG@10 and hit@5 (any answer among the first five).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import zvec

from ragd.index import Hit
from ragd.index.keyword import fts, keywords, lexicon
from ragd.index.query import evaluate as ev
from ragd.index.ranking import fusion
from ragd.pipeline import lead, sidecar
from ragd.pipeline.embed.local import LocalEmbedder

QUERIES = Path(__file__).parent / "devset" / "queries.jsonl"
DEPTH = 100  # candidates per side, as the search asks for
GROUPS = ("all", "zh", "en", "mixed", "cross", "identifier", "list")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


@dataclass(frozen=True)
class Chunk:
    path: str
    index: int
    header: str
    content: str
    chunks: int  # of its document


def load_corpus(root: Path) -> tuple[list[Chunk], np.ndarray]:
    chunks: list[Chunk] = []
    vectors: list[np.ndarray] = []
    for rag in sorted(root.rglob(".rag")):
        directory = rag.parent
        for name, entry in sorted(sidecar.load_entries(directory).live.items()):
            if entry is None or not entry.chunks:
                continue
            for i, c in enumerate(entry.chunks):
                if c.vector is None:
                    continue
                header = str(c.meta.get("header") or "")
                chunks.append(Chunk(str(directory / name), i, header, c.content, len(entry.chunks)))
                vectors.append(c.vector)
    if not chunks:
        raise SystemExit(f"no embedded sidecars under {root}: run python -m bench.bench_eval --cache first")
    matrix = np.stack(vectors).astype(np.float32)
    return chunks, matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


FIELDS = {  # name: (tokenizer, filters, extra params, text of a chunk)
    "zvec": ("jieba", ["lowercase", "stemmer"], "", lambda c: f"{c.header}\n\n{c.content}"),
    "mix": ("jieba", ["lowercase", "stemmer"], '{"cut_mode": "mix"}', lambda c: f"{c.header}\n\n{c.content}"),
    "full": ("jieba", ["lowercase", "stemmer"], '{"cut_mode": "full"}', lambda c: f"{c.header}\n\n{c.content}"),
    "bigrams": ("ngram", ["lowercase"], '{"ngram_min": 2, "ngram_max": 2, "token_chars": ["letter", "digit"]}',
                lambda c: " ".join(_CJK.findall(f"{c.header} {c.content}"))),
    "header": ("jieba", ["lowercase", "stemmer"], "", lambda c: c.header),
}  # fmt: skip


def keyword_lists(
    chunks: list[Chunk], questions: list[str], tmp: Path
) -> dict[str, list[list[tuple[int, float]]]]:
    """Per field, per question: (chunk number, BM25) best first."""
    text = zvec.DataType.STRING
    fields = [zvec.FieldSchema("n", zvec.DataType.INT32)] + [
        zvec.FieldSchema(name, text, index_param=zvec.FtsIndexParam(tokenizer_name=tok, filters=flt, extra_params=x))
        for name, (tok, flt, x, _) in FIELDS.items()
    ]  # fmt: skip
    vector = zvec.VectorSchema("v", zvec.DataType.VECTOR_FP32, dimension=2,
                               index_param=zvec.FlatIndexParam(metric_type=zvec.MetricType.COSINE))  # fmt: skip
    coll = zvec.create_and_open(
        str(tmp / "fts"), zvec.CollectionSchema(name="fts", fields=fields, vectors=[vector])
    )
    for start in range(0, len(chunks), 512):
        coll.insert([
            zvec.Doc(id=str(n), vectors={"v": [1.0, 1.0]},
                     fields={"n": n, **{name: fts.normalize(f[3](c)) for name, f in FIELDS.items()}})
            for n, c in enumerate(chunks[start : start + 512], start)
        ])  # fmt: skip
    coll.optimize()
    out: dict[str, list[list[tuple[int, float]]]] = {}
    for name in FIELDS:
        out[name] = []
        for q in questions:
            qs = fts.query_string(q) if name != "bigrams" else " ".join(
                t.text for t in fts.terms(q) if not t.phrase) or None  # fmt: skip
            docs = (
                coll.query(zvec.Query(name, fts=zvec.Fts(query_string=qs)), topk=DEPTH, output_fields=["n"])
                if qs
                else []
            )
            out[name].append([(int(d.field("n")), float(d.score)) for d in docs])
    shipped = keywords.KeywordIndex(tmp / "keywords", read_only=False)
    shipped.write(docs=[keywords.KeywordDoc(str(n), c.path, "", fts.normalize(f"{c.header}\n\n{c.content}"), "")
                        for n, c in enumerate(chunks)])  # fmt: skip
    out["shipped"] = [[(int(i), s) for i, s in shipped.search(fts.terms(q), DEPTH)] for q in questions]
    # the English glosses of a question's Chinese words, against the shipped keyword index
    out["glosses"] = [[(int(i), s) for i, s in shipped.search(lexicon.shared().glosses(q).terms, fusion.TRANSLATED_DEPTH)]
                      for q in questions]  # fmt: skip
    shipped.close()
    return out


def lead_text(opening: Sequence[Chunk]) -> str:
    """A document's lead as the agent makes it (pipeline/lead.py), from its opening chunks."""
    return lead.lead_text(opening[0].header if opening else "", [c.content for c in opening])


def hits(chunks: list[Chunk], ranked: Sequence[tuple[int, float]]) -> list[Hit]:
    return [Hit(chunks[n].path, chunks[n].index, score, "", (), None, 0, 0, source_chunks=chunks[n].chunks)
            for n, score in ranked]  # fmt: skip


def ranking(passages: list[Hit]) -> list[str]:
    return ev.documents(h.source_path for h in passages)


Variant = Callable[[int], list[str]]  # question number -> document ranking


def report(name: str, variant: Variant, queries: list[dict], root: Path) -> None:
    rows: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    for i, q in enumerate(queries):
        docs = variant(i)
        answers = [str(root / a) for a in q["answers"]]
        m = (ev.recall_at(docs, answers, 5), ev.mrr_at(docs, answers, 10), ev.ndcg_at(docs, answers, 10),
             float(any(a in docs[:5] for a in answers)))  # fmt: skip
        rows["all"].append(m)
        rows[q.get("group", "")].append(m)
    mean = {g: [statistics.mean(col) for col in zip(*rows[g], strict=True)] for g in GROUPS if rows[g]}
    cells = " ".join(f"{mean[g][1]:6.3f}" for g in GROUPS if g in mean)
    a = mean["all"]
    print(f"{name:<44} {cells} | {a[0]:.3f} {a[2]:.3f} {a[3]:.3f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("~/.cache/ragd-devset"), help="as for bench_eval")
    args = ap.parse_args(argv)
    root = args.cache.expanduser().resolve() / "corpus"
    queries = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    t0 = time.perf_counter()
    chunks, matrix = load_corpus(root)
    embedder = LocalEmbedder()
    qv = embedder.embed([q["query"] for q in queries])
    cos = qv @ matrix.T
    print(f"{len(chunks)} chunks, {len(queries)} questions; loaded in {time.perf_counter() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        kw = keyword_lists(chunks, [q["query"] for q in queries], Path(tmp))
        print(
            f"scratch full-text collection: {len(FIELDS)} fields, built and queried in {time.perf_counter() - t0:.1f} s"
        )
    dense = [
        hits(chunks, [(int(n), float(cos[i, n])) for n in np.argsort(-cos[i])[:DEPTH]])
        for i in range(len(queries))
    ]
    evidence = {
        name: [fusion.keyword_evidence(hits(chunks, lst)) for lst in lists] for name, lists in kw.items()
    }

    def weight(i: int) -> float:
        return fusion.keyword_weight(queries[i]["query"])

    def fused(i: int, dense_hits: list[Hit], field: str = "shipped", glosses: bool = True) -> list[Hit]:
        translated = evidence["glosses"][i] if glosses else None
        return fusion.fuse_documents(dense_hits, evidence[field][i], 10**6, weight(i), translated)

    def hybrid(field: str, glosses: bool = True) -> Variant:
        return lambda i: ranking(fused(i, dense[i], field, glosses))

    def plus_list(lists: list[list[Hit]], w: float) -> Variant:  # one more list, its share added per document
        def run(i: int) -> list[str]:
            base = fused(i, dense[i])
            score = {h.source_path: h.score for h in reversed(base)}  # a document's best passage
            for rank, path in enumerate(ev.documents(h.source_path for h in lists[i]), 1):
                score[path] = score.get(path, 0.0) + w / (fusion.DOC_RANK_CONSTANT + rank)
            return sorted(score, key=lambda p: -score[p])

        return run

    def plus(field: str, w: float) -> Variant:  # a second keyword list
        return plus_list(evidence[field], w)

    doc_of = {path: n for n, path in enumerate(dict.fromkeys(c.path for c in chunks))}
    owner = np.array([doc_of[c.path] for c in chunks])
    centroid = np.zeros((len(doc_of), matrix.shape[1]), np.float32)
    np.add.at(centroid, owner, matrix)
    centroid /= np.linalg.norm(centroid, axis=1, keepdims=True)
    opening = np.zeros_like(centroid)
    opening[owner[[c.index == 0 for c in chunks]]] = matrix[[c.index == 0 for c in chunks]]

    def dense_plus(extra: np.ndarray) -> Variant:  # each dense hit's cosine + extra[question, its document]
        def run(i: int) -> list[str]:
            lifted = [replace(h, score=h.score + float(extra[i, doc_of[h.source_path]])) for h in dense[i]]
            return ranking(fused(i, lifted))

        return run

    firsts = {c.path: n for n, c in enumerate(chunks) if c.index == 0}
    lead = np.zeros_like(centroid)
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for c in chunks:
        if c.index < 3:
            by_doc[c.path].append(c)
    lead_vectors = embedder.embed([lead_text(by_doc[p]) for p in firsts])
    lead[[doc_of[p] for p in firsts]] = lead_vectors / np.linalg.norm(lead_vectors, axis=1, keepdims=True)
    lead_cos = qv @ lead.T
    nearest_leads = np.argsort(-lead_cos, axis=1)[
        :, :DEPTH
    ]  # per question, documents by their lead, best first
    paths = list(doc_of)

    def lead_passage(i: int) -> list[str]:  # the lead as one more passage of its document
        cand = [(h.score, h) for h in dense[i]]
        cand += [(float(lead_cos[i, n]), Hit(paths[n], -1, float(lead_cos[i, n]), "", (), None, 0, 0,
                                             source_chunks=chunks[firsts[paths[n]]].chunks))
                 for n in nearest_leads[i]]  # fmt: skip
        cand.sort(key=lambda t: -t[0])
        return ranking(fused(i, [h for _, h in cand[:DEPTH]]))

    print(
        f"\n{'variant':<44} {' '.join(f'{g[:6]:>6}' for g in GROUPS)} | R@5   nDCG  hit@5   (MRR@10 per group)"
    )
    report("vector alone (exact)", lambda i: ranking(dense[i]), queries, root)
    report("keyword alone (shipped field)", lambda i: ranking(evidence["shipped"][i]), queries, root)

    def shipped(i: int) -> list[str]:  # the leads of the documents found (fusion.LEAD_WEIGHT, LEAD_DEPTH)
        translated = evidence["glosses"][i]
        leads = {p: float(lead_cos[i, doc_of[p]]) for p in doc_of}
        return ranking(
            fusion.fuse_documents(dense[i], evidence["shipped"][i], 10**6, weight(i), translated, leads)
        )

    report("hybrid as shipped", shipped, queries, root)
    report("hybrid without the leads", hybrid("shipped"), queries, root)
    report("hybrid without the glosses list", hybrid("shipped", glosses=False), queries, root)
    for field in ("zvec", "mix", "full", "header"):
        report(f"hybrid, keyword field: {field}", hybrid(field), queries, root)
    for w in (0.2, 0.5):
        report(f"hybrid + CJK bigram list x{w}", plus("bigrams", w), queries, root)
        report(f"hybrid + header list x{w}", plus("header", w), queries, root)
    for a, b in ((0.1, 0.0), (0.0, 0.2), (0.1, 0.1)):
        extra = a * (qv @ opening.T) + b * (qv @ centroid.T)
        report(f"hybrid, dense + {a} opening + {b} centroid", dense_plus(extra), queries, root)
    report("the lead alone", lambda i: [paths[n] for n in nearest_leads[i][:10]], queries, root)
    report("hybrid, the lead as one more passage", lead_passage, queries, root)
    for w in (0.3, 0.5):
        for depth in (10, 20):
            lead_list = [
                [
                    Hit(paths[n], -1, float(lead_cos[i, n]), "", (), None, 0, 0)
                    for n in nearest_leads[i][:depth]
                ]
                for i in range(len(queries))
            ]
            report(f"hybrid + the leads' list (top {depth}) x{w}", plus_list(lead_list, w), queries, root)
    for a in (0.1, 0.2, 0.3):
        report(f"hybrid, dense + {a} x the lead", dense_plus(a * lead_cos), queries, root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
