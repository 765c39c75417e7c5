"""The resident process gives freed memory back (resident/memory.py), measured in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[3]

CHILD = """
import json, re, sys, threading
sys.path.insert(0, "agent")
from ragd.resident import memory

def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024

limited = memory.limit_arenas()
survivors = []

def work():  # about 200 MiB of blocks glibc allocates (not Python's small-object allocator), in a thread's arena
    blocks = [bytes(1000 + i % 7) for i in range(200_000)]
    survivors.extend(blocks[::100])  # a few survivors spread over the heap keep its pages from being unmapped

thread = threading.Thread(target=work)
thread.start()
thread.join()
before = rss()
released = memory.release()
print(json.dumps({"limited": limited, "released": released, "before": before, "after": rss()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_memory_goes_back_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=TOP, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r["limited"] and r["released"]
    assert r["before"] > 150  # the survivors kept the freed blocks' pages resident
    assert r["after"] < r["before"] - 100  # malloc_trim returned them
