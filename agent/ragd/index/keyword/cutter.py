"""The parse workers' share of the keyword index's work: each worker cuts the chunks of the file it split into the
index's words (pipeline/cutwords.py), the same cut the index writer makes (words.py).

The parse pool's workers import this module as they start, and the pools' fork server imports it once for them all
(pipeline/pool.py): its import builds ragd's Chinese dictionary (~0.2 s, ~8 MiB), so every worker forked from the
server has it at once and shares its pages. A dictionary that cannot be built is said here; a worker then cuts with
what `words` falls back to, as the writer would.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from . import words
from .fts import chunk_text

log = logging.getLogger(__name__)


def chunk_words(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """For chunks given as (header, content) pairs, in order: each one's keyword text (normalized, as zvec keeps
    it) and its words."""
    texts = [chunk_text(header, content) for header, content in pairs]
    return tuple((text, words.joined(text, normalized=True)) for text in texts)


# the import's boundary: the first Chinese chunk meets the same error where it is cut
try:
    words.warm()
except Exception as err:
    log.debug("the keyword dictionary could not be built ahead: %s", err)
