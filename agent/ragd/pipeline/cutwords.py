"""The keyword index's words of new chunks, cut in the parse workers and kept here until the index writer takes them.

Cutting a chunk into the keyword index's words (jieba for Chinese runs, a regular expression for the rest:
index/keyword/words.py) was the index writer's largest share of the agent's interpreter time in a run of new files
(docs/benchmarks.md, the referee's run): the agent's one process, whose interpreter lock every thread shares, did it
for every chunk while the parse workers, done with their files, sat idle waiting for vectors. A worker that parsed
and split a file now also cuts its chunks (`Parsers(cut=…)`: the function is the index's, given by the layer that
wires the two), and the job keeps the words here as it takes the worker's result.

The words are a function of a chunk's header and content alone, so a value kept here is right for whoever takes it
(the key is the content's md5 and the header); a chunk whose words are not here (evicted, from a file parsed in the
job's own thread, or not parsed at all: an index filled again from the sidecars) is cut by the writer as before.
With a Milvus index the workers are given no cut (the server cuts its own words). `take` removes what it returns.
Bounded: at most MAX_CHARS characters of texts and words are kept, the oldest dropped first (an index writer far
behind the jobs keeps only the newest).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ..model import Chunk

MAX_CHARS = 8_000_000  # of texts and words: ~8-16 MB at most

# what a parse worker calls on its chunks' (header, content) pairs: for each, in order, its keyword text (`fts.
# chunk_text`: normalized, as the index keeps it) and that text cut into words
Cut = Callable[[Sequence[tuple[str, str]]], tuple["Words", ...]]
Words = tuple[str, str]  # (the chunk's normalized keyword text, its words)


class CutWords:
    """Words (with the normalized text they were cut from) kept by (content md5, header) until taken."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._kept: dict[tuple[str, str], Words] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def keep(self, chunks: Sequence[Chunk], words: Sequence[Words]) -> None:
        """Keep each chunk's words (`words[i]` for `chunks[i]`; nothing if the counts differ)."""
        if len(chunks) != len(words):
            return
        pairs = [((c.content_hash, c.header), w) for c, w in zip(chunks, words, strict=True)]
        with self._lock:
            for key, w in pairs:
                old = self._kept.pop(key, None)
                self._chars += _size(w) - (_size(old) if old is not None else 0)
                self._kept[key] = w
            while self._chars > self.max_chars and self._kept:
                self._chars -= _size(self._kept.pop(next(iter(self._kept))))

    def take(self, content_hash: str, header: str) -> Words | None:
        """The words kept for this chunk (removed from here), or None."""
        with self._lock:
            w = self._kept.pop((content_hash, header), None)
            if w is not None:
                self._chars -= _size(w)
            return w

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def chars(self) -> int:
        return self._chars


def _size(w: Words) -> int:
    return len(w[0]) + len(w[1])


CUT_WORDS = CutWords()  # the process's: every job keeps its workers' words here, the index writer takes them
