"""The [mcp] configuration section: loopback only, optional token (redacted), unknown keys refused."""

from __future__ import annotations

import pytest

from ragd.config import Config, McpConfig
from ragd.errors import ConfigError


def test_defaults() -> None:
    cfg = Config().mcp
    assert (cfg.enabled, cfg.host, cfg.port, cfg.token, cfg.allowed_origins) == (
        True,
        "127.0.0.1",
        8739,
        None,
        (),
    )
    assert cfg.resolved_token({}) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_accepted(host: str) -> None:
    assert McpConfig(host=host).host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.2", "example.com", ""])
def test_other_hosts_are_refused(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        McpConfig(host=host)


def test_port_range_and_unknown_keys() -> None:
    for bad in ({"port": -1}, {"port": 65536}, {"tokn": "x"}):
        with pytest.raises(ValueError):
            Config.model_validate({"mcp": bad})


def test_token_from_config_or_environment_never_shown() -> None:
    cfg = Config.model_validate({"mcp": {"token": "s3cret"}})
    assert cfg.mcp.resolved_token({}) == "s3cret"
    assert cfg.redacted()["mcp"]["token"] == "***" and "s3cret" not in repr(cfg)
    env_cfg = McpConfig(token_env="MY_TOKEN")
    assert env_cfg.resolved_token({"MY_TOKEN": "t0k"}) == "t0k"
    with pytest.raises(ConfigError, match=r"\$MY_TOKEN, which is not set"):
        env_cfg.resolved_token({})
