"""Access scope (docs/access.md): on an agent that serves several users, each answer shows only what its caller
can read.

- `caller`: who is asking (the control socket's peer, an MCP HTTP token's user, or anyone), bound per request.
- `perms`: mode bits and POSIX ACLs as the kernel reads them for that caller.
- `scope`: a path and every directory above it, checked at answer time; the filters the answers use.
- `status`: the agent's status with the paths the caller may not see left out.

The answers apply them where they are made (search, read, resources, changes, status, export, orphans); the
control server and the MCP server refuse administration to scoped callers.
"""

from __future__ import annotations

from .caller import (
    PUBLIC,
    AccessDenied,
    Caller,
    acting_as,
    agent,
    bind,
    current,
    denied,
    for_uid,
    for_user,
    is_full_uid,
    require_full,
)
from .scope import NotReadable, Scope, scope

__all__ = [
    "PUBLIC",
    "AccessDenied",
    "Caller",
    "NotReadable",
    "Scope",
    "acting_as",
    "agent",
    "bind",
    "current",
    "denied",
    "for_uid",
    "for_user",
    "is_full_uid",
    "require_full",
    "scope",
]
