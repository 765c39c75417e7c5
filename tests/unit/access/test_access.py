"""Access scope's permission checks: mode bits and POSIX ACLs for one caller, and a path's parents, at answer time.

The pure checks take made-up callers and stat values; the path checks use real files in a directory every user
can pass through (not pytest's 0700 temp tree), evaluated for uids other than the test's own.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragd import access
from ragd.access import perms
from ragd.access.perms import GROUP, GROUP_OBJ, MASK, OTHER, USER, USER_OBJ, AclEntry, R, W, X

ALICE = access.Caller("user", 5001, frozenset({5001, 7000}), "alice")  # uid 5001, also in group 7000
BOB = access.Caller("user", 5002, frozenset({5002}), "bob")
ME = access.Caller("full", os.geteuid(), frozenset({os.getegid()}), "me")


def st(mode: int, uid: int = 5001, gid: int = 5001) -> os.stat_result:
    """A stat result of a regular file with `mode`, owned by `uid`:`gid`."""
    return os.stat_result((stat.S_IFREG | mode, 1, 1, 1, uid, gid, 0, 0, 0, 0))


def acl_bytes(*entries: tuple[int, int, int]) -> bytes:
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)


# -- mode bits ---------------------------------------------------------------------------------------------------
def test_the_owner_class_decides_for_the_owner_even_against_the_other_bits() -> None:
    assert perms.allows(ALICE, st(0o600), None, R)
    assert not perms.allows(ALICE, st(0o044), None, R)  # owner bits ---: the owner cannot read, others can
    assert perms.allows(BOB, st(0o044), None, R)


def test_the_group_bits_apply_to_every_group_of_the_caller() -> None:
    assert perms.allows(ALICE, st(0o640, uid=1, gid=7000), None, R)  # a supplementary group
    assert not perms.allows(BOB, st(0o640, uid=1, gid=7000), None, R)
    assert not perms.allows(ALICE, st(0o604, uid=1, gid=7000), None, R)  # group ---, other r--: group decides


def test_other_bits_and_the_public_caller() -> None:
    assert perms.allows(BOB, st(0o644), None, R) and not perms.allows(BOB, st(0o640), None, R)
    assert perms.allows(access.PUBLIC, st(0o604, uid=1, gid=1), None, R)
    assert not perms.allows(access.PUBLIC, st(0o660, uid=1, gid=1), None, R)


def test_every_wanted_bit_is_needed() -> None:
    assert perms.allows(BOB, st(0o005), None, R | X)
    assert not perms.allows(BOB, st(0o004), None, R | X)
    assert not perms.allows(BOB, st(0o001), None, R)


def test_the_agent_and_root_are_never_limited() -> None:
    assert perms.allows(ME, st(0o000, uid=1, gid=1), None, R | W | X)
    assert access.is_full_uid(0) and access.is_full_uid(os.geteuid())
    assert access.for_uid(0, 0).full


# -- POSIX ACLs --------------------------------------------------------------------------------------------------
def test_an_acl_value_is_parsed_and_a_foreign_one_ignored() -> None:
    raw = acl_bytes((USER_OBJ, 6, 0xFFFFFFFF), (USER, 4, 5002), (GROUP_OBJ, 0, 0xFFFFFFFF), (MASK, 4, 0xFFFFFFFF),
                    (OTHER, 0, 0xFFFFFFFF))  # fmt: skip
    parsed = perms.parse_acl(raw)
    assert parsed is not None and parsed[1] == AclEntry(USER, 4, 5002) and len(parsed) == 5
    assert perms.parse_acl(struct.pack("<I", 1) + raw[4:]) is None  # another version
    assert perms.parse_acl(raw[:-3]) is None  # torn


def test_a_named_user_entry_is_limited_by_the_mask() -> None:
    acl = perms.parse_acl(
        acl_bytes((USER_OBJ, 6, 0), (USER, 4, 5002), (GROUP_OBJ, 0, 0), (MASK, 4, 0), (OTHER, 0, 0))
    )
    assert perms.allows(BOB, st(0o640), acl, R)  # mode's group bits are the mask: r--
    assert not perms.allows(
        BOB, st(0o600), acl, R
    )  # chmod g-r lowered the mask: the named entry is masked off
    assert not perms.allows(access.Caller("user", 5003, frozenset({5003}), "carol"), st(0o640), acl, R)


def test_with_a_mask_the_group_bits_are_not_the_owning_groups() -> None:
    # setfacl -m u:ragd:rw on a 0600 file: the mode now shows 0660, yet the owning group still has nothing
    acl = perms.parse_acl(
        acl_bytes((USER_OBJ, 6, 0), (USER, 6, 999), (GROUP_OBJ, 0, 0), (MASK, 6, 0), (OTHER, 0, 0))
    )
    in_group = access.Caller("user", 5009, frozenset({5001}), "teammate")
    assert perms.allows(in_group, st(0o660), None, R)  # the mode alone would let the group in ...
    assert not perms.allows(in_group, st(0o660), acl, R)  # ... the ACL does not
    named_group = perms.parse_acl(acl_bytes((USER_OBJ, 6, 0), (GROUP_OBJ, 0, 0), (GROUP, 4, 7000), (MASK, 4, 0),
                                            (OTHER, 0, 0)))  # fmt: skip
    assert perms.allows(ALICE, st(0o640, uid=1, gid=1), named_group, R)


def test_a_matching_group_without_the_permission_denies_even_when_other_allows() -> None:
    acl = perms.parse_acl(
        acl_bytes((USER_OBJ, 6, 0), (GROUP_OBJ, 4, 0), (GROUP, 0, 7000), (MASK, 4, 0), (OTHER, 4, 0))
    )
    assert not perms.allows(
        ALICE, st(0o644, uid=1, gid=1), acl, R
    )  # in group 7000 (---): other's r-- not used
    assert perms.allows(BOB, st(0o644, uid=1, gid=1), acl, R)


# -- paths -------------------------------------------------------------------------------------------------------
@pytest.fixture
def tree() -> Iterator[Path]:
    """A directory every user can pass through and list (pytest's own temp tree is private to the test's uid)."""
    base = Path(tempfile.mkdtemp(prefix="ragd-access-unit-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def other(uid_offset: int = 4242, groups: frozenset[int] = frozenset()) -> access.Caller:
    """A caller whose uid differs from the owner of the test's files."""
    uid = os.geteuid() + uid_offset
    return access.Caller("user", uid, groups | {uid}, "other")


def test_a_file_needs_read_on_itself_and_search_on_every_parent(tree: Path) -> None:
    (tree / "a" / "b").mkdir(parents=True)
    doc = tree / "a" / "b" / "doc.md"
    doc.write_text("x")
    for d in (tree / "a", tree / "a" / "b"):
        d.chmod(0o755)
    doc.chmod(0o644)
    assert access.scope(other()).readable(doc)
    (tree / "a").chmod(0o754)  # r without x for others: the file inside cannot be reached
    assert not access.scope(other()).readable(doc)
    assert not access.scope(other()).enterable(tree / "a" / "b")
    (tree / "a").chmod(0o711)  # x without r: reachable by its name, not listable
    scope = access.scope(other())
    assert scope.readable(doc) and scope.enterable(tree / "a") and not scope.listable(tree / "a")
    assert access.scope(ME).readable(doc)


def test_a_chmod_applies_to_the_next_answer(tree: Path) -> None:
    doc = tree / "flip.md"
    doc.write_text("x")
    doc.chmod(0o644)
    assert access.scope(other()).readable(doc)
    doc.chmod(0o600)
    assert not access.scope(other()).readable(doc)
    doc.chmod(0o640)
    os.chown(doc, -1, os.getegid())
    assert access.scope(other(groups=frozenset({os.getegid()}))).readable(doc)
    assert not access.scope(other()).readable(doc)


def test_a_symlink_is_judged_by_its_target_and_the_targets_parents(tree: Path) -> None:
    hidden = tree / "hidden"
    hidden.mkdir(mode=0o700)
    hidden.chmod(0o700)
    (hidden / "secret.md").write_text("x")
    (hidden / "secret.md").chmod(0o644)
    (tree / "open").mkdir()
    (tree / "open").chmod(0o755)
    link = tree / "open" / "link.md"
    link.symlink_to(hidden / "secret.md")
    assert not access.scope(other()).readable(link)
    hidden.chmod(0o711)
    assert access.scope(other()).readable(link)


def test_a_path_gone_is_visible_when_its_folder_can_be_listed(tree: Path) -> None:
    (tree / "d").mkdir()
    (tree / "d").chmod(0o755)
    gone = tree / "d" / "removed.md"
    assert access.scope(other()).visible(gone)
    assert not access.scope(other()).readable(gone)
    (tree / "d").chmod(0o711)
    assert not access.scope(other()).visible(gone)
    with pytest.raises(access.NotReadable, match="is not readable by user other"):
        access.scope(other()).check_readable(gone)


def test_keep_and_the_unrestricted_caller(tree: Path) -> None:
    mine, theirs = tree / "mine.md", tree / "theirs.md"
    for p, mode in ((mine, 0o644), (theirs, 0o600)):
        p.write_text("x")
        p.chmod(mode)
    items = [{"path": str(mine)}, {"path": str(theirs)}]
    assert access.scope(other()).keep(items, lambda i: i["path"]) == items[:1]
    assert access.scope(ME).keep(items, lambda i: i["path"]) == items


def test_a_real_acl_is_read_from_the_file(tree: Path) -> None:
    doc = tree / "acl.md"
    doc.write_text("x")
    doc.chmod(0o600)
    reader = other()
    acl = acl_bytes((USER_OBJ, 6, 0xFFFFFFFF), (USER, 4, reader.uid or 0), (GROUP_OBJ, 0, 0xFFFFFFFF),
                    (MASK, 4, 0xFFFFFFFF), (OTHER, 0, 0xFFFFFFFF))  # fmt: skip
    try:
        os.setxattr(doc, perms.ACL_XATTR, acl)
    except OSError as err:
        if err.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
            pytest.skip(f"the file system of {tree} has no POSIX ACLs")
        raise
    assert stat.S_IMODE(doc.stat().st_mode) == 0o640  # the kernel shows the mask as the group bits
    assert perms.read_acl(str(doc)) is not None
    assert access.scope(reader).readable(doc)
    assert not access.scope(other(1)).readable(doc)  # group bits r--, but the owning group's entry is ---
    os.removexattr(doc, perms.ACL_XATTR)
    assert perms.read_acl(str(doc)) is None and not access.scope(reader).readable(doc)


# -- the caller --------------------------------------------------------------------------------------------------
def test_the_caller_is_the_agent_outside_a_request_and_the_bound_one_inside() -> None:
    assert access.current().full and access.current().uid == os.geteuid()
    with access.acting_as(BOB):
        assert access.current() == BOB
        with pytest.raises(access.AccessDenied, match="for the agent's administrators") as caught:
            access.require_full("`sync`")
        assert caught.value.code == "forbidden" and "bob (uid 5002)" in caught.value.message
    assert access.current().full


def test_a_user_is_resolved_with_its_groups() -> None:
    root = access.for_user("root")
    assert root is not None and root.full and root.uid == 0 and 0 in root.gids
    assert access.for_user("no-such-user-ragd-test") is None
    nobody = access.for_uid(65534, 65534)
    assert not nobody.full and nobody.uid == 65534
