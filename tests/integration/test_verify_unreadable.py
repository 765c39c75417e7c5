"""The verification over a tree with a folder the agent cannot read: a real pass (index/write/verify.py) over a real zvec
index, run as `nobody` in a child process (the test runs as root, who reads everything).

    kb/top.md  kb/sub/a.md  kb/sub/inner/b.md     indexed first (as root), then sub/ is closed
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.config import Config, data_dir
from ragd.index import open_index
from tests.e2e.agent import write_doc
from tests.integration.helpers import run
from tests.support.fake_openai import FakeOpenAI
from tests.support.users import User, python_for

CHILD = """
import json, sys
from concurrent.futures import Future
from pathlib import Path
from ragd.config import Config, data_dir
from ragd.index import open_index
from ragd.index.write.sync import IndexSync
from ragd.index.write.verification import VerifyHooks
from ragd.index.write.verify import Verifier
from ragd.pipeline.scan import Ignore

spec = json.loads(sys.argv[1])
cfg = Config.model_validate(spec["config"])
roots, ignore, looked = [Path(r) for r in cfg.roots], Ignore(cfg.ignore), []
index = open_index(data_dir(cfg), cfg.identity, cfg.index)
sync = IndexSync(index, cfg.identity, roots, ignore)

def write(fn):
    done = Future()
    done.set_result(fn(sync))
    return done

agent = {"held_out": lambda: {Path(p) for p in spec["held"]}, "look_at": lambda d: looked.append(str(d))}
hooks = VerifyHooks(roots=lambda: roots, write=write, busy=lambda d: False, hand_note=lambda n: False,
                    **{k: f for k, f in agent.items() if k in VerifyHooks.__dataclass_fields__})
report = Verifier(cfg.identity, ignore, hooks).run("request")
print(json.dumps({"report": report.to_json(), "looked": looked, "indexed": sorted(index.sources(None))}))
index.close()
"""


@pytest.fixture
def base() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the pass runs as nobody, on a tree root indexed")
    path = Path(tempfile.mkdtemp(prefix="ragd-verify-perm-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for dirpath, dirs, _files in os.walk(path):
            for d in dirs:
                os.chmod(os.path.join(dirpath, d), 0o755)
        shutil.rmtree(path, ignore_errors=True)


def _indexed_tree(base: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Config:
    kb = base / "kb"
    for rel, marker in (("top.md", "zqtop"), ("sub/a.md", "zqsuba"), ("sub/inner/b.md", "zqinner")):
        write_doc(kb / rel, marker)
    monkeypatch.setenv("RAGD_DATA_DIR", str(base / "data"))
    cfg = Config.model_validate({"roots": [str(kb)], "embedding": {
        "provider": "openai", "model": "fake-embed-8", "dimension": server.dim, "base_url": server.base_url,
        "api_key": "sk-test-key-123456"}})  # fmt: skip
    assert run(cfg).ok
    return cfg


def _verify_as_nobody(base: Path, cfg: Config, held: list[Path]) -> dict[str, Any]:
    pw = pwd.getpwnam("nobody")
    nobody = User("nobody", pw.pw_uid, pw.pw_gid, ())
    for dirpath, _dirs, files in os.walk(data_dir(cfg)):  # the index is the agent's: nobody plays the agent
        os.chown(dirpath, nobody.uid, nobody.gid)
        for f in files:
            os.chown(os.path.join(dirpath, f), nobody.uid, nobody.gid)
    spec = {"config": cfg.model_dump(mode="json"), "held": [str(h) for h in held]}
    spec["config"]["embedding"]["api_key"] = "sk-test-key-123456"
    proc = subprocess.run([python_for(nobody, base / "py"), "-c", CHILD, json.dumps(spec)], capture_output=True,
                          text=True, timeout=120, user=nobody.uid, group=nobody.gid, extra_groups=[], cwd="/",
                          env={"PATH": os.environ["PATH"], "RAGD_DATA_DIR": str(data_dir(cfg)), "HOME": "/"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.parametrize("mode", [0o000, 0o644], ids=["unreadable", "not-searchable"])
def test_a_pass_over_a_folder_it_cannot_read_records_it_and_goes_on(
    base: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    """Found unreadable by the pass (the agent had not seen it yet): named in the report, handed to the agent
    (`look_at`), neither compared nor repaired: its sources and those below it stay for the agent to take out."""
    cfg = _indexed_tree(base, fake_openai_server, monkeypatch)
    kb = base / "kb"
    everything = sorted(str(kb / rel) for rel in ("top.md", "sub/a.md", "sub/inner/b.md"))
    (kb / "sub").chmod(mode)
    out = _verify_as_nobody(base, cfg, held=[])
    report = out["report"]
    assert (report["repaired"], report["removed"]) == (0, 0), report
    assert report["unreadable"] == [str(kb / "sub")]
    assert out["looked"] == [str(kb / "sub")] and out["indexed"] == everything


def test_a_folder_held_out_is_not_compared_and_handed_back_once_readable(
    base: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the agent holds out of search (its subtree left the index): while it cannot be read, nothing to
    do; once it can, the pass hands it to the agent, whose job brings it back, and repairs nothing itself."""
    cfg = _indexed_tree(base, fake_openai_server, monkeypatch)
    kb, sub = base / "kb", base / "kb" / "sub"
    index = open_index(data_dir(cfg), cfg.identity, cfg.index)
    index.delete_subtree(str(sub))  # as the agent does when it finds the folder unreadable
    index.flush()
    index.close()
    sub.chmod(0)
    closed = _verify_as_nobody(base, cfg, held=[sub])
    assert (closed["report"]["repaired"], closed["report"]["removed"]) == (0, 0)
    assert closed["report"]["unreadable"] == [str(sub)] and closed["looked"] == []
    sub.chmod(0o755)
    opened = _verify_as_nobody(base, cfg, held=[sub])
    report = opened["report"]
    assert (report["repaired"], report["removed"], report["unreadable"]) == (0, 0, [])
    assert opened["looked"] == [str(sub)] and opened["report"]["busy_dirs"] == 1
    assert opened["indexed"] == [str(kb / "top.md")]
