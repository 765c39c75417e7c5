"""`ragctl search` and `ragd search` take one set of flags (ragctl/protocol/search_flags.py) and make one request of them;
the flags' older names still work for a version, each with a warning."""

from __future__ import annotations

import argparse

import pytest

from ragctl.commands import request_for
from ragctl.main import build_parser
from ragd.edges import cli as ragd_cli

ARGV = ["search", "发票 invoice", "-k", "3", "--path-prefix", "/kb/sub", "--mode", "keyword", "--ext", "md",
        "--where", "tag=invoice", "--one-per-file", "--files", "--reach", "all", "--explain"]  # fmt: skip


def _search_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["search"]


def _flags(parser: argparse.ArgumentParser) -> dict[tuple[str, ...], tuple[object, ...]]:
    """Each search flag as (dest, default, type, choices, help): what a user can tell apart."""
    own = {("-h", "--help"), ("--json",), ("--socket",)}  # each command's own, not search's
    return {tuple(a.option_strings): (a.dest, a.default, a.type, a.choices, a.help) for a in parser._actions
            if tuple(a.option_strings) not in own}  # fmt: skip


def test_both_command_lines_define_the_same_search_flags() -> None:
    ragctl, ragd = _search_parser(build_parser()), _search_parser(ragd_cli._parser())
    assert _flags(ragctl) == _flags(ragd)


def test_both_make_the_same_request() -> None:
    from ragctl.protocol.search_flags import search_request

    ragd_ns = ragd_cli._parser().parse_args(ARGV)
    assert search_request(ragd_ns) == request_for(build_parser().parse_args(ARGV))[1]


@pytest.mark.parametrize(
    ("old", "new"),
    [(["--path", "/kb/sub"], ["--path-prefix", "/kb/sub"]), (["--scope", "all"], ["--reach", "all"])],
)
def test_the_older_flags_still_work_and_say_they_are_deprecated(
    capsys: pytest.CaptureFixture[str], old: list[str], new: list[str]
) -> None:
    for parse in (build_parser().parse_args, ragd_cli._parser().parse_args):
        assert request_for(parse(["search", "q", *old])) == request_for(parse(["search", "q", *new]))
        err = capsys.readouterr().err
        assert f"warning: {old[0]} is deprecated" in err and new[0] in err


def test_the_answer_timeout_is_no_longer_a_second_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    ns = build_parser().parse_args(["--answer-timeout", "4", "wait", "--timeout", "60"])
    assert (ns.io_timeout, ns.wait_timeout) == (4.0, 60.0)
    assert capsys.readouterr().err == ""
    ns = build_parser().parse_args(["--timeout", "4", "wait", "--timeout", "60"])  # the older name
    assert (ns.io_timeout, ns.wait_timeout) == (4.0, 60.0)
    assert "warning: --timeout is deprecated" in capsys.readouterr().err


def test_ragd_search_refuses_a_bad_argument_as_ragctl_does(capsys: pytest.CaptureFixture[str]) -> None:
    """It was checked only once the index was open (with one, a pydantic traceback, exit 1): the query is now built
    as the control verb builds it, before anything is opened."""
    assert ragd_cli.main(["search", "q", "-k", "0"]) == 2
    err = capsys.readouterr().err
    assert "argument 'top_k' must be greater than or equal to 1" in err and "Traceback" not in err


def test_the_flags_choices_are_the_querys() -> None:
    """The command lines offer exactly the modes and reaches a SearchQuery takes, and its default count."""
    from typing import get_args

    from ragctl.protocol import TOP_K
    from ragctl.protocol.search_flags import MODES, REACHES
    from ragd.index.query.searchquery import SearchQuery

    fields = SearchQuery.model_fields
    assert get_args(fields["mode"].annotation) == MODES and get_args(fields["reach"].annotation) == REACHES
    assert (fields["mode"].default, fields["reach"].default, fields["top_k"].default) == (
        MODES[0],
        REACHES[0],
        TOP_K,
    )
