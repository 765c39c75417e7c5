"""A search's `explain` object in words (docs/protocol.md, `search`): the one account of why a result ranks where
it does, said alike by `ragctl search --explain` and the agent's web page. Part of the wire protocol the agent and
`ragctl` share (the package `ragctl.protocol`): standard library only, and nothing of ragctl's other output.

A field missing (an older or newer agent) reads as "?" or is left out, never as an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SIDES = ("vector", "keyword", "glosses", "lead")  # the ranked lists a hybrid search fuses, in this order
GLOSSES_SHOWN = 200  # characters of the glosses named


def explained(result: Mapping[str, Any]) -> str:
    """How the sides were combined: 'hybrid: rrf weight/(10+rank) per side (vector 1 · keyword 0.5 · glosses 1 ·
    lead 0.3 for the first 10), passages × 0.5^i; keyword evidence: BM25 ≥ 2 (this query: ≥ 3.1); glosses:
    catalog', and a blank line; '' without an `explain`."""
    how = result.get("explain")
    if not isinstance(how, Mapping):
        return ""
    method = str(how.get("method") or "?")
    if method != "hybrid":
        return f"{method} only: ranked by {'BM25' if method == 'keyword' else 'cosine similarity'}\n\n"
    weights = how.get("weights")
    weights = weights if isinstance(weights, Mapping) else {}
    parts = [f"{k} {_g(weights.get(k))}" for k in SIDES if k in weights]
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
        named = " ".join(", ".join(str(g) for g in glosses).split())
        line += f"; glosses: {named if len(named) <= GLOSSES_SHOWN else named[: GLOSSES_SHOWN - 1] + '…'}"
    return line + "\n\n"


def why(hit: Mapping[str, Any], indent: str = "   ") -> str:
    """One line per result: 'vector #3 0.81 · keyword #1 12.4 · glosses – · lead #2 0.55 · fused 0.032 (document
    #1, passage 1)'; a keyword hit left out says why ('keyword 1.8 < floor'). '' without an `explain`."""
    how = hit.get("explain")
    if not isinstance(how, Mapping):
        return ""
    parts = []
    for side in SIDES:
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
        index = passage.get("index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else 0
        fused += f" (document #{doc.get('rank')} {_g3(doc.get('score'))}, passage {index + 1})"
        fused += " (near-empty: score lowered)" if doc.get("near_empty") else ""
    return f"{indent}why: {' · '.join([*parts, fused])}\n"


def _g(value: object) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _g3(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"
