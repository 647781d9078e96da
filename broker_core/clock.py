"""The wall clock every broker_core component defaults to (epoch milliseconds).

Components take a ``clock_ms`` callable so tests can move time by hand; this is what they
get otherwise.
"""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    """Now, in milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
