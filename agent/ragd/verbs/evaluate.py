"""`eval`: known-answer queries run through the `search` verb; recall, MRR and nDCG per mode and group.

The queries file (JSON list or JSON lines) holds `{"query": str, "answers": [path, ...] | "answer": path,
"group": str}`; a relative answer path is taken under `base`, else under the root that holds it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import RagdError
from ..index import MAX_K
from ..index.query.evaluate import Outcome, Scores, by_group, documents, median_ms, p95_ms, worst
from .arguments import Args, describe
from .runtime import Runtime
from .search import SearchQuery, search

Mode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[Mode, ...] = ("vector", "keyword", "hybrid")


class KnownAnswer(BaseModel):
    """One line of a queries file, as written (answers not yet resolved)."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1)
    answers: list[str] = Field(default_factory=list)
    answer: str | None = None
    group: str = ""

    @model_validator(mode="after")
    def _some_answer(self) -> KnownAnswer:
        if self.answer is not None:
            self.answers = [self.answer, *self.answers]
        if not self.answers:
            raise ValueError("give 'answers' (a list of paths) or 'answer' (a path)")
        return self


class EvalQuery(Args):
    query: str
    answers: tuple[str, ...]  # absolute, normalised
    group: str = ""


class EvalArgs(Args):
    queries: tuple[EvalQuery, ...] = Field(min_length=1)
    modes: tuple[Mode, ...] = MODES
    top_k: int = Field(default=10, ge=5, le=MAX_K)
    worst: int = Field(default=10, ge=0)


class ModeReport(TypedDict):
    groups: dict[str, dict[str, float | int]]
    median_ms: float
    p95_ms: float
    worst: list[dict[str, Any]]
    results: list[dict[str, Any]]


class EvalResult(TypedDict):
    queries: int
    top_k: int
    modes: dict[str, ModeReport]


def usage(message: str, hint: str) -> RagdError:
    return RagdError(message, hint, code="usage")


def load_queries(path: Path, roots: Sequence[Path], base: Path | None = None) -> list[EvalQuery]:
    """The known-answer queries of `path` (JSON list or JSON lines), answers made absolute and checked to exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise usage(f"cannot read the queries file {path}: {err}", "give a JSON or JSON-lines file") from None
    out = []
    for where, raw in _records(path, text):
        try:
            known = KnownAnswer.model_validate(raw)
        except ValidationError as err:
            raise usage(f"{path}, {where}: {describe(err)}",
                        'each query is {"query": "...", "answers": ["path", ...], "group": "..."}') from None  # fmt: skip
        answers = tuple(dict.fromkeys(_answer(a, path, where, roots, base) for a in known.answers))
        out.append(EvalQuery(query=known.query, answers=answers, group=known.group))
    if not out:
        raise usage(
            f"the queries file {path} holds no query", 'add lines like {"query": "...", "answer": "path"}'
        )
    return out


def _records(path: Path, text: str) -> list[tuple[str, Any]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise usage(
                f"{path} is not valid JSON: {err}", "fix the file, or write one query per line"
            ) from None
        return [(f"query {n}", item) for n, item in enumerate(data, 1)]
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("//"):
            try:
                records.append((f"line {n}", json.loads(line)))
            except json.JSONDecodeError as err:
                raise usage(
                    f"{path}, line {n} is not valid JSON: {err}", "one JSON object per line"
                ) from None
    return records


def _answer(raw: str, path: Path, where: str, roots: Sequence[Path], base: Path | None) -> str:
    given = Path(os.path.expanduser(raw))
    if given.is_absolute():
        candidates = [given]
    elif base is not None:
        candidates = [base / given]
    else:
        candidates = [r / given for r in roots if str(r) != "/"]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        tried = ", ".join(str(c) for c in candidates) or "no root to look under"
        raise usage(f"{path}, {where}: answer {raw} is not a file (looked at: {tried})",
                    "give answers relative to --base DIR (the folder you indexed) or as absolute paths")  # fmt: skip
    return os.path.normpath(found.absolute())


def evaluate(rt: Runtime, args: EvalArgs) -> EvalResult:
    """Every query through `search` (one result per file, `top_k` of them) in each mode, scored."""
    modes: dict[str, ModeReport] = {}
    for mode in args.modes:
        outcomes = [_run(rt, q, mode, args.top_k) for q in args.queries]
        modes[mode] = {
            "groups": {
                g: {"queries": _count(outcomes, g), **s.to_json(args.top_k)}
                for g, s in by_group(outcomes).items()
            },
            "median_ms": round(median_ms(outcomes), 2),
            "p95_ms": round(p95_ms(outcomes), 2),
            "worst": [_worst(o) for o in worst(outcomes, args.worst)],
            "results": [_result(o, args.top_k) for o in outcomes],
        }
    return {"queries": len(args.queries), "top_k": args.top_k, "modes": modes}


def _run(rt: Runtime, q: EvalQuery, mode: Mode, k: int) -> Outcome:
    t0 = time.perf_counter()
    found = search(rt, SearchQuery(query=q.query, top_k=k, mode=mode, one_per_file=True))
    seconds = time.perf_counter() - t0
    ranking = tuple(documents(r["path"] for r in found["results"]))
    return Outcome(q.query, q.group, q.answers, ranking, Scores.of(ranking, q.answers, k), seconds)


def _count(outcomes: list[Outcome], group: str) -> int:
    return len(outcomes) if group == "all" else sum(o.group == group for o in outcomes)


def _worst(o: Outcome) -> dict[str, Any]:
    return {"query": o.query, "group": o.group, "ranks": o.ranks(), "answers": list(o.answers),
            "top": o.ranking[0] if o.ranking else None}  # fmt: skip


def _result(o: Outcome, k: int) -> dict[str, Any]:
    return {"query": o.query, "group": o.group, "answers": list(o.answers), "ranking": list(o.ranking),
            "ranks": o.ranks(), **o.scores.to_json(k)}  # fmt: skip
