"""Stand in for systemd's notify socket: record every sd_notify datagram the agent sends, one per line.

    python packaging/smoke/notify_listen.py SOCKET OUT   # runs until killed; dist_test.sh reads OUT
The agent under test gets NOTIFY_SOCKET=SOCKET and WATCHDOG_USEC, as Type=notify + WatchdogSec= give it.
"""

from __future__ import annotations

import socket
import sys


def main() -> None:
    path, out = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    with open(out, "a", encoding="utf-8") as f:
        print("listening", file=f, flush=True)
        while True:
            data = sock.recv(65536)
            print(data.decode("utf-8", "replace").replace("\n", " | "), file=f, flush=True)


if __name__ == "__main__":
    main()
