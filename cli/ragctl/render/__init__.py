"""Human output of `ragctl`: pure functions from the agent's result objects (docs/protocol.md) to text.

Every function takes the result (or stream) dict as the agent sent it and returns the text to print, ending in a
newline unless it is a one-line progress display. Fields may be missing (an older or newer agent): they render as
"?" or are left out, never as an exception.

One module per verb's output (`status`, `verify`, and `verbs` for the others) over `protocol.text`, the small
pieces they share; a search's answer is `protocol.answer`, which `ragd search` prints too. This module re-exports
them.
"""

from ..protocol.answer import (
    citation,
    explained,
    labels,
    search,
    search_files,
    why,
)
from ..protocol.text import (
    MAX_REASON,
    Obj,
    bar,
    duration,
    one_line,
    plural,
    show_path,
)
from .status import (
    HEALTH_LABELS,
    MAX_FAILURES,
    STATE_ORDER,
    file_counts,
    health_lines,
    progress_line,
    status,
)
from .verbs import (
    changes,
    config_check,
    exported,
    index_stats,
    orphans,
    paused,
    rebuild_progress,
    rebuilt,
    reloaded,
    roots,
    synced,
    wait_progress,
    waited,
)
from .verify import (
    verified,
    verify_line,
    verify_progress,
)

__all__ = [
    "HEALTH_LABELS",
    "MAX_FAILURES",
    "MAX_REASON",
    "STATE_ORDER",
    "Obj",
    "bar",
    "changes",
    "citation",
    "config_check",
    "duration",
    "explained",
    "exported",
    "file_counts",
    "health_lines",
    "index_stats",
    "labels",
    "one_line",
    "orphans",
    "paused",
    "plural",
    "progress_line",
    "rebuild_progress",
    "rebuilt",
    "reloaded",
    "roots",
    "search",
    "search_files",
    "show_path",
    "status",
    "synced",
    "verified",
    "verify_line",
    "verify_progress",
    "wait_progress",
    "waited",
    "why",
]
