"""`ragctl search`: passages or documents found, with their citations, labels and scores, and `--explain`'s
account of why each ranks where it does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .text import Obj, _g, _int, one_line, plural, show_path


def search(result: Obj) -> str:
    """'1. /abs/notes.md:3-9  [Heading > Sub]  score 0.0312' (a PDF: '[p. 2; Heading]') and the snippet, per result.

    The line range is that of the document's text as the agent parsed it (what `read_document` returns).
    """
    if "files" in result:
        return search_files(result)
    hits: Sequence[Obj] = result.get("results") or []
    if not hits:
        return "no results\n"
    out = [explained(result)]
    for n, hit in enumerate(hits, 1):
        out.append(f"{n}. {citation(hit)}  score {_score(hit)}{_on(hit)}\n{labels(hit)}{why(hit)}")
        snippet = hit.get("snippet") or hit.get("content") or ""
        out.append(f"   {one_line(snippet, 400)}\n\n")
    return "".join(out)


def search_files(result: Obj) -> str:
    """Per document: '1. /abs/path  score 0.0312, 4 passages matched', then its best passages, each cited."""
    files: Sequence[Obj] = result.get("files") or []
    if not files:
        return "no results\n"
    out = [explained(result)]
    for n, doc in enumerate(files, 1):
        matched = _int(doc.get("matches"))
        out.append(f"{n}. {show_path(doc.get('path', '?'))}  score {_score(doc)}, "
                   f"{plural(matched, 'passage')} matched{_on(doc)}\n{labels(doc)}")  # fmt: skip
        for hit in doc.get("chunks") or []:
            out.append(
                f"   - {citation(hit)}: {one_line(hit.get('snippet') or hit.get('content') or '', 300)}\n"
            )
            out.append(why(hit, "     "))
        out.append("\n")
    return "".join(out)


_SIDES = ("vector", "keyword", "glosses", "lead")


def explained(result: Obj) -> str:
    """With `--explain`, how the sides were combined: 'hybrid: rrf weight/(10+rank) per side (vector 1 · keyword
    0.5 · glosses 1 · lead 0.3 for the first 10), passages × 0.5^i; keyword evidence: BM25 ≥ 2 (this query: ≥
    3.1); glosses: catalog'."""
    how = result.get("explain")
    if not isinstance(how, Mapping):
        return ""
    method = str(how.get("method") or "?")
    if method != "hybrid":
        return f"{method} only: ranked by {'BM25' if method == 'keyword' else 'cosine similarity'}\n\n"
    weights = how.get("weights")
    weights = weights if isinstance(weights, Mapping) else {}
    parts = [f"{k} {_g(weights.get(k))}" for k in _SIDES if k in weights]
    line = (f"hybrid: {how.get('fusion', 'rrf')} weight/({_g(how.get('rank_constant'))}+rank) per side "
            f"({' · '.join(parts)} for the first {_g(how.get('lead_depth'))}), passages × "
            f"{_g(how.get('passage_decay'))}^i")  # fmt: skip
    cut = how.get("keyword_cut")
    if isinstance(cut, Mapping) and "keyword_floor" in how:
        line += f"; keyword evidence: BM25 ≥ {_g(how['keyword_floor'])}"
        line += f" (this query: ≥ {_g(cut['keyword'])})" if "keyword" in cut else ""
    if how.get("rare"):
        line += "; rare words: a lookup (every chunk holding them is in a few documents)"
    glosses = how.get("glosses")
    if isinstance(glosses, list) and glosses:
        line += f"; glosses: {one_line(', '.join(str(g) for g in glosses), 200)}"
    return line + "\n\n"


def why(hit: Obj, indent: str = "   ") -> str:
    """With `--explain`, one line per result: 'vector #3 0.81 · keyword #1 12.4 · glosses – · lead #2 0.55 · fused
    0.032 (document #1, passage 1)'; a keyword hit left out says why ('keyword 1.8 < floor')."""
    how = hit.get("explain")
    if not isinstance(how, Mapping):
        return ""
    parts = []
    for side in _SIDES:
        if side not in how:
            continue
        got = how[side]
        if not isinstance(got, Mapping):
            parts.append(f"{side} –")
        elif got.get("rank") is None:
            parts.append(f"{side} {_g3(got.get('score'))} < {got.get('dropped') or 'cut'}")
        else:  # (a lead ranked past the first few adds nothing)
            idle = " (no share)" if side == "lead" and got.get("share") == 0 else ""
            parts.append(f"{side} #{got['rank']} {_g3(got.get('score'))}{idle}")
    fused = f"fused {_g3(how.get('fused'))}"
    doc, passage = how.get("document"), how.get("passage")
    if isinstance(doc, Mapping) and isinstance(passage, Mapping):
        fused += f" (document #{doc.get('rank')} {_g3(doc.get('score'))}, passage {_int(passage.get('index')) + 1})"
        fused += " (near-empty: score lowered)" if doc.get("near_empty") else ""
    return f"{indent}why: {' · '.join([*parts, fused])}\n"


def _g3(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def labels(found: Obj) -> str:
    """'   tags: invoice, q3 · product: X200' (its document's metadata, docs/metadata.md), or '' without any."""
    metadata = found.get("metadata")
    if not isinstance(metadata, dict) or not metadata:
        return ""
    parts = []
    for key, value in metadata.items():
        shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        parts.append(f"{key}: {shown}")
    return f"   {one_line(' · '.join(parts), 300)}\n"


def _on(found: Obj) -> str:
    """'  on host:/data' for a result from an index shared by several agents (Milvus; '' otherwise)."""
    agent = found.get("agent")
    return f"  on {one_line(str(agent), 120)}" if agent else ""


def _score(found: Obj) -> str:
    score = found.get("score")
    return f"{score:.4f}" if isinstance(score, (int, float)) else "?"


def citation(hit: Obj) -> str:
    """'/abs/a.pdf:12-30  [p. 3; Install > Linux]': path and line range, then the page and the heading path."""
    where = show_path(hit.get("path", "?"))
    start, end = hit.get("start_line"), hit.get("end_line")
    if isinstance(start, int) and start >= 1:
        where += f":{start}-{end if isinstance(end, int) and end >= start else '?'}"
    page = hit.get("page")
    heading = hit.get("heading_path") or ""
    if isinstance(heading, (list, tuple)):
        heading = " > ".join(str(h) for h in heading if str(h).strip())
    inside = "; ".join(part for part in (f"p. {page}" if page else "", one_line(heading)) if part)
    return f"{where}  [{inside}]" if inside else where
