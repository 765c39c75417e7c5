"""The control server on a real unix socket: idle connections are closed, busy ones are not."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from ragctl import protocol as p
from ragd import access
from ragd.edges.control import ControlServer, Stream
from ragd.resident.instance import bind_control_socket


def _slow(args: dict[str, Any], stream: Stream) -> Any:
    for i in range(4):
        stream.send({"tick": i})
        time.sleep(0.2)
    return {"done": True}


def test_an_idle_connection_is_closed_and_a_streaming_one_is_not(tmp_path: Path) -> None:
    path = tmp_path / "run" / "ragd.sock"
    server = ControlServer(bind_control_socket(path), {"hello": lambda a, s: {"hi": 1}, "slow": _slow},
                           lambda conn: access.agent(), idle_timeout=0.4)  # fmt: skip
    server.start()
    try:
        idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        idle.connect(str(path))
        idle.settimeout(10)
        assert idle.recv(1) == b""  # the server closed it: nothing was asked within the idle timeout
        idle.close()
        with p.Client(path, timeout=10) as c:  # a reply streamed for longer than the idle timeout is not idle
            ticks: list[Any] = []
            assert c.call("slow", on_stream=ticks.append) == {"done": True}
            assert len(ticks) == 4
            assert c.call("hello") == {"hi": 1}
    finally:
        server.close()
