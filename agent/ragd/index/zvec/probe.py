"""The child side of `health.probe`: open a zvec collection read-only, read from it, close it, say how it went.

Run as `python -m ragd.index.zvec.probe DIR` (or `ragd --ragd-index-probe DIR` when frozen). It prints one line
starting with `health.PROBE_MARK`: `ok, N documents`, `busy: …` or `error: …`. If zvec crashes, the process dies
by a signal instead and the parent knows the collection is damaged.

Reading matters, not only opening: a damaged manifest crashed some opens only at the first keyword query.

`python -m ragd.index.zvec.probe --copy [--optimize] DIR` (`ragd --ragd-index-probe --copy …` when frozen) opens
the empty collection the agent created at DIR for writing, inserts the documents the agent sends on its standard
input (pickled batches of `(id, fields, vectors)`, then None), flushes, optimizes with `--optimize`, closes, and
prints `ok, N documents, T s`: how a compaction copies a collection (zvec/upkeep.py, `compact`) without the copy's
memory in the agent.
The input is the agent's own, through a pipe to its child: unpickling it trusts nothing else. An input that ends
before its None (the agent stopped or died meanwhile) ends the child at once (EOFError), the copy unfinished.
"""

from __future__ import annotations

import re
import sys

from .health import PROBE_MARK


def _exercise(path: str) -> str:
    import zvec

    zvec.init(query_threads=1, log_level=zvec.LogLevel.ERROR)
    coll = zvec.open(path, zvec.CollectionOption(read_only=True))
    try:
        count = int(coll.stats.doc_count)
        vector_names = [v.name for v in coll.schema.vectors]
        fts_names = [f.name for f in coll.schema.fields if isinstance(f.index_param, zvec.FtsIndexParam)]
        with coll.iter_docs(include_vector=True) as docs:  # read-only: scans without sealing anything
            first = next(iter(docs), None)
        if first is not None:
            for name in vector_names:
                vec = first.vectors.get(name) if first.vectors else None
                if vec is not None:
                    coll.query(zvec.Query(name, vector=vec), topk=3)
            for name in fts_names:
                words = re.findall(r"\w+", str((first.fields or {}).get(name) or ""))
                if words:
                    coll.query(zvec.Query(name, fts=zvec.Fts(query_string=f'"{words[0]}"')), topk=3)
        return f"ok, {count} documents"
    finally:
        coll.close()


def _copy(path: str, optimize: bool) -> str:
    import pickle
    import time

    import zvec

    from .collection import check_statuses

    zvec.init(query_threads=1, log_level=zvec.LogLevel.ERROR)
    started = time.monotonic()
    coll = zvec.open(path, zvec.CollectionOption(read_only=False))
    try:
        while (batch := pickle.load(sys.stdin.buffer)) is not None:  # None: the last batch was sent
            docs = [zvec.Doc(id=i, fields=fields, vectors=vectors) for i, fields, vectors in batch]
            check_statuses(coll.insert(docs), "insert", path)  # type: ignore[arg-type]
        coll.flush()
        if optimize:
            coll.optimize()
        count = int(coll.stats.doc_count)
    finally:
        coll.close()
    return f"ok, {count} documents, {time.monotonic() - started:.1f} s"


def main(argv: list[str]) -> int:
    copy = argv[:1] == ["--copy"]
    argv = argv[1:] if copy else argv
    optimize = copy and argv[:1] == ["--optimize"]
    argv = argv[1:] if optimize else argv
    if len(argv) != 1:
        print(
            f"{PROBE_MARK} error: usage: python -m ragd.index.zvec.probe [--copy [--optimize]] COLLECTION_DIR",
            flush=True,
        )
        return 2
    try:
        outcome = _copy(argv[0], optimize) if copy else _exercise(argv[0])
    except Exception as err:  # the probe's whole job is to report any failure as a line
        kind = "busy" if "Can't lock" in str(err) else "error"
        print(f"{PROBE_MARK} {kind}: {type(err).__name__}: {err}", flush=True)
        return 1
    print(f"{PROBE_MARK} {outcome}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
