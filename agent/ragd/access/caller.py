"""Who is asking: the caller of one request, bound where the request comes in and read where answers are made.

A `Caller` is one of three kinds:
- `full`: the agent's own uid, or root. Unrestricted, as every caller was before access scope existed (root can
  read everything anyway, and the agent's own user owns the index).
- `user`: another local user (a control-socket peer, or the user an MCP HTTP token maps to). Answers are limited to
  the files that user can read; administration is refused.
- `public`: an MCP HTTP request without a token on an agent that serves several users: only what every local user
  may read ("other" permission bits).

The edges bind the caller of a request: the control server for a connection's thread (`bind`), the MCP server for
a request (`acting_as`); the MCP SDK runs tools in worker threads with a copy of the request's context, so the
caller follows. Code outside any request (the agent's own loops, the offline `ragd` commands) acts as the agent.
"""

from __future__ import annotations

import os
import pwd
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

from ragctl import protocol as p

from ..errors import RagdError

Kind = Literal["full", "user", "public"]
LOOKUP_TTL_S = 5.0  # a user's groups are looked up again after this long (group changes apply within it)


@dataclass(frozen=True)
class Caller:
    kind: Kind
    uid: int | None  # None for `public`
    gids: frozenset[int] = field(default_factory=frozenset)  # primary and supplementary groups
    name: str = ""

    @property
    def full(self) -> bool:
        return self.kind == "full"

    def describe(self) -> str:
        if self.kind == "public":
            return "an MCP client without a token"
        return f"user {self.name} (uid {self.uid})" if self.name else f"uid {self.uid}"


PUBLIC = Caller("public", None, frozenset(), "anyone")
_current: ContextVar[Caller | None] = ContextVar("ragd_caller", default=None)
_cache: dict[tuple[str, object], tuple[float, Caller | None]] = {}
_cache_lock = threading.Lock()


class AccessDenied(RagdError):
    """A scoped caller asked for something only the agent's own user and root may do."""

    code = p.FORBIDDEN


def is_full_uid(uid: int) -> bool:
    """The agent's own (effective) uid and root are unrestricted."""
    return uid in (os.geteuid(), 0)


def agent() -> Caller:
    """The agent itself: whoever runs code outside a request."""
    uid = os.geteuid()
    return Caller("full", uid, frozenset(os.getgroups()) | {os.getegid()}, _name(uid) or "")


def current() -> Caller:
    """The caller of the request being answered (the agent itself outside a request)."""
    return _current.get() or agent()


def bind(caller: Caller) -> None:
    """Make `caller` the caller of everything this thread does from now on (a control connection's thread)."""
    _current.set(caller)


@contextmanager
def acting_as(caller: Caller) -> Iterator[Caller]:
    """`caller` is the caller within the block (and in the tasks and worker threads it starts)."""
    token = _current.set(caller)
    try:
        yield caller
    finally:
        _current.reset(token)


def require_full(what: str) -> None:
    """Raise AccessDenied unless the current caller is the agent's own user or root."""
    caller = current()
    if not caller.full:
        raise denied(what, caller)


def denied(what: str, caller: Caller) -> AccessDenied:
    return AccessDenied(
        f"{what} is for the agent's administrators (its own user and root), not {caller.describe()}",
        "ask an administrator of this ragd (e.g. `sudo ragctl ...`); searching and reading need no more",
    )


def for_uid(uid: int, gid: int) -> Caller:
    """The caller of a control-socket peer with credentials `uid`/`gid` (SO_PEERCRED)."""
    found = _cached(("uid", uid), lambda: _lookup_uid(uid, gid))
    assert found is not None
    return found


def for_user(name: str) -> Caller | None:
    """The caller an MCP token's user name stands for; None when no such user exists."""
    return _cached(("name", name), lambda: _lookup_name(name))


def _lookup_uid(uid: int, gid: int) -> Caller:
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:  # a uid with no account (a container's, a deleted user's): its peer gid is all we know
        return Caller("full" if is_full_uid(uid) else "user", uid, frozenset({gid}), "")
    return _from_passwd(pw)


def _lookup_name(name: str) -> Caller | None:
    try:
        return _from_passwd(pwd.getpwnam(name))
    except KeyError:
        return None


def _from_passwd(pw: pwd.struct_passwd) -> Caller:
    gids = frozenset(os.getgrouplist(pw.pw_name, pw.pw_gid))
    return Caller("full" if is_full_uid(pw.pw_uid) else "user", pw.pw_uid, gids, pw.pw_name)


def _name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _cached(key: tuple[str, object], make: Callable[[], Caller | None]) -> Caller | None:
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
    value = make()
    with _cache_lock:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = (now + LOOKUP_TTL_S, value)
    return value
