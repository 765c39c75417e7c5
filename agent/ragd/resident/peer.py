"""Who is on the other end of a control connection: SO_PEERCRED. Peers with the agent's own uid are allowed, and
root: root can read the agent's memory and files and switch to its uid anyway, so refusing it protects nothing and
only breaks administration (`sudo ragctl ...` against a system agent). Shared by `instance.py` (a live agent found
on the socket) and `admission.py` (who else may connect: docs/access.md)."""

from __future__ import annotations

import logging
import os
import socket
import struct

log = logging.getLogger(__name__)

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a unix socket, as of its connect() (SO_PEERCRED)."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    pid, uid, gid = _CRED.unpack(raw)
    return pid, uid, gid


def uid_allowed(peer_uid: int, own_uid: int | None = None) -> bool:
    """Our own uid (default: the effective uid) and root may talk to the agent; nobody else."""
    own = os.geteuid() if own_uid is None else own_uid
    return peer_uid in (own, 0)


def peer_allowed(conn: socket.socket, own_uid: int | None = None) -> bool:
    """Whether the peer may use the control socket; False (logged) when its credentials cannot be read."""
    try:
        pid, uid, _gid = peer_credentials(conn)
    except OSError as err:
        log.warning("control socket: cannot read the peer's credentials (%s); refusing it", err)
        return False
    if uid_allowed(uid, own_uid):
        return True
    log.warning("control socket: refused pid %d of uid %d", pid, uid)
    return False
