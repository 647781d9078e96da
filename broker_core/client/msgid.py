"""Client message ids (``UNIQ_KEY``), in RocketMQ's layout, so tools can read them back.

An id is 16 bytes as 32 upper-case hex characters (28 bytes with an IPv6 address): the
client's IPv4 address (4), its process id (2), a per-process random number (4, where
Java puts its class loader's hash), the milliseconds since the start of the current
month (4) and a counter (2).  The brokers index messages by it (query by unique key),
and RocketMQ's tools derive the client address and a send time from it.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import struct
import threading
import time
from datetime import datetime

_FIXED = struct.Struct(">HI")  # pid, random
_VARIABLE = struct.Struct(">IH")  # ms since month start (as a 32-bit int, wrapping), counter


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Local-time start of the month holding ``now_ms`` and of the next one, in epoch ms."""
    now = datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


class UniqueIdGenerator:
    """Makes ``UNIQ_KEY`` ids for one process; thread-safe."""

    def __init__(self, client_ip: str = "127.0.0.1", *, pid: int | None = None) -> None:
        try:
            ip = ipaddress.ip_address(client_ip).packed
        except ValueError:
            ip = random.getrandbits(32).to_bytes(4, "big")  # RocketMQ fakes one too
        pid = os.getpid() if pid is None else pid
        self._prefix = ip + _FIXED.pack(pid & 0xFFFF, random.getrandbits(32))
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start_ms, self._next_start_ms = _month_start_ms(time.time_ns() // 1_000_000)

    def next_id(self, now_ms: int | None = None) -> str:
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        with self._lock:
            if now_ms >= self._next_start_ms or now_ms < self._start_ms:
                self._start_ms, self._next_start_ms = _month_start_ms(now_ms)
            # Java casts to int: past 24.8 days the value wraps, and tools read it so.
            diff = (now_ms - self._start_ms) & 0xFFFFFFFF
            counter = next(self._counter) & 0xFFFF
        return (self._prefix + _VARIABLE.pack(diff, counter)).hex().upper()

    def next_ids(self, count: int, now_ms: int | None = None) -> list[str]:
        """``count`` ids at once (a batch's messages): one clock read, one lock."""
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        with self._lock:
            if now_ms >= self._next_start_ms or now_ms < self._start_ms:
                self._start_ms, self._next_start_ms = _month_start_ms(now_ms)
            diff = (now_ms - self._start_ms) & 0xFFFFFFFF
            counters = [next(self._counter) & 0xFFFF for _ in range(count)]
        prefix, pack = self._prefix, _VARIABLE.pack
        return [(prefix + pack(diff, c)).hex().upper() for c in counters]


def client_ip_of(unique_id: str) -> str:
    """The sending client's address recorded in a ``UNIQ_KEY``."""
    raw = bytes.fromhex(unique_id)
    return str(ipaddress.ip_address(raw[:16] if len(raw) == 28 else raw[:4]))


def pid_of(unique_id: str) -> int:
    raw = bytes.fromhex(unique_id)
    return int.from_bytes(raw[-12:-10], "big")
