"""Access scope's configuration: [access] (who may connect to the control socket, and the socket's modes that
follow) and the MCP HTTP tokens ([mcp] token, [mcp.tokens], anonymous: who a request is)."""

from __future__ import annotations

import grp
import os
import pwd
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from ragd import access
from ragd.access.tokens import Tokens
from ragd.config import Config
from ragd.config.load import _validate
from ragd.errors import ConfigError
from ragd.resident.admission import Admission
from ragd.resident.instance import bind_control_socket
from tests.support.users import nobody_peer

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: gives the socket to another group")


def config(**sections: Any) -> Config:
    return _validate(sections, "test.toml")


# -- [access] ----------------------------------------------------------------------------------------------------
def test_access_defaults_to_the_owner_alone() -> None:
    cfg = Config()
    assert cfg.access.connect == "owner" and cfg.access.group is None and not cfg.access.shared
    assert config(access={"connect": "anyone"}).access.shared


@pytest.mark.parametrize(
    ("section", "message"),
    [({"connect": "group"}, 'access.connect = "group" needs access.group'),
     ({"connect": "owner", "group": "staff"}, "access.group is used only with"),
     ({"connect": "everyone"}, "access.connect"),
     ({"conect": "anyone"}, "access.conect: unknown key")],
)  # fmt: skip
def test_access_errors_name_the_key(section: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(access=section)


def test_an_unknown_group_is_a_config_error_at_start() -> None:
    with pytest.raises(ConfigError, match="there is no group 'no-such-group-ragd'") as caught:
        Admission.from_config(config(access={"connect": "group", "group": "no-such-group-ragd"}).access)
    assert "groupadd" in caught.value.hint
    root_group = grp.getgrgid(0).gr_name
    assert Admission.from_config(config(access={"connect": "group", "group": root_group}).access).gid == 0


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_anyone_gets_a_socket_all_may_open_in_a_directory_none_may_list(tmp_path: Path) -> None:
    path = tmp_path / "run" / "control.sock"
    with bind_control_socket(path, Admission("anyone")):
        assert (mode(path.parent), mode(path)) == (0o711, 0o666)
    path.unlink()
    with bind_control_socket(path, Admission()):  # back to the owner alone: the directory is private again
        assert (mode(path.parent), mode(path)) == (0o700, 0o600)


@needs_root
def test_a_group_gets_a_socket_of_its_own(tmp_path: Path) -> None:
    gid = grp.getgrnam("nogroup").gr_gid if _has_group("nogroup") else 65534
    path = tmp_path / "run" / "control.sock"
    with bind_control_socket(path, Admission("group", gid, "nogroup")):
        assert (mode(path.parent), mode(path), os.lstat(path).st_gid) == (0o711, 0o660, gid)


def _has_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def test_the_agents_own_peer_is_always_admitted_and_a_refusal_says_why() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        for admission in (Admission(), Admission("anyone"), Admission("group", 12345, "g")):
            assert admission.caller(a).full  # the test's own uid: the agent's
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
        pytest.raises(access.AccessDenied) as caught,
    ):
        Admission("group", 12345, "team").caller(tcp)  # no peer credentials: refused
    assert caught.value.code == "forbidden" and "group team" in caught.value.message


# -- [mcp] tokens ------------------------------------------------------------------------------------------------
def test_tokens_are_checked_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config(mcp={"token": "own-token-1", "tokens": {"alice": "alice-token-1", "bob": "$RAGD_TEST_BOB"}})
    monkeypatch.setenv("RAGD_TEST_BOB", "bob-token-1")
    assert cfg.mcp.resolved_tokens() == {"alice": "alice-token-1", "bob": "bob-token-1"}
    shown = cfg.redacted()["mcp"]
    assert shown["tokens"] == {"alice": "***", "bob": "***"} and shown["token"] == "***"
    assert "alice-token-1" not in repr(cfg)
    monkeypatch.delenv("RAGD_TEST_BOB")
    with pytest.raises(ConfigError, match=r"mcp.tokens.bob names \$RAGD_TEST_BOB, which is not set"):
        cfg.mcp.resolved_tokens()


@pytest.mark.parametrize(
    ("tokens", "message"),
    [({"al ice": "t"}, "is not a user name"), ({"alice": " "}, "the token of alice is empty"),
     ({"alice": "$not a var"}, "names no environment variable")],
)  # fmt: skip
def test_a_bad_token_entry_names_the_user(tokens: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(mcp={"tokens": tokens})


def test_a_token_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="the same token is given twice"):
        config(mcp={"tokens": {"alice": "same-1", "bob": "same-1"}}).mcp.resolved_tokens()
    with pytest.raises(ConfigError, match="the same token is given twice"):
        config(mcp={"token": "same-1", "tokens": {"alice": "same-1"}}).mcp.resolved_tokens()


@pytest.mark.parametrize(
    ("sections", "without"),
    [({}, "full"),  # the user service as it always was: loopback only, no token
     ({"mcp": {"token": "own"}}, "refuse"),  # as it always was: the token keeps everyone else out
     ({"mcp": {"tokens": {"root": "rt"}}}, "public"),  # users named: others get what everybody may read
     ({"access": {"connect": "anyone"}}, "public"),  # a service of several users
     ({"access": {"connect": "anyone"}, "mcp": {"token": "own"}}, "public"),
     ({"access": {"connect": "anyone"}, "mcp": {"anonymous": "refuse"}}, "refuse"),
     ({"mcp": {"token": "own", "anonymous": "public"}}, "public")],
)  # fmt: skip
def test_what_a_request_without_a_token_gets(sections: dict[str, Any], without: str) -> None:
    assert Tokens.from_config(config(**sections)).without == without


def test_a_token_stands_for_its_user() -> None:
    tokens = Tokens.from_config(config(mcp={"token": "own-1", "tokens": {"root": "root-1", "nobody": "nob-1",
                                                                        "no-such-user-ragd": "ghost-1"}}))  # fmt: skip
    own = tokens.caller(b"own-1")
    assert own is not None and own.full and own.uid == os.geteuid()
    root = tokens.caller(b"root-1")
    assert root is not None and root.full and root.uid == 0
    nobody = tokens.caller(b"nob-1")
    if nobody is not None:  # where the account exists
        assert nobody.kind == "user" and nobody.name == "nobody"
    assert tokens.caller(b"ghost-1") is None  # a user who does not exist: refused
    assert tokens.caller(b"wrong") is None and tokens.caller(b"") is None
    assert tokens.caller(None) is access.PUBLIC


@needs_root
def test_a_peer_outside_the_group_is_refused_by_the_agent_itself() -> None:
    # An abstract socket has no file permissions: `nobody` reaches accept(), and only the agent's check stands
    # (as with a socket the agent could not give to the group, mode 0666).
    nobody = pwd.getpwnam("nobody")
    for admission, admitted in ((Admission(), False), (Admission("group", 12345, "team"), False),
                                (Admission("group", nobody.pw_gid, "nogroup"), True), (Admission("anyone"), True)):  # fmt: skip
        with nobody_peer() as (conn, _child):
            if admitted:
                caller = admission.caller(conn)
                assert (caller.kind, caller.uid, caller.name) == ("user", nobody.pw_uid, "nobody")
            else:
                with pytest.raises(access.AccessDenied):
                    admission.caller(conn)
