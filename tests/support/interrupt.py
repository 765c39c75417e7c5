"""Children that take Ctrl-C as a terminal delivers it, from a test process with threads.

A suite run from a shell that ignores SIGINT (nohup, a background job, some CI runners) passes the ignored signal
on to its children, and Python then installs no handler of its own: a test of Ctrl-C needs SIGINT back to its
default in the child. Not with `preexec_fn`, which runs Python in the forked child before exec and can deadlock
there when another thread of the test process held a lock at the fork (seen: a `ragctl wait` that never started
beside a worker's gRPC threads). The child instead starts as a tiny Python that resets SIGINT and execs the real
command: exec keeps a default disposition, and nothing runs between the fork and the first exec.
"""

from __future__ import annotations

import sys

_RESET_AND_EXEC = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


def with_sigint(argv: list[str]) -> list[str]:
    """`argv` (a program and its arguments, the program a path) started with SIGINT at its default."""
    return [sys.executable, "-c", _RESET_AND_EXEC, *argv]
