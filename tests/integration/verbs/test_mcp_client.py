"""`mcp_client`: the HTTP endpoint's URL and bearer token, for `ragctl mcp-config --http`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.config import Config
from tests.integration.verbs.conftest import Running
from tests.support.fake_openai import FakeOpenAI
from tests.support.inproc import agent_in_process, control


def test_the_url_is_the_served_one_and_no_token_is_configured(running: Running) -> None:
    told = running.ctl("mcp_client")
    mcp = running.ctl("status")["mcp"]
    assert told == {"enabled": True, "url": mcp["url"], "error": None, "token": None, "ui_url": mcp["ui_url"]}
    assert told["ui_url"] == told["url"].removesuffix("/mcp") + "/ui/"
    assert told["url"].startswith("http://127.0.0.1:") and told["url"].endswith("/mcp")


def config(api: FakeOpenAI, **mcp: object) -> Config:
    emb = {"provider": "openai", "model": "fake-embed-8", "dimension": api.dim, "base_url": api.base_url,
           "api_key": "sk-test-key-123456"}  # fmt: skip
    return Config.model_validate({"embedding": emb, "mcp": {"port": 0, **mcp}})


def test_the_token_from_token_env_and_an_unset_one(
    kb: Path, fake_openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGD_TEST_MCP_TOKEN", "s3cret-token")
    with agent_in_process(config(fake_openai_server, token_env="RAGD_TEST_MCP_TOKEN"), [kb]) as life:
        told = control(life, "mcp_client")
        assert told["token"] == "s3cret-token" and told["url"] == life.http.url
    monkeypatch.delenv("RAGD_TEST_MCP_TOKEN")
    with agent_in_process(config(fake_openai_server, token_env="RAGD_TEST_MCP_TOKEN"), [kb]) as life:
        told = control(life, "mcp_client")
        assert told["token"] is None and told["url"] is None and "RAGD_TEST_MCP_TOKEN" in told["error"]


def test_http_off_is_said(kb: Path, fake_openai_server: FakeOpenAI) -> None:
    with agent_in_process(config(fake_openai_server, enabled=False, token="t"), [kb]) as life:
        assert control(life, "mcp_client") == {
            "enabled": False,
            "url": None,
            "error": None,
            "token": "t",
            "ui_url": None,
        }
