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


BIG_BLOCKS = """
import json, re, sys
sys.path.insert(0, "agent")
from ragd.resident import memory

def anon():
    return int(re.search(r"RssAnon:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024

memory.limit_arenas()
first = b"x" * (24 << 20)  # a big block freed (the model's arrays inflated once): glibc took its size as the
del first  # threshold from which a block gets pages of its own
blocks = [b"x" * (1 << 20) for _ in range(64)]
last = blocks[-1]  # still in use: the freed blocks below it are not at the top of the heap
held = anon()
del blocks
print(json.dumps({"held": held, "after": anon()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_big_blocks_go_back_at_once() -> None:
    """Blocks of a megabyte freed while the agent works (a big folder's job never leaves it idle, where it trims)
    are returned when freed: glibc no longer raises the size from which a block gets pages of its own, which the
    agent's first big blocks took to 32 MiB, after which every block below that came from an arena and stayed there
    once freed (issue 36)."""
    out = subprocess.run(
        [sys.executable, "-c", BIG_BLOCKS], cwd=TOP, capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout)
    assert r["held"] - r["after"] > 48, r  # 63 of the 64 MiB


CHILD_TRIM = """
import json, re, sys, threading
sys.path.insert(0, "agent")
from ragd.resident import memory

def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024

memory.limit_arenas()
survivors = []
blocks = [bytes(1000 + i % 7) for i in range(200_000)]
survivors.extend(blocks[::100])
del blocks
before = rss()
first = memory.trim_now_and_then(every=60)
after = rss()
again = memory.trim_now_and_then(every=60)
print(json.dumps({"first": first, "again": again, "before": before, "after": after}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_long_job_trims_now_and_then() -> None:
    """What a big folder's job frees goes back while it runs, at most once in `every` seconds."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD_TRIM], cwd=TOP, capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout)
    assert r["first"] and not r["again"]
    assert r["after"] < r["before"] - 100
