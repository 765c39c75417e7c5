"""`reload`: the config file read again, roots added and removed at once; a broken file changes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragctl import protocol as p
from tests.integration.verbs.conftest import Running, config_text, write_tree
from tests.support.fake_openai import FakeOpenAI


def test_reload_adds_a_root_from_the_file(
    running: Running, tmp_path: Path, fake_openai_server: FakeOpenAI
) -> None:
    more = tmp_path / "more"
    more.mkdir()
    write_tree(more)
    running.config_file.write_text(config_text(fake_openai_server, [running.root, more]))
    res = running.ctl("reload")
    assert res["added"] == [str(more)] and res["removed"] == []
    assert [r["path"] for r in res["roots"]] == [str(running.root), str(more)]
    running.wait()
    assert running.ctl("status")["roots"][1]["files"].get("EMBEDDED") == 4


def test_a_broken_file_is_reported_and_changes_nothing(running: Running) -> None:
    running.config_file.write_text("roots = [\n")
    err = running.refused("reload")
    assert err.code == p.FAILED and str(running.config_file) in err.message
    st = running.ctl("status")
    assert [r["path"] for r in st["roots"]] == [str(running.root)] and st["agent"]["reload_error"]


def test_a_failed_reload_names_the_keys_in_status(running: Running) -> None:
    """The human `ragctl status` showed the first line only ("invalid configuration in …:"), not the keys."""
    running.config_file.write_text(running.config_file.read_text() + "\n[limits]\nmax_file_sise = 5\n")
    assert running.refused("reload").code == p.FAILED
    error = running.ctl("status")["agent"]["reload_error"]
    assert str(running.config_file) in error and "limits.max_file_sise" in error, error
    shown = subprocess.run(
        [sys.executable, "-m", "ragctl", "status"], capture_output=True, text=True, timeout=60
    )
    assert "limits.max_file_sise" in shown.stdout and "the running configuration is kept" in shown.stdout, (
        shown
    )
