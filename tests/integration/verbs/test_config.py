"""`config check`: the config file as it would load now, secrets redacted."""

from __future__ import annotations

from ragctl import protocol as p
from tests.integration.verbs.conftest import Running


def test_config_check_redacts_the_key(running: Running) -> None:
    res = running.ctl("config", {"action": "check"})
    assert res["valid"] and res["source"] == str(running.config_file)
    assert "sk-e2e-secret-key-0001" not in str(res["config"])  # the key of tests/e2e/conftest.py's config


def test_a_broken_key_is_named(running: Running) -> None:
    running.config_file.write_text(running.config_file.read_text() + "\n[watch]\nquiet = -1\n")
    err = running.refused("config")
    assert err.code == p.FAILED and str(running.config_file) in err.message
    assert running.refused("config", {"action": "apply"}).code == p.BAD_REQUEST
