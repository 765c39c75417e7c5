"""A directory job's files, in rounds of FILES_PER_ROUND: each file begun and prepared as its chunks come back
from the parse workers, its texts joining the shared embed queue, while the round before is finished; and the
vectors its files may reuse (this directory's entries, and the entry a file moved in left in its old folder)."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from . import sidecar
from .dirplan import Plan, read_deleted
from .filejob import FileTask
from .outcome import FileOutcome, JobContext, ReuseFn

FILES_PER_ROUND = 64  # files prepared before their embeddings are awaited (bounds memory, shares requests)
PARSE_AHEAD = 4  # a job's files handed to the parse workers ahead of the one it prepares
# a round's files are finished (their vectors awaited, their entries written) this many at a time: each entry's
# write waits for its fsync (7 ms a file on a loaded machine), which kept the embedder waiting for texts (2.4 a
# request) while one thread wrote a big folder's entries one by one
FINISH_THREADS = 4
# a round's outcomes, all recorded, handed over (dirjob's steps); returns what is left to report at the end
HandRound = Callable[[list[FileOutcome]], list[FileOutcome]]


class _ReusePool:
    """content_hash -> stored vector, from the entries a file done again may take vectors from: the file's own (an
    edit keeps most of its chunks), those whose file is gone (a file renamed in the folder: its old name's entry,
    marked deleted by this job) and the deleted ones (a file back). Not every entry of the folder: an edit in a
    folder of 30,000 notes read them all and held all their vectors (the agent at 452 MiB) for one file; a copy
    within a folder is embedded again, as a copy into another folder is.

    A file new at its path whose content left another path (`ctx.moved_from`: a file moved in from another folder,
    by the history) also takes the vectors of the entry it left there, live or marked deleted (DESIGN §4: a move
    costs no embedding)."""

    def __init__(self, ctx: JobContext, directory: Path, plan: Plan) -> None:
        self._ctx, self._dir, self._plan = ctx, directory, plan
        self._pool: dict[str, str] | None = None

    def for_file(self, task: FileTask) -> ReuseFn:
        """The lookup for `task`'s chunks and lead: this folder's pool, then the entry its content left elsewhere."""
        moved: dict[str, str] | None = None

        def lookup(hashes: Sequence[str]) -> dict[str, str]:
            nonlocal moved
            found = self.lookup(hashes)
            if len(found) == len(hashes) or task.old is not None or task.source is None:
                return found
            if moved is None:
                moved = self._moved_vectors(task.path, task.source.md5_hash)
            return found | {h: moved[h] for h in hashes if h not in found and h in moved}

        return lookup

    def _moved_vectors(self, path: Path, md5: str) -> dict[str, str]:
        """The vectors of the entry a document of content `md5` left at another path, {} when there is none."""
        old = self._ctx.moved_from(str(path), md5) if self._ctx.moved_from is not None else None
        if old is None:
            return {}
        where = Path(old)
        entry = sidecar.try_read(sidecar.entry_path(where.parent, where.name)) or read_deleted(
            where.parent, where.name
        )
        if entry is None or entry.source.md5_hash != md5:
            return {}
        ident = self._ctx.identity
        return sidecar.vectors_by_hash([entry], ident.model_name, ident.dimension)

    def lookup(self, hashes: Sequence[str]) -> dict[str, str]:
        if self._pool is None:
            # one entry at a time (a folder's entries together are ten times the vectors kept of them); an entry
            # this job marked deleted (a rename's old name) is read under its deleted name
            redone, files = {name for name, _ in self._plan.work}, self._plan.listing.files
            names = [n for n in self._plan.entries if n in redone or n not in files]
            live = (self._plan.entry(self._dir, n) or read_deleted(self._dir, n) for n in names)
            deleted = (read_deleted(self._dir, n) for n in self._plan.deleted)
            entries = (e for e in itertools.chain(live, deleted) if e is not None)
            ident = self._ctx.identity
            self._pool = sidecar.vectors_by_hash(entries, ident.model_name, ident.dimension)
        return {h: self._pool[h] for h in hashes if h in self._pool}


def run_files(ctx: JobContext, directory: Path, plan: Plan, hand: HandRound) -> list[FileOutcome]:
    """Rounds of files: each file is prepared as its chunks come back from the parse workers (at most
    `PARSE_AHEAD` of the job's files wait there, so that a changed directory's files never queue behind a whole
    round of another's), its texts joining the shared embed queue; only then is the round before finished, so the
    embedder always has the next round's texts while the last round's vectors are awaited."""
    with ThreadPoolExecutor(FINISH_THREADS, thread_name_prefix="finish") as finishing:
        return _rounds(ctx, directory, plan, hand, partial(_finish, finishing))


def _rounds(
    ctx: JobContext,
    directory: Path,
    plan: Plan,
    hand: HandRound,
    _finish: Callable[[list[FileTask]], list[FileOutcome]],
) -> list[FileOutcome]:
    reuse = _ReusePool(ctx, directory, plan)
    if ctx.parsers is not None:
        ctx.parsers.expect(len(plan.work))
    outcomes: list[FileOutcome] = []
    embedding: list[FileTask] = []  # the previous round's files waiting for their vectors
    done: list[FileOutcome] = []  # the previous round's files that ended before their texts were submitted
    for start in range(0, len(plan.work), FILES_PER_ROUND):
        todo = iter(plan.work[start : start + FILES_PER_ROUND])
        parsing: deque[FileTask] = deque()
        waiting: list[FileTask] = []
        ended: list[FileOutcome] = []
        while True:
            while len(parsing) < PARSE_AHEAD and (item := next(todo, None)) is not None:
                task = FileTask(ctx, directory, item[0], item[1], plan.entry(directory, item[0]),
                                labels=plan.labels, planned=plan.listing.files.get(item[0]))  # fmt: skip
                out = task.guard(task.begin)
                if out is None:
                    parsing.append(task)
                else:
                    ended.append(out)
            if not parsing:
                break
            task = parsing.popleft()
            out = task.guard(partial(task.prepare, reuse.for_file(task)))
            if out is None:
                waiting.append(task)
            else:
                ended.append(out)
        outcomes += hand(done + _finish(embedding))
        embedding, done = waiting, ended
    return outcomes + hand(done + _finish(embedding))


def _finish(finishing: ThreadPoolExecutor, tasks: list[FileTask]) -> list[FileOutcome]:
    """The tasks finished, FINISH_THREADS at a time (a task's state is its own; the entries are distinct files)."""
    outcomes = list(finishing.map(_finish_one, tasks)) if len(tasks) > 1 else [_finish_one(t) for t in tasks]
    return outcomes


def _finish_one(task: FileTask) -> FileOutcome:
    out = task.guard(task.finish)
    assert out is not None
    return out
