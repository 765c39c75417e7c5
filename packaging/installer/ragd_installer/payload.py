"""The payload: the frozen one-directory program, as a directory or a tar archive, with its manifest.

Layout (built by packaging/build.sh):
    ragd-payload.json        {"name": "ragd", "version": …, "python": …, "glibc": …, "platform": …, "built": …}
    bin/ragd, bin/ragctl     the two executables of the PyInstaller one-directory build
    bin/_internal/           their shared interpreter, libraries and data (model included)
    share/systemd/           ragd.service, ragd-system.service, 60-ragd-inotify.conf (the unit templates)
    share/doc/ragd/          operations.md
The one-file installer carries it as `payload/ragd-payload.tar.gz` (manifest first, so `--version` reads it
without decompressing the rest).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .layout import PROGRAMS, InstallError

MANIFEST_NAME = "ragd-payload.json"
BUNDLED = Path("payload") / "ragd-payload.tar.gz"
UNIT_TEMPLATES = Path("share") / "systemd"
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]*$")


@dataclass(frozen=True)
class PayloadInfo:
    version: str
    python: str = ""
    glibc: str = ""
    platform: str = ""
    built: str = ""

    def describe(self) -> str:
        extra = ", ".join(
            f"{k} {v}"
            for k, v in (("Python", self.python), ("glibc", self.glibc), ("built", self.built))
            if v
        )
        return f"ragd {self.version}" + (f" ({extra})" if extra else "")


@dataclass(frozen=True)
class Payload:
    source: Path  # a directory or a tar archive
    info: PayloadInfo

    def place(self, dest: Path) -> None:
        """Copy or extract the program into `dest` (which must not exist), then check its executables."""
        if self.source.is_dir():
            shutil.copytree(self.source, dest, symlinks=True)
        else:
            dest.mkdir(mode=0o755)
            with tarfile.open(self.source) as tar:
                _extract(tar, dest, self.source)
        for name in PROGRAMS:
            exe = dest / "bin" / name
            if not (exe.is_file() and os.access(exe, os.X_OK)):
                raise InstallError(f"the payload {self.source} has no executable bin/{name}", _REBUILD)

    def unit_template(self, name: str) -> str:
        """A unit file shipped in the payload (share/systemd/<name>), read without extracting everything."""
        member = UNIT_TEMPLATES / name
        if self.source.is_dir():
            return _read_text(self.source / member)
        with tarfile.open(self.source) as tar:
            return _tar_text(tar, member.as_posix(), self.source)


_REBUILD = "rebuild it with `make dist` (packaging/build.sh)"


def bundled_payload() -> Path | None:
    """The archive inside the frozen one-file installer (None when running from source)."""
    base = getattr(sys, "_MEIPASS", None)
    if base is None:
        return None
    path = Path(base) / BUNDLED
    return path if path.is_file() else None


def open_payload(path: Path | None) -> Payload:
    """The payload at `path` (directory or tar), else the bundled one."""
    source = path if path is not None else bundled_payload()
    if source is None:
        raise InstallError(
            "this installer carries no payload (it runs from source)",
            "give one with --payload DIR|TAR, or build the one-file installer with `make dist`",
        )
    source = Path(os.path.abspath(source))
    if source.is_dir():
        raw = _read_text(source / MANIFEST_NAME)
    elif source.is_file():
        try:
            with tarfile.open(source) as tar:
                raw = _tar_text(tar, MANIFEST_NAME, source)
        except tarfile.TarError as err:
            raise InstallError(
                f"the payload {source} is not a readable tar archive: {err}", _REBUILD
            ) from None
    else:
        raise InstallError(f"no payload at {source}", "give an existing directory or tar archive")
    return Payload(source, parse_manifest(raw, source))


def parse_manifest(raw: str, source: Path) -> PayloadInfo:
    try:
        data: Any = json.loads(raw)
    except ValueError as err:
        raise InstallError(f"the manifest of {source} is not JSON: {err}", _REBUILD) from None
    if not isinstance(data, dict) or data.get("name") != "ragd":
        raise InstallError(f"{source} is not a ragd payload (its manifest names no ragd)", _REBUILD)
    version = str(data.get("version", ""))
    if not _VERSION.match(version):
        raise InstallError(f"the payload {source} has an unusable version {version!r}", _REBUILD)
    fields = {k: str(data.get(k, "")) for k in ("python", "glibc", "platform", "built")}
    return PayloadInfo(version=version, **fields)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise InstallError(f"cannot read {path}: {err}", _REBUILD) from None


def _tar_text(tar: tarfile.TarFile, name: str, source: Path) -> str:
    for member in tar:  # members in order: the manifest comes first, so this stops early
        if member.name.removeprefix("./") == name and member.isfile():
            stream = tar.extractfile(member)
            if stream is not None:
                return stream.read().decode("utf-8")
    raise InstallError(f"the payload {source} has no {name}", _REBUILD)


def _extract(tar: tarfile.TarFile, dest: Path, source: Path) -> None:
    """Extract with the "data" filter (no absolute or `..` names, no links out, no devices, no set-id bits); on a
    Python without it (before 3.11.4) the members are checked the same way first."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    _check_members(tar, dest, source)
    tar.extractall(dest)  # every member was checked


def _check_members(tar: tarfile.TarFile, dest: Path, source: Path) -> None:
    top = dest.resolve()
    for m in tar.getmembers():
        target = (top / m.name).resolve()
        link = (target.parent / m.linkname).resolve() if m.issym() else (top / m.linkname).resolve()
        if (m.name.startswith("/") or not target.is_relative_to(top) or m.isdev()
                or ((m.issym() or m.islnk()) and not link.is_relative_to(top))):  # fmt: skip
            raise InstallError(f"the payload {source} holds an unsafe member {m.name!r}", _REBUILD)
        m.mode &= 0o777  # no set-id or sticky bits
