"""`read_document`'s text: where it comes from, and the line window a client asked for.

Line numbers are those of search results (`start_line`/`end_line`): lines of the text the parser produced.
- Text formats (.md .markdown .txt .text .rst .org .json .yaml .yml .toml .log): the file itself, decoded exactly
  as the parser decodes it (byte-order mark, UTF-8, else the detected charset; newlines normalised). That is the
  indexed text when the index is current, and the current text when the file changed since (never stale).
- Other formats (PDF, Office, HTML, ...): rebuilt from the chunks in the file's `.ragjson` sidecar, placed at their
  recorded offsets (`start_index`), so overlapping chunks are not repeated and line numbers match. Whitespace the
  splitter dropped between two chunks comes back as spaces and then newlines (as many as the line numbers
  require).
  Sidecars written by the ragjson tool carry no offsets: their chunks are joined without their `overlap_size`.
  Nothing is parsed on the thread that answers: converting a PDF or a .docx again could take seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragctl import protocol as p

from ..errors import RagdError
from ..pipeline import sidecar
from ..pipeline.parse import TEXT_EXTENSIONS
from ..pipeline.parse.text import decode, normalise_newlines

MAX_DOCUMENT_CHARS = 100_000  # one answer; a longer document is read in line windows


def read_document_text(path: Path, max_size: int) -> tuple[str, str]:
    """(text, source) of the document at `path`; source is "file" or "index"."""
    if path.is_dir():
        raise RagdError(f"{path} is a directory", f"list it with the resource ragd://dir{path}",
                        code=p.BAD_REQUEST)  # fmt: skip
    if path.suffix.lower() in TEXT_EXTENSIONS:
        return _file_text(path, max_size), "file"
    return _indexed_text(path), "index"


def _file_text(path: Path, max_size: int) -> str:
    try:
        size = path.stat().st_size
        if size > max_size:
            raise RagdError(f"{path} is too large to read ({size} bytes)",
                            "raise limits.max_file_size, or search it", code=p.FAILED)  # fmt: skip
        data = path.read_bytes()
    except FileNotFoundError:
        raise RagdError(f"{path} does not exist", "search again: the file may have moved",
                        code=p.NOT_FOUND) from None  # fmt: skip
    except OSError as err:
        raise RagdError(f"cannot read {path}: {err.strerror or err}", "check its permissions",
                        code=p.FAILED) from None  # fmt: skip
    return normalise_newlines(decode(data).text)  # ParseError (binary content) is a RagdError


def _indexed_text(path: Path) -> str:
    entry = sidecar.try_read(sidecar.entry_path(path.parent, path.name))
    if entry is None or not entry.chunks:
        hint = "it is not indexed yet (see `ragctl status`)" if path.is_file() else "it does not exist"
        raise RagdError(f"{path} has no indexed text", hint, code=p.NOT_FOUND)
    return assemble(entry.chunks)


def assemble(chunks: Sequence[sidecar.StoredChunk]) -> str:
    """The document's text rebuilt from its chunks (see the module docstring)."""
    out: list[str] = []
    length, line = 0, 1  # characters so far, and the line number the next character is on
    for c in chunks:
        start = c.meta.get("start_index")
        if not isinstance(start, int):
            piece = c.content[c.overlap_size :] if out else c.content
        elif start >= length:
            gap = start - length
            want = c.meta.get("start_line")
            newlines = min(gap, max(0, want - line)) if isinstance(want, int) else 0
            piece = (
                " " * (gap - newlines) + "\n" * newlines + c.content
            )  # never indents the chunk's first line
        else:
            piece = c.content[length - start :]
        out.append(piece)
        length += len(piece)
        line += piece.count("\n")
    return "".join(out)


def select_lines(text: str, start_line: int | None, end_line: int | None) -> dict[str, Any]:
    """Lines `start_line`..`end_line` (1-based, inclusive) of `text`, at most MAX_DOCUMENT_CHARS of them."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    total = len(lines)
    first = 1 if start_line is None else start_line
    last = total if end_line is None else min(end_line, total)
    if first < 1 or first > total:
        raise RagdError(f"start_line {first} is out of range: the document has {total} line(s)",
                        "lines are numbered from 1", code=p.BAD_REQUEST)  # fmt: skip
    if last < first:
        raise RagdError(f"end_line {end_line} is before start_line {first}", code=p.BAD_REQUEST)
    chosen: list[str] = []
    size = 0
    for n in range(first, last + 1):
        line = lines[n - 1]
        if size + len(line) > MAX_DOCUMENT_CHARS:
            if not chosen:
                chosen.append(line[:MAX_DOCUMENT_CHARS])  # one huge line: its beginning
            break
        chosen.append(line)
        size += len(line) + 1
    end = first + len(chosen) - 1
    truncated = end < last or len(chosen[-1]) < len(lines[end - 1])
    return {"text": "\n".join(chosen), "start_line": first, "end_line": end, "total_lines": total,
            "truncated": truncated, "next_start_line": end + 1 if end < last else None}  # fmt: skip
