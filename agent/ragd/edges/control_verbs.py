"""The control socket's verbs (docs/protocol.md): a table over the verb layer, nothing more.

Each entry names the verb's argument model and function; a request's args are parsed into the model (a wrong or
unknown argument is a bad_request naming it), the function runs with the stream's `send` as its progress, and the
control server turns any RagdError into the error reply.

A scoped caller (a local user other than the agent's own and root: docs/access.md) may use the verbs of
SCOPED_VERBS, each of which limits its answer to what that user can read; every other verb, including any added
later, answers it `forbidden`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from ragctl import protocol as p

from .. import access
from ..verbs import changes, export, index, orphans, pause, reload, roots, search, status, sync, verify, wait
from ..verbs import config as config_verb
from ..verbs import mcp_client as mcp_client_verb
from ..verbs.arguments import parse
from ..verbs.runtime import Resident
from .control import Handler, Stream

Verb = tuple[type[BaseModel], Callable[..., Any], bool]  # (arguments, function, takes a progress callback)

TABLE: dict[str, Verb] = {
    "status": (status.StatusArgs, status.status, True),
    "search": (search.SearchQuery, search.search, False),
    "sync": (sync.SyncArgs, sync.sync, True),
    "wait": (wait.WaitArgs, wait.wait, True),
    "export": (export.ExportArgs, export.export, False),
    "orphans": (orphans.OrphansArgs, orphans.orphans, False),
    "changes": (changes.ChangesArgs, changes.changes, False),
    "index": (index.IndexArgs, index.index, True),
    "roots": (roots.RootsArgs, roots.roots, False),
    "verify": (verify.VerifyArgs, verify.verify, True),
    "pause": (pause.NoArgs, pause.pause, False),
    "resume": (pause.NoArgs, pause.resume, False),
    "reload": (pause.NoArgs, reload.reload, False),
    "config": (config_verb.ConfigArgs, config_verb.config, False),
    "mcp_client": (pause.NoArgs, mcp_client_verb.mcp_client, False),
}
SCOPED_VERBS = frozenset({"hello", "status", "search", "changes", "wait", "export", "orphans", "roots", "mcp_client",
                          "mcp_session", "mcp_call", "mcp_read"})  # fmt: skip


def control_handlers(rt: Resident, extra: Mapping[str, Handler] = {}) -> dict[str, Handler]:
    """Every verb of TABLE bound to `rt`, `hello`, and `extra` (the MCP bridge's verbs)."""

    def bind(model: type[BaseModel], fn: Callable[..., Any], streams: bool) -> Handler:
        def handle(raw: dict[str, Any], stream: Stream) -> Any:
            args = parse(model, raw)
            return fn(rt, args, stream.send) if streams else fn(rt, args)

        return handle

    def hello(raw: dict[str, Any], stream: Stream) -> Any:
        return {"agent": "ragd", "version": rt.version(), "protocol": p.VERSION, "pid": os.getpid()}

    handlers = {"hello": hello, **{name: bind(*verb) for name, verb in TABLE.items()}, **extra}
    return {name: h if name in SCOPED_VERBS else _for_administrators(name, h) for name, h in handlers.items()}


def _for_administrators(name: str, handler: Handler) -> Handler:
    def handle(raw: dict[str, Any], stream: Stream) -> Any:
        access.require_full(f"`{name}`")
        return handler(raw, stream)

    return handle
