"""Argument values as mqadmin accepts them: timestamps and booleans.

Pure functions (the clock is passed in), so they are unit-tested without a process.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

TIMESTAMP_FORMATS = 'epoch milliseconds, "now" or yyyy-MM-dd#HH:mm:ss:SSS'
"""What ``parse_timestamp`` accepts, for help and error texts."""

_EPOCH_MS = re.compile(r"-?\d+")
_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})")


def parse_timestamp(text: str, now_ms: Callable[[], int]) -> int:
    """``text`` as epoch milliseconds.

    Accepts a number of milliseconds (``-1``: to the end of the queue, for offset resets),
    ``now``, or mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time.

    Raises:
        ValueError: anything else, or a date that does not exist; the text says which
            formats are accepted.
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms()
    if _EPOCH_MS.fullmatch(value):
        return int(value)
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        raise ValueError(f"{text!r} is not a time: use {TIMESTAMP_FORMATS}")
    year, month, day, hour, minute, second, millis = (int(part) for part in match.groups())
    try:
        moment = datetime(year, month, day, hour, minute, second, millis * 1000)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid date and time: {exc}") from None
    return _local_ms(moment)


def _local_ms(moment: datetime) -> int:
    """Epoch milliseconds of a naive local ``datetime`` (exact, no float rounding)."""
    seconds = int(moment.replace(microsecond=0).timestamp())
    return seconds * 1000 + moment.microsecond // 1000


def format_timestamp(ms: int) -> str:
    """Epoch milliseconds as local ``yyyy-MM-dd HH:mm:ss,SSS``; ``-`` for 0 or less (never)."""
    if ms <= 0:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


def parse_bool(text: str) -> bool:
    """``true``/``false`` (any case; also 1/0, yes/no).  Raises ValueError for anything else."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(f"{text!r} is not a boolean: use true or false")
