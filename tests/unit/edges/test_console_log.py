"""A thread ended by an exception is an error in the agent's log, with its traceback (Python's default hook printed
it to stderr with no level: journald filed it as info, and `journalctl -p err` never showed it)."""

from __future__ import annotations

import logging
import threading

import pytest

from ragd.edges.console import log_thread_death


def test_a_thread_ended_by_an_exception_is_logged_as_an_error_with_its_traceback(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threading, "excepthook", log_thread_death)

    def reader() -> None:
        raise KeyError("b'/r/d/.rag/tmp'")

    t = threading.Thread(target=reader, name="Thread-inotify")
    with caplog.at_level(logging.INFO):
        t.start()
        t.join()
    [record] = [r for r in caplog.records if "Thread-inotify" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info and record.exc_info[0] is KeyError
    assert "ended by an exception" in record.getMessage()
