"""Start-up time of a command: run it N times, print the median and the minimum wall time in ms as JSON.

python packaging/smoke/timing.py N COMMAND ARGS...
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def main() -> None:
    n, cmd = int(sys.argv[1]), sys.argv[2:]
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    print(
        json.dumps({"median_ms": round(statistics.median(times), 1), "min_ms": round(min(times), 1), "n": n})
    )


if __name__ == "__main__":
    main()
