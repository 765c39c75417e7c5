"""Domain errors: one base class with a code, a message and a hint.

Domain code raises these; each boundary (CLI, control server, MCP, per-file job) translates them exactly once.
"""

from __future__ import annotations

SHUTDOWN = (
    "shutdown"  # the code of the error a caller gets when a stage (the embedder, the parse workers) is closed
)
# under it: the agent is stopping, and the file is redone at the next start


class RagdError(Exception):
    """Base of every error ragd reports to a person or a client."""

    code = "error"

    def __init__(self, message: str, hint: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def __reduce__(self) -> tuple[object, ...]:  # whole across processes (a parse worker raises them)
        return (type(self), (self.message, self.hint), self.__dict__)

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


class ConfigError(RagdError):
    code = "config"


class FileSkipped(RagdError):
    """The file is deliberately not indexed (unsupported type, too large, empty, ignored)."""

    code = "skipped"


class ParseError(RagdError):
    """The file could not be turned into text (corrupt, encrypted, binary junk, converter failure)."""

    code = "parse"


class EmbedError(RagdError):
    """The embedder failed for good (after its retries)."""

    code = "embed"


class EmbedUnavailable(EmbedError):
    """The embedder did not answer, or only with errors that waiting may heal (timeouts, refused connections, 5xx,
    429), through all its retries: the embed queue holds it down for a while (pipeline/embed/queue.py)."""


class EmbedRateLimited(EmbedUnavailable):
    """The embeddings API answered 429 (too many requests) to the last of the retries: it works, but not this fast.
    Told by the status, not by the text (an address or a message may hold "429" by chance)."""


class StorageError(RagdError):
    """A sidecar or mushroom could not be read or written; `errno`: the OS error's, when one caused it."""

    code = "storage"

    def __init__(
        self, message: str, hint: str = "", *, code: str | None = None, errno: int | None = None
    ) -> None:
        super().__init__(message, hint, code=code)
        self.errno = errno


class IndexError_(RagdError):
    """The vector index failed or is held by another process."""

    code = "index"


class IndexBusy(IndexError_):
    code = "index_busy"


class IndexUnavailable(IndexError_):
    """A remote index (a Milvus server or cluster) cannot be reached now: a normal state, retried, never a reason to
    rebuild anything."""

    code = "index_unavailable"
