"""MCP prompts: ready-made requests a client shows its user (a slash command, a menu entry).

search_documents(topic)          search my documents for a topic and answer with citations
summarise_changes(hours=24)      what changed in my documents lately (the changes are in the prompt)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from ..errors import RagdError
from ..vocabulary import ChangeKind
from . import tools

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

MAX_LISTED = 200


def add_prompts(server: MCPServer, get_rt: Callable[[], Resident]) -> None:
    @server.prompt(title="Search my documents")
    def search_documents(
        topic: Annotated[str, Field(description="what to look for (a question, words, a phrase)")],
    ) -> str:
        """Search the user's documents for a topic and answer from them, citing each source."""
        return (
            f"Search my documents for: {topic}\n\n"
            'Use the ragd `search` tool (try a second wording, or mode "keyword" for names and codes, if the '
            "first results are thin), read around the best hits with `read_chunk` (neighbors) or "
            "`read_document`, then answer from what you read. Cite every claim with the file path and the "
            "line range (or page) it comes from, and say so plainly if my documents do not answer it."
        )

    @server.prompt(title="Summarise what changed")
    def summarise_changes(
        hours: Annotated[int, Field(ge=1, le=24 * 366, description="how far back, in hours")] = 24,
    ) -> str:
        """Summarise what changed in the user's documents in the last hours (today, by default)."""
        try:
            found = tools.recent_changes(get_rt(), float(hours), None, MAX_LISTED)
        except RagdError as err:
            return f"Tell me that ragd could not list the recent changes: {err}"
        return changes_prompt(found, hours)


def changes_prompt(found: dict[str, Any], hours: int) -> str:
    """The request to summarise `found` (the tool recent_changes' answer): documents indexed, failed or removed
    one per line; skipped files (unsupported types, too big, ...) only counted."""
    period = "hour" if hours == 1 else f"{hours} hours"
    listed = [c for c in found["changes"] if c["change"] != ChangeKind.SKIPPED]
    skipped = len(found["changes"]) - len(listed)
    if not found["changes"]:
        return (f"ragd recorded no change to my documents in the last {period}. Tell me so in one "
                f"sentence.")  # fmt: skip
    lines = [f"- {c['change']}: {c['path']}" + (f" (was {c['old_path']})" if c.get("old_path") else "")
             + (f" ({c['reason']})" if c["reason"] else "") for c in listed]  # fmt: skip
    if skipped:
        lines.append(
            f"- and {skipped} file{'' if skipped == 1 else 's'} skipped (not indexable: see `recent_changes`)"
        )
    more = "\n(more changes than these; call `recent_changes` for the rest)" if found["truncated"] else ""
    return (
        f"Summarise what changed in my documents in the last {period}. ragd recorded these changes "
        f"(newest first):\n" + "\n".join(lines) + more + "\n\n"
        "Read the changed documents that matter with the ragd `read_document` tool, then give me a short "
        "summary per document (what is new or different), and list the files that failed to index with "
        "their reason."
    )
