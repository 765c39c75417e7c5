"""`verify`: check the index against the sidecars of every root now and repair what differs (docs/protocol.md)."""

from __future__ import annotations

import time
from typing import Any

from .arguments import Args
from .runtime import Progress, Resident, no_progress

STREAM_EVERY_S = 0.5


class VerifyArgs(Args):
    pass


def verify(rt: Resident, args: VerifyArgs | None = None, progress: Progress = no_progress) -> dict[str, Any]:
    """The verification's report (index.write.verification.VerifyReport.to_json), streaming {"phase", "dirs"} meanwhile."""
    rt.ready()
    last_sent = [0.0]

    def walked(dirs: int) -> None:
        now = time.monotonic()
        if now - last_sent[0] >= STREAM_EVERY_S:
            progress({"phase": "verifying", "dirs": dirs})
            last_sent[0] = now

    return rt.verifier.run("request", walked).to_json()
