"""Polling a moment before sleeping, for the side of a one-at-a-time exchange that waits.

A synchronous send is a ping-pong: the client writes a request and waits, the server
answers and waits for the next one.  Each side that sleeps until the other's frame pays
for it twice.  Its CPU goes idle, and an idle virtual CPU halts (the machines here run with
the guest's halt polling off, ``haltpoll.guest_halt_poll_ns=0``), so waking it costs a
round trip through the hypervisor; and it comes back with caches and branch predictors
cold, which more than doubles the CPU a request costs in Python (measured: the broker's
send path takes 40-50 µs of CPU back to back and 90-100 µs after a 100-200 µs sleep).
A side that expects the other's frame within microseconds therefore polls for it (without
blocking) for up to ``window`` before it sleeps, as Linux's ``busy_read`` and
``cpuidle-haltpoll`` do for the kernel.  Measured with ``bench/peers.py``'s one-thread sync
sends (BENCHMARKS.md, issue 19): about 2.5x the sends per second, at no more CPU per send.

The cost is CPU while a wait lasts longer than the window, so the polling adapts: a wait
the window did not cover (a miss) makes the next waits sleep at once, 2**n - 1 of them
after the n-th miss in a row (at most ``MAX_SKIPPED``), and the first wait the window
covers (a hit) brings polling back for every wait.  A peer slower than the window (a LAN,
a busy server, a paced producer) costs about one window every ``MAX_SKIPPED`` + 1 waits.
A window of 0 turns polling off.
"""

from __future__ import annotations

import asyncio
import os
import time

from broker_core.errors import ConfigError

DEFAULT_BUSY_POLL_MICROS = 200
"""How long a waiting side polls before it sleeps, in µs: above a warm loopback round trip
of one request here (60-80 µs), so one covers the next."""
MAX_BUSY_POLL_MICROS = 10_000
"""The largest window accepted: more is a spinning CPU, not a wait."""
MAX_SKIPPED = 255
"""After misses in a row, the most waits that sleep at once before polling is tried again."""


yield_cpu = getattr(os, "sched_yield", lambda: None)
"""Let another runnable thread on this CPU run first: a side that polls must not hold up the
peer it waits for when the scheduler put both on one CPU (a no-op where it is missing)."""


def check_busy_poll_micros(name: str, micros: int) -> None:
    """Refuse a window outside 0..``MAX_BUSY_POLL_MICROS`` with a sentence naming ``name``
    (a ``ConfigError``, a ValueError)."""
    if not 0 <= micros <= MAX_BUSY_POLL_MICROS:
        raise ConfigError(f"{name} must be 0 (no polling) to {MAX_BUSY_POLL_MICROS} µs, not {micros}")


class BusyPoll:
    """Whether the next wait polls first, and until when: the adaptive rule above."""

    __slots__ = ("_misses", "_skip", "window")

    def __init__(self, micros: int = DEFAULT_BUSY_POLL_MICROS) -> None:
        self.window = micros / 1_000_000
        """Seconds a wait polls before it sleeps (0: never)."""
        self._misses = 0
        self._skip = 0

    def until(self, now: float) -> float:
        """When a wait that starts at ``now`` stops polling; 0.0 when it sleeps at once."""
        if self.window <= 0:
            return 0.0
        if self._skip:
            self._skip -= 1
            return 0.0
        return now + self.window

    def hit(self) -> None:
        """The awaited frame came within the window: keep polling."""
        self._misses = 0
        self._skip = 0

    def miss(self) -> None:
        """The window passed without it: sleep at once for the next few waits."""
        self._misses = misses = min(self._misses + 1, MAX_SKIPPED.bit_length())
        self._skip = min((1 << misses) - 1, MAX_SKIPPED)


class LoopBusyPoll:
    """An event loop that keeps polling its sockets for ``window`` after each read.

    The server calls ``read`` whenever a connection has received bytes.  While polling,
    a callback re-queues itself on the loop, so the loop's next wait for I/O does not
    block (uvloop and asyncio poll with no timeout when a callback is ready) and a frame
    that arrives meanwhile is read at once.  Every read extends the window; when it runs
    out with no read since the one that started it, that was a miss.
    """

    __slots__ = ("_loop", "_policy", "_polling", "_read_again", "_until")

    def __init__(self, micros: int = DEFAULT_BUSY_POLL_MICROS) -> None:
        self._policy = BusyPoll(micros)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._polling = False
        self._read_again = False
        self._until = 0.0

    @property
    def window(self) -> float:
        """Seconds the loop polls after a read (0: never)."""
        return self._policy.window

    @property
    def polling(self) -> bool:
        """Whether the loop is polling now (a read came less than a window ago)."""
        return self._polling

    def read(self, now: float) -> None:
        """Bytes were read at ``now`` (``time.monotonic()``), on the running loop."""
        if self._polling:
            self._read_again = True
            self._until = now + self._policy.window
            return
        until = self._policy.until(now)
        if not until:
            return
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._until = until
        self._read_again = False
        self._polling = True
        self._loop.call_soon(self._poll)

    def _poll(self) -> None:
        if time.monotonic() < self._until:
            assert self._loop is not None
            yield_cpu()
            self._loop.call_soon(self._poll)
            return
        self._polling = False
        if self._read_again:
            self._policy.hit()  # the reads it covered came in time; the last one's wait missed
        self._policy.miss()
