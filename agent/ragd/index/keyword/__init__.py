"""The keyword engine: how text is cut into words (`words`) and turned into search terms (`fts`), the tantivy
keyword index beside a zvec collection (`keywords`), and the English glosses of a Chinese question (`lexicon`)."""

# the parse workers' cut (pipeline/workers.py `Parsers(cut=…)`): named, not imported, so that only the workers
# (and their fork server) import cutter.py, whose import builds the Chinese dictionary
WORKER_CUT = "ragd.index.keyword.cutter:chunk_words"


def worker_cut(backend: str) -> str | None:
    """The cut the parse workers make for an index on `backend`: none for Milvus, whose server cuts its own words."""
    return WORKER_CUT if backend == "zvec" else None
