"""The frames of an HA link, as RocketMQ 4.x lays them out (big-endian).

- Slave to master, a *report*: 8 bytes, the commit-log offset the slave holds (the end of
  its log).  The first report says where to start; every later one acknowledges what has
  arrived.
- Master to slave, a *transfer*: 12 bytes of header, the commit-log offset of the chunk
  (8) and its length (4), then that many bytes of the log.  A length of 0 is a heartbeat.
"""

from __future__ import annotations

import socket
import struct

REPORT = struct.Struct(">q")
TRANSFER_HEADER = struct.Struct(">qi")
# The most a master may send in one frame: a slave refuses a longer one as garbage.
MAX_TRANSFER = 64 * 1024 * 1024


class LinkClosed(ConnectionError):
    """The peer closed the link (or it broke) in the middle of a frame."""


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``sock``; raise ``LinkClosed`` when the link ends first.

    A socket timeout before the first byte is raised (the caller has heard nothing); once
    part of the frame has arrived the rest is waited for, so a frame is never cut in two.
    """
    got = 0
    size = len(view)
    while got < size:
        try:
            n = sock.recv_into(view[got:], size - got)
        except TimeoutError:
            if got == 0:
                raise
            continue
        if n == 0:
            raise LinkClosed("the peer closed the link")
        got += n


def parse_addr(addr: str) -> tuple[str, int]:
    """("host", port) of "host:port"."""
    host, _, port = addr.rpartition(":")
    return host, int(port)
