"""Where the agent keeps its data (the data directory, made 0700) and its control socket (the runtime directory,
resolved by the wire protocol so that ragctl finds the same place)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

if TYPE_CHECKING:
    from .settings import Config

APP = "ragd"


def data_dir(config: Config | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The agent's data directory: created 0700 when missing, and its `index/` (the documents' text) kept 0700."""
    env = os.environ if environ is None else environ
    if env.get("RAGD_DATA_DIR"):
        path = Path(env["RAGD_DATA_DIR"]).expanduser()
    elif config is not None and config.data_dir is not None:
        path = config.data_dir.expanduser()
    else:
        path = Path(platformdirs.user_data_dir(APP))
    with contextlib.suppress(
        OSError
    ):  # best effort: whoever uses the directory reports what is wrong with it
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        (path / "index").mkdir(mode=0o700, exist_ok=True)
        if (path / "index").stat().st_mode & 0o077:  # made by an older version
            (path / "index").chmod(0o700)
    return path


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the control socket lives; resolved by the protocol module so that ragctl finds the same place."""
    from ragctl.protocol import runtime_dir as resolve

    return resolve(os.environ if environ is None else environ)
