"""Legacy binary Office files (.doc, .ppt): LibreOffice converts them to OOXML, markitdown does the rest."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ...errors import FileSkipped, ParseError
from ...model import Document
from .office import parse_markitdown

log = logging.getLogger(__name__)

TARGETS = {".doc": "docx", ".ppt": "pptx"}
LEGACY_EXTENSIONS = frozenset(TARGETS)
_STDERR_TAIL = 300


def parse_legacy(path: Path, ext: str, timeout: float) -> Document:
    """`soffice --headless --convert-to docx|pptx` into a private temp dir, then markitdown on the result."""
    target = TARGETS[ext]
    soffice = shutil.which("soffice")
    if soffice is None:
        raise FileSkipped(
            f"needs LibreOffice (soffice) on PATH to convert {ext}",
            f"install LibreOffice, or save the file as .{target}",
        )
    with tempfile.TemporaryDirectory(prefix="ragd-soffice-") as tmp:
        work = Path(tmp)
        # A plain copy name: LibreOffice derives the output name from it; the user's name may hold anything.
        source = work / f"source{ext}"
        shutil.copyfile(path, source)
        outdir = work / "out"
        outdir.mkdir()
        cmd = [
            soffice,
            f"-env:UserInstallation={(work / 'profile').as_uri()}",
            "--headless",
            "--norestore",
            "--convert-to",
            target,
            "--outdir",
            str(outdir),
            str(source),
        ]
        _run(cmd, ext, timeout)
        converted = outdir / f"source.{target}"
        if not converted.is_file():
            raise ParseError(
                f"LibreOffice produced no .{target} from this {ext} file (corrupt or encrypted?)",
                f"open it in LibreOffice or Word and save it as .{target}",
            )
        return parse_markitdown(converted, f".{target}", parser="soffice+markitdown", source=path)


def _run(cmd: list[str], ext: str, timeout: float) -> None:
    """Run soffice in its own process group, so a timeout kills its helper processes too."""
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ParseError(
            f"LibreOffice conversion of {ext} timed out after {timeout:g} s",
            "raise limits.parse_timeout, or convert the file by hand",
        ) from None
    if proc.returncode != 0:
        tail = " ".join(err.decode("utf-8", "replace").split())[-_STDERR_TAIL:]
        raise ParseError(
            f"LibreOffice could not convert {ext} (exit status {proc.returncode}): {tail}",
            "open it in LibreOffice and check that it loads",
        )
    log.debug("soffice converted a %s file", ext)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
