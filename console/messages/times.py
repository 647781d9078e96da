"""Times as the message pages and endpoints take and show them: UTC, to the millisecond.

A time arrives as epoch milliseconds (``1764127200000``) or as an ISO 8601 date-time
(``2026-11-26T03:20`` from a browser's date-time picker, read as UTC unless it names its
own offset); it is shown as ``2026-11-26 03:20:00 UTC``.
"""

from __future__ import annotations

import datetime as dt

from broker_core.errors import AdminError


def parse_time(raw: str, name: str) -> int:
    """``raw`` as epoch milliseconds; an AdminError (a 400) saying what is wrong otherwise."""
    text = raw.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1000)
    except (ValueError, OverflowError):
        raise AdminError(
            f"{name} must be a date-time such as 2026-11-26T03:20 (UTC) or epoch milliseconds, not {raw!r}"
        ) from None


def picker_value(ms: int) -> str:
    """Epoch ms as a ``datetime-local`` input's value in UTC (seconds kept)."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def epoch_text(ms: int) -> str:
    """Epoch ms as a person reads it: ``2026-11-26 03:20:00 UTC``."""
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ms} (epoch ms)"
