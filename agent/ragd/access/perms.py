"""Permission bits as the kernel reads them for one caller: the owner, group or other class of a file's mode, and
its POSIX access ACL when it has one (`setfacl`; the system service's own access to the roots is usually given
that way, which also changes what the mode's group bits mean).

Pure functions over a stat result and an ACL; `scope.py` applies them to a path and every directory above it.
Not evaluated: capabilities (CAP_DAC_READ_SEARCH and the like), SELinux/AppArmor, NFSv4 ACLs, and
default ACLs (which only shape files created later).
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from dataclasses import dataclass

from .caller import Caller

R, W, X = 4, 2, 1
ACL_XATTR = "system.posix_acl_access"
ACL_VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_HEADER = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")  # tag, perm, id (little-endian, as Linux stores the xattr)
_NO_ACL = (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS)


@dataclass(frozen=True)
class AclEntry:
    tag: int
    perm: int
    id: int


Acl = tuple[AclEntry, ...]


def parse_acl(raw: bytes) -> Acl | None:
    """The entries of a `system.posix_acl_access` value; None when it is not one (then the mode alone decides)."""
    if len(raw) < _HEADER.size or (len(raw) - _HEADER.size) % _ENTRY.size:
        return None
    if _HEADER.unpack_from(raw)[0] != ACL_VERSION:
        return None
    count = (len(raw) - _HEADER.size) // _ENTRY.size
    return tuple(AclEntry(*_ENTRY.unpack_from(raw, _HEADER.size + i * _ENTRY.size)) for i in range(count))


def read_acl(path: str) -> Acl | None:
    """`path`'s access ACL (symlinks followed), None when it has none."""
    try:
        return parse_acl(os.getxattr(path, ACL_XATTR))
    except OSError as err:
        if err.errno in _NO_ACL:
            return None
        raise


def allows(caller: Caller, st: os.stat_result, acl: Acl | None, want: int) -> bool:
    """Whether `caller` has every permission bit of `want` (R, X, ...) on a file with stat `st` and ACL `acl`."""
    if caller.full:
        return True
    mode = stat.S_IMODE(st.st_mode)
    if caller.uid is None:  # public: what every local user may do
        return _has(mode & 7, want)
    if caller.uid == st.st_uid:
        return _has(mode >> 6 & 7, want)
    if acl:
        return _acl_allows(caller, mode, st.st_gid, acl, want)
    if st.st_gid in caller.gids:
        return _has(mode >> 3 & 7, want)
    return _has(mode & 7, want)


def _acl_allows(caller: Caller, mode: int, file_gid: int, acl: Acl, want: int) -> bool:
    """POSIX.1e access check past the owner (as Linux's posix_acl_permission). The mode's group bits are the
    mask when there is one (chmod changes them together); named users and groups are limited by it."""
    has_mask = any(e.tag == MASK for e in acl)
    mask = mode >> 3 & 7 if has_mask else 7
    for e in acl:
        if e.tag == USER and e.id == caller.uid:
            return _has(e.perm & mask, want)
    groups = [e for e in acl if (e.tag == GROUP_OBJ and file_gid in caller.gids)
              or (e.tag == GROUP and e.id in caller.gids)]  # fmt: skip
    if groups:  # the owning group's entry is the mode's group bits when there is no mask

        def perm(e: AclEntry) -> int:
            return mode >> 3 & 7 if e.tag == GROUP_OBJ and not has_mask else e.perm

        return any(_has(perm(e) & mask, want) for e in groups)
    return _has(mode & 7, want)


def _has(bits: int, want: int) -> bool:
    return bits & want == want
