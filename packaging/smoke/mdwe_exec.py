"""Run a program with memory-deny-write-execute on, as the units' MemoryDenyWriteExecute=yes does.

    python packaging/smoke/mdwe_exec.py PROGRAM ARGS...
Uses prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN) (Linux >= 6.3; kept across execve), so the frozen program's
native libraries are checked for writable+executable mappings. On an older kernel it says so and runs the
program anyway.
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        err = os.strerror(ctypes.get_errno())
        print(f"mdwe_exec: PR_SET_MDWE unavailable ({err}); running without it", file=sys.stderr)
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
