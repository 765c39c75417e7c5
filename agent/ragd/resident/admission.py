"""Who may use the control socket besides the agent's own uid and root (`[access] connect`, docs/access.md): the
modes of the socket and its directory that let them reach it, and the caller each connection is answered as."""

from __future__ import annotations

import grp
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .. import access
from ..config import AccessConfig
from ..errors import ConfigError
from .peer import peer_credentials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Admission:
    """Who may connect besides the agent's own uid and root: nobody ("owner"), the members of group `gid`
    ("group"), or every local user ("anyone"). The socket's directory is then 0711 (others may pass, not list)
    and the socket 0660 of that group (0666 when the agent cannot give it to the group: it is not a member), or
    0666; the peer check decides in every case."""

    connect: str = "owner"
    gid: int | None = None
    group: str = ""

    @classmethod
    def from_config(cls, cfg: AccessConfig) -> Admission:
        if cfg.connect != "group" or cfg.group is None:
            return cls(cfg.connect)
        try:
            return cls("group", grp.getgrnam(cfg.group).gr_gid, cfg.group)
        except KeyError:
            raise ConfigError(f"access.group: there is no group {cfg.group!r}",
                              f"create it (groupadd {cfg.group}), or name another") from None  # fmt: skip

    @property
    def dir_mode(self) -> int:
        return 0o700 if self.connect == "owner" else 0o711

    def open_socket(self, path: Path) -> None:
        """Let the users who may connect reach the socket file (it was bound 0600)."""
        if self.connect == "anyone":
            os.chmod(path, 0o666)
        elif self.connect == "group" and self.gid is not None:
            try:
                os.chown(path, -1, self.gid)
                os.chmod(path, 0o660)
            except PermissionError:
                os.chmod(path, 0o666)
                log.info("control socket %s: mode 666, not 660 of group %s (the agent is not a member); "
                         "the agent itself refuses users outside the group", path, self.group)  # fmt: skip

    def caller(self, conn: socket.socket) -> access.Caller:
        """The caller a connection is answered as; AccessDenied for a peer that may not connect."""
        try:
            pid, uid, gid = peer_credentials(conn)
        except OSError as err:
            log.warning("control socket: cannot read the peer's credentials (%s); refusing it", err)
            raise self._refused() from None
        caller = access.for_uid(uid, gid)
        if caller.full or self.connect == "anyone":
            return caller
        if self.connect == "group" and (gid == self.gid or self.gid in caller.gids):
            return caller
        log.warning("control socket: refused pid %d of uid %d", pid, uid)
        raise self._refused()

    def _refused(self) -> access.AccessDenied:
        if self.connect == "group":
            return access.AccessDenied(f"this agent serves its own user, root and the group {self.group}",
                                       f"ask an administrator to add you to {self.group}")  # fmt: skip
        return access.AccessDenied("this agent belongs to another user", "run ragctl as the agent's user")
