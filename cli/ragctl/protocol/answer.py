"""A search's answer as text (`ragctl search`, `ragd search`): passages or documents found, with their citations,
labels and scores, and `--explain`'s account of why each ranks where it does (explain.py, shared with the agent's
web page)."""

from __future__ import annotations

from collections.abc import Sequence

from .explain import explained, why
from .text import Obj, _int, one_line, plural, show_path


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
