"""`ragctl verify`: the index checked against the sidecars, its progress and its findings; and the line `ragctl
status` shows of the last check."""

from __future__ import annotations

from collections.abc import Mapping

from ..protocol.text import Obj, _count, _int, _num, one_line, plural, show_path


def verify_line(verify: Obj | None) -> str:
    """'verified 2026-12-01T10:00:00Z (periodic): 3400 sources, nothing to repair' ('' before the first pass)."""
    if not verify:
        return ""
    last = verify.get("last") or {}
    running = "; verifying now" if verify.get("running") else ""
    if not last:
        return "not verified yet" + running
    fixed = _int(last.get("repaired")) + _int(last.get("removed"))
    outcome = (
        "nothing to repair"
        if not fixed
        else f"{last.get('repaired')} repaired, {last.get('removed')} removed"
    )
    total = _int(verify.get("repaired_total"))
    since = f"; {total} repaired since start" if total else ""
    return (f"verified {last.get('finished_at', '?')} ({last.get('trigger', '?')}): "
            f"{_num(last.get('sources'))} sources, {outcome}{since}{running}")  # fmt: skip


def verified(result: Obj) -> str:
    """`ragctl verify`: what was checked, and every repair (a repair means a bug: the log has the details)."""
    lines = [f"checked {_count(result.get('sources'), 'source')} in {_count(result.get('dirs'), 'directory', 'directories')} "
             f"against {_num(result.get('indexed'))} indexed, in {_num(result.get('elapsed_s'))} s"]  # fmt: skip
    lines += [f"repaired {show_path(p)}" for p in result.get("repaired_paths") or []]
    lines += [f"removed {show_path(p)}" for p in result.get("removed_paths") or []]
    lines += [
        f"changed since indexed, indexing again: {show_path(p)}" for p in result.get("redone_paths") or []
    ]
    listed = len(result.get("repaired_paths") or []) + len(result.get("removed_paths") or [])
    fixed = _int(result.get("repaired")) + _int(result.get("removed"))
    if fixed > listed:
        lines.append(f"… and {fixed - listed} more (see the agent's log)")
    for p in result.get("unreadable") or []:
        lines.append(f"cannot read {show_path(p)} (permission denied): out of search, not compared")
    if _int(result.get("busy_dirs")):
        lines.append(
            f"{_count(result['busy_dirs'], 'directory', 'directories')} had work in progress: checked again once "
            "the agent is idle"
        )
    lines.append("the index matches the sidecars" if not fixed else f"{plural(fixed, 'source')} repaired")
    return "\n".join(lines) + "\n"


def verify_progress(data: Obj, bar_width: int | None = None) -> str:
    return (
        f"verifying the index against the sidecars ({_count(data.get('dirs'), 'directory', 'directories')})"
    )


def _item(item: object) -> str:
    if isinstance(item, Mapping):
        reason = item.get("reason") or item.get("error")
        return show_path(item.get("path", "?")) + (f": {one_line(reason)}" if reason else "")
    return show_path(item)
