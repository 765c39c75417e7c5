"""An embeddings API's client is imported ahead of the first request, once a file is handed to the parsers: the first
request used to wait for that import (docs/benchmarks.md, the referee's run). A fresh interpreter each time, so
that nothing else has imported the client already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys, time
from pathlib import Path
from ragd.config import EmbeddingConfig, LimitsConfig, RunConfig
from ragd.model import SplitterSettings
from ragd.pipeline.embed import LazyEmbedQueue
from ragd.pipeline.workers import Parsers

CLIENT = "ragd.pipeline.embed.openai_api"
queue = LazyEmbedQueue(EmbeddingConfig(provider="{provider}", base_url="http://127.0.0.1:9/v1"), run=RunConfig(workers=1))
parsers = Parsers(RunConfig(workers=0), LimitsConfig())
parsers.when_used(queue.prepare)
assert CLIENT not in sys.modules, "imported before any file"
parsers.start(Path(sys.argv[1]), SplitterSettings()).result()
deadline = time.monotonic() + {wait}
while CLIENT not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(0.2)
print(CLIENT in sys.modules)
"""


def probe(tmp_path: Path, provider: str, wait: float) -> str:
    note = tmp_path / "note.md"
    note.write_text("# A note\n\nsome words\n", encoding="utf-8")
    code = PROBE.replace("{provider}", provider).replace("{wait}", str(wait))
    out = subprocess.run([sys.executable, "-c", code, str(note)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_an_embeddings_apis_client_is_imported_once_a_file_is_handed_to_the_parsers(tmp_path: Path) -> None:
    assert probe(tmp_path, "openai", wait=60) == "True"


def test_with_the_bundled_model_nothing_is_imported_ahead(tmp_path: Path) -> None:
    assert probe(tmp_path, "local", wait=2) == "False"
