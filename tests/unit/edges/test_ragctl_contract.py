"""Each request `ragctl` sends fits its verb's argument model in the agent: a field renamed on one side only, a
type changed on one side only, or a verb ragctl sends that the agent does not know fails here, not in a user's
terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragctl.commands import REQUESTS, request_for
from ragctl.main import build_parser
from ragctl.protocol.search_flags import RENAMED_ARGS
from ragd.edges.control_verbs import TABLE

# every command line that makes a request, with every flag of its verb at a value other than its default
COMMANDS = [
    ["status"],
    ["status", "--watch", "--interval", "0.5"],
    ["search", "q"],
    ["search", "发票", "-k", "7", "--path-prefix", "/r/sub", "--path-prefix", "rel", "--mode", "keyword",
     "--ext", "md", "--where", "tag=invoice", "--one-per-file", "--files", "--reach", "all", "--explain"],
    ["sync"],
    ["sync", "/r/d", "--force", "--wait", "--timeout", "9"],
    ["wait"],
    ["wait", "/r/a", "/r/b", "--timeout", "2.5"],
    ["export", "/tmp/out.tar.gz"],
    ["export", "/tmp/out.tar.gz", "/r/d", "-r"],
    ["changes"],
    ["changes", "/r/d", "--since", "3h", "--limit", "5", "--kind", "moved", "--kind", "deleted"],
    ["orphans"],
    ["orphans", "/r/d", "--clean"],
    ["verify"],
    ["index"],
    ["index", "--rebuild"],
    ["roots"],
    ["roots", "list"],
    ["roots", "add", "/r/new"],
    ["roots", "remove", "/r/new"],
    ["pause"],
    ["resume"],
    ["reload"],
    ["config", "check"],
]  # fmt: skip


def sent(argv: list[str]) -> tuple[str, dict[str, Any]]:
    return request_for(build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_every_field_ragctl_sends_is_one_its_verb_takes(argv: list[str]) -> None:
    verb, args = sent(argv)
    assert verb in TABLE, f"ragctl sends {verb!r}, which the agent's control table does not have"
    model = TABLE[verb][0]
    unknown = set(args) - set(model.model_fields)
    assert not unknown, f"ragctl {' '.join(argv)} sends {sorted(unknown)}, not arguments of {model.__name__}"
    assert verb != "search" or not set(args) & RENAMED_ARGS.keys(), "ragctl sends an older name"
    model.model_validate(args)  # strict: each value of the type the verb wants


def test_the_cases_cover_every_request_ragctl_makes() -> None:
    covered = {sent(argv)[0] for argv in COMMANDS}
    assert set(REQUESTS) <= covered
    assert {"pause", "resume", "reload", "verify"} <= covered  # the verbs sent without arguments


def test_a_field_renamed_on_one_side_only_is_caught() -> None:
    """The check itself: the search request with `top_k` renamed as an older ragctl would send it."""
    _, args = sent(["search", "q", "-k", "3"])
    args["count"] = args.pop("top_k")
    assert set(args) - set(TABLE["search"][0].model_fields) == {"count"}


def test_paths_are_sent_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sent(["search", "q", "--path-prefix", "sub"])[1]["path_prefix"] == [str(tmp_path / "sub")]
