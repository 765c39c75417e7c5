"""The dictionary the keyword index cuts Chinese text with: jieba's, without its rarest words.

zvec 0.8 cuts a full-text field's Chinese with cppjieba and, by default, the 349,000-word dictionary built into
it, which every process with a collection open holds in memory: about 145 MiB of the resident agent's 335 MiB
(docs/benchmarks.md, issue 14). Memory grows with the words (measured: 50k words +20 MiB over no dictionary,
120k +50 MiB, 200k +80 MiB, all of them +145 MiB), and most of them are rare names, places and idioms. Cut by
frequency, the development set scored the same within 0.003 MRR@10 down to 120,000 words, and lost 0.01 on
Chinese questions at 100,000 (`python -m bench.bench_ranking --jieba-dicts`). So ragd keeps the words jieba's
corpus saw at least MIN_FREQ times (120,467 of 349,046).

`use()` writes that dictionary, and jieba's HMM model for words the dictionary lacks, in cppjieba's formats
(`jieba.dict.utf8`, `hmm_model.utf8`) into a directory of the user's cache, made once per version of the source
and of these rules, and points zvec at it (`ZVEC_JIEBA_DICT_DIR`, read when a collection opens). The source is the
`jieba` package's `dict.txt` and `finalseg` probabilities (MIT licence). Without the package the keyword index
cannot be opened (`IndexError_`): a collection cut with another dictionary would match queries differently.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

from ..errors import IndexError_

log = logging.getLogger(__name__)

MIN_FREQ = 7  # jieba's corpus frequency a word needs to stay in the dictionary
RULES = 1  # bump when what is written changes: a new directory, made again
ENV = "ZVEC_JIEBA_DICT_DIR"
DICT_NAME, HMM_NAME = "jieba.dict.utf8", "hmm_model.utf8"
STATES = "BEMS"  # cppjieba's order of the HMM's states
_lock = threading.Lock()
_chosen: Path | None = None


def source() -> Path:
    """jieba's dict.txt, found without importing the package."""
    spec = importlib.util.find_spec("jieba")
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    for place in places:
        if (path := Path(place) / "dict.txt").is_file():
            return path
    raise IndexError_("the `jieba` package (the dictionary the keyword index cuts Chinese with) is missing",
                      "reinstall ragd with its dependencies")  # fmt: skip


def cache_root() -> Path:
    from platformdirs import user_cache_path

    return user_cache_path("ragd", appauthor=False)


def use() -> Path:
    """The dictionary directory, made if needed (found once per process), set in ZVEC_JIEBA_DICT_DIR."""
    global _chosen
    with _lock:
        if _chosen is None or not (_chosen / DICT_NAME).is_file():
            _chosen = _make(source())
        os.environ[ENV] = str(_chosen)  # again each time: a caller may have reset the environment
        return _chosen


def _make(src: Path) -> Path:
    key = hashlib.sha256(f"{src.stat().st_size}:{MIN_FREQ}:{RULES}".encode()).hexdigest()[:12]
    for parent in (cache_root(), Path(tempfile.gettempdir()) / f"ragd-cache-{os.getuid()}"):
        target = parent / f"jieba-{key}"
        if (target / DICT_NAME).is_file() and (target / HMM_NAME).is_file():
            return target
        try:
            _write(src, target)
            return target
        except OSError as err:  # a read-only home: the temp dir instead
            log.warning("cannot write the keyword dictionary at %s (%s)", target, err)
    raise IndexError_("cannot write the keyword index's dictionary in the cache or the temp directory",
                      "check that $XDG_CACHE_HOME (or ~/.cache) is writable")  # fmt: skip


def _write(src: Path, target: Path) -> None:
    """Both files into a fresh directory beside `target`, renamed into place whole (another process may race)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        kept = _write_dict(src, tmp / DICT_NAME)
        _write_hmm(tmp / HMM_NAME)
        os.chmod(tmp, 0o755)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / DICT_NAME).is_file():  # not another process's finished copy
                raise
        log.info("keyword dictionary: %d words of jieba's at %s", kept, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # what is left of it when the rename did not happen


def _write_dict(src: Path, dest: Path) -> int:
    """jieba's lines ("word frequency tag") whose frequency is at least MIN_FREQ, in their order."""
    kept = 0
    with src.open(encoding="utf-8") as lines, dest.open("w", encoding="utf-8") as out:
        for line in lines:
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) >= MIN_FREQ:
                out.write(" ".join(parts[:3]) + "\n")
                kept += 1
    return kept


def _write_hmm(dest: Path) -> None:
    """cppjieba's HMM file: start probabilities, the transition matrix, then each state's emissions (log)."""
    from jieba.finalseg import prob_emit, prob_start, prob_trans

    lines = ["# the HMM of jieba's finalseg, states " + " ".join(STATES)]
    lines.append(" ".join(repr(prob_start.P.get(s, -3.14e100)) for s in STATES))
    for a in STATES:
        lines.append(" ".join(repr(prob_trans.P.get(a, {}).get(b, -3.14e100)) for b in STATES))
    for s in STATES:
        lines.append(",".join(f"{ch}:{p!r}" for ch, p in prob_emit.P.get(s, {}).items() if ch not in ",:\n"))
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
