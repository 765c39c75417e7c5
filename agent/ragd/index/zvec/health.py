"""Is a zvec collection safe to open in this process? Cheap checks, a clean-close stamp, a probe in a child.

zvec 0.8 does not only fail on some damage, it crashes the opener (SIGSEGV/SIGABRT): always on a zero-length newest
manifest (what a crash or power loss during a manifest write leaves), and on about half of the manifests with
flipped bits (docs/zvec-notes.md). A crash at start-up is a crash loop under systemd, so before zvec opens a
collection in this process:

1. cheap checks (microseconds): the newest `manifest.N` must not be empty;
2. the stamp: a writable handle that closes cleanly records the fingerprint (name, size, sha256) of the newest
   manifest in `<collection>.verified` beside the directory, and a writable open removes it first. When the
   stamp matches, the collection is as a clean close left it and is opened at once (every normal start);
3. otherwise (no stamp: the last writer crashed or was killed, or the collection came from elsewhere; or the
   manifest changed since) a child process opens the collection read-only and reads from it first
   (`probe.py`); a child that dies by a signal or does not finish within PROBE_TIMEOUT_S means "damaged".

Damage other than in the manifest (segment files zeroed, truncated, missing or random) made zvec raise errors,
which `ZvecIndex.open` maps to IndexError_ like a damaged verdict from here; `open_or_rebuild` then rebuilds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...atomic import atomic_write

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 60.0
PROBE_MARK = "ragd-index-probe:"
PROBE_FLAG = "--ragd-index-probe"  # how a frozen `ragd` binary is asked to run the probe (see probe_command)
DAMAGED_HINT = (
    "the index is derived data: start the agent (`ragd run`) and it rebuilds it from the .ragjson sidecars"
)


@dataclass(frozen=True)
class Verdict:
    """What a probe found: `damaged` (with why), or not (`detail` says how it went)."""

    damaged: bool
    detail: str


def newest_manifest(path: Path) -> Path | None:
    """The `manifest.N` with the highest N: the one zvec reads (an older one beside it is ignored)."""
    best: tuple[int, Path] | None = None
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            prefix, _, number = entry.name.partition(".")
            if prefix == "manifest" and number.isdigit() and (best is None or int(number) > best[0]):
                best = (int(number), Path(entry.path))
    return best[1] if best else None


def cheap_problem(path: Path) -> str | None:
    """Damage that is certain to crash zvec, found without opening anything."""
    manifest = newest_manifest(path)
    try:
        if manifest is not None and manifest.stat().st_size == 0:
            return f"its manifest {manifest.name} is empty"
    except OSError as err:
        return f"its manifest {manifest} cannot be read: {err.strerror}"
    return None


def fingerprint(path: Path) -> str | None:
    manifest = newest_manifest(path)
    if manifest is None:
        return None
    try:
        data = manifest.read_bytes()
    except OSError:
        return None
    return f"{manifest.name}:{len(data)}:{hashlib.sha256(data).hexdigest()}"


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def stamp_matches(path: Path) -> bool:
    try:
        recorded = json.loads(stamp_path(path).read_text(encoding="utf-8")).get("manifest")
    except (OSError, ValueError, AttributeError):
        return False
    return recorded is not None and recorded == fingerprint(path)


def write_stamp(path: Path) -> None:
    """Record the collection as openable (after a clean close, or a probe that found it sound)."""
    current = fingerprint(path)
    if current is None:
        return
    target = stamp_path(path)
    try:
        atomic_write(target, json.dumps({"manifest": current}).encode(), mode=0o644)
    except OSError as err:  # only costs a probe at the next open
        log.warning("cannot write %s: %s", target, err)


def clear_stamp(path: Path) -> None:
    stamp_path(path).unlink(missing_ok=True)


def held_for_writing(path: Path) -> bool:
    """True when another handle (another process, or zvec in this one) holds the collection for writing."""
    try:
        fd = os.open(path / "LOCK", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor drops our probe lock
    return False


def probe_command(path: Path, *options: str) -> list[str]:
    """The child's command line: this interpreter running `ragd.index.zvec.probe`, or the frozen `ragd` binary."""
    if getattr(sys, "frozen", False):
        return [sys.executable, PROBE_FLAG, *options, str(path)]
    return [sys.executable, "-m", "ragd.index.zvec.probe", *options, str(path)]


def _child_env() -> dict[str, str]:
    """The child imports the same ragd as this process, wherever it was imported from."""
    package_parent = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_parent, path) if p)}


def reports(output: str) -> list[str]:
    """The lines a probe child printed for its parent (those starting with PROBE_MARK), the mark taken off."""
    return [ln[len(PROBE_MARK) :].strip() for ln in output.splitlines() if ln.startswith(PROBE_MARK)]


def probe(path: Path, timeout: float = PROBE_TIMEOUT_S) -> Verdict:
    """Open the collection read-only in a child process, read from it, and report how that went."""
    try:
        done = subprocess.run(
            probe_command(path),
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Verdict(True, f"opening it did not finish within {timeout:.0f} s")
    except OSError as err:
        return Verdict(False, f"the probe could not start: {err}")
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name if -done.returncode in signal.valid_signals() else ""
        return Verdict(True, f"opening it crashed the process ({name or f'signal {-done.returncode}'})")
    lines = reports(done.stdout)
    if not lines:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Verdict(False, f"the probe did not run ({tail})")
    return Verdict(False, lines[-1])


OPTIMIZE_TIMEOUT_S = 6 * 3600.0  # a graph of millions of chunks takes tens of minutes on 2 cores


class CopyInChild:
    """A compaction's copy made by a child process (probe.py `--copy`): this process sends the documents, a batch
    at a time, and the child inserts them into the empty collection at `path`, flushes, builds the HNSW graph if
    asked (`optimize`), and closes it. The copy's writing segment and the graph's build live and die with the child:
    made in the agent, they were most of its 1 GiB peak at 100,000 notes (docs/benchmarks/history.md, issue 36).
    A child that fails, dies or runs past `timeout` (killed then) makes `send` or `finish` raise RuntimeError."""

    def __init__(self, path: Path, *, optimize: bool, timeout: float = OPTIMIZE_TIMEOUT_S) -> None:
        self._path = path
        # stdout and stderr: a pipe nobody reads meanwhile could fill; closed by `finish` or `kill`
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        options = ["--copy", *(["--optimize"] if optimize else [])]
        self._proc = subprocess.Popen(probe_command(path, *options), env=_child_env(), stdin=subprocess.PIPE,
                                      stdout=self._out, stderr=subprocess.STDOUT)  # fmt: skip
        self._timeout, self._timed_out, self._report = timeout, False, ""
        self._timer = threading.Timer(timeout, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        self._timed_out = True
        with contextlib.suppress(OSError):
            self._proc.kill()

    def send(self, docs: Sequence[Any]) -> None:
        """Hand the child `docs` (zvec Docs, as `fetch` returns them) to insert."""
        batch = [(d.id, d.fields, {name: np.asarray(v, dtype=np.float32) for name, v in (d.vectors or {}).items()})
                 for d in docs]  # fmt: skip
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            pickle.dump(batch, stdin, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError:  # BrokenPipeError: the child is gone
            raise RuntimeError(self._failure()) from None

    def finish(self) -> int:
        """Wait for the child to flush, build and close the copy; the documents it holds."""
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            pickle.dump(None, stdin)  # the end: without it the child gives up (its agent stopped meanwhile)
            stdin.close()
        except OSError:
            raise RuntimeError(self._failure()) from None
        self._proc.wait()
        self._timer.cancel()
        line = self._line()
        found = re.match(r"ok, (\d+) documents", line)
        if self._proc.returncode != 0 or found is None:
            raise RuntimeError(self._failure())
        return int(found.group(1))

    def kill(self) -> None:
        """Stop the child (a compaction given up); the caller removes the copy."""
        self._timer.cancel()
        with contextlib.suppress(OSError):
            self._proc.kill()
        with contextlib.suppress(OSError, ValueError):
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        self._proc.wait()
        if not self._out.closed:
            self._out.close()

    def _line(self) -> str:
        """The child's report (its last PROBE_MARK line), else the last line it printed (once it has exited)."""
        if not self._out.closed:
            self._out.seek(0)
            text = self._out.read().decode("utf-8", "replace")
            self._out.close()
            lines, marked = text.strip().splitlines(), reports(text)
            self._report = marked[-1] if marked else (lines[-1] if lines else "")
        return self._report

    def _failure(self) -> str:
        self._timer.cancel()
        with contextlib.suppress(OSError):
            self._proc.kill()
        code = self._proc.wait()
        if self._timed_out:
            tail = f"did not finish within {self._timeout:.0f} s"
        else:
            tail = self._line() or (f"killed by signal {-code}" if code < 0 else f"exit status {code}")
        return f"copying the index into {self._path} failed: {tail}"
