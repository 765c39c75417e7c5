"""What an install or uninstall did, for the command line to print (and the tests to read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO

from .systemd import Command, CommandResult, shell_line


@dataclass
class Report:
    done: list[str] = field(default_factory=list)  # one line per thing placed, kept or removed
    notes: list[str] = field(default_factory=list)  # what the user should know or do next
    ran: list[CommandResult] = field(default_factory=list)  # commands run, with their outcome
    to_run: list[Command] = field(default_factory=list)  # commands the user has to run
    to_run_reason: str = ""

    @property
    def failed(self) -> list[CommandResult]:
        return [r for r in self.ran if not r.ok]

    def print(self, out: TextIO) -> None:
        for line in self.done:
            print(line, file=out)
        for result in self.ran:
            status = "ok" if result.ok else f"FAILED (exit {result.returncode})"
            print(f"ran: {shell_line(result.command)}: {status}", file=out)
            if not result.ok and result.output:
                print("  " + result.output.replace("\n", "\n  "), file=out)
        if self.to_run:
            print(f"{self.to_run_reason}; run these yourself:", file=out)
            for cmd in self.to_run:
                print(f"  {shell_line(cmd)}", file=out)
        for note in self.notes:
            print(f"note: {note}", file=out)
