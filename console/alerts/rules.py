"""The alert rules, free of Django and of brokers: live readings and offset history in,
one verdict per alert kind out.

A figure that could not be read is ``None`` and gives an UNKNOWN verdict, which neither
raises nor resolves an alert: a broker that does not answer says nothing about its lag.

"Growing" reads the offset history (console/maintenance/history.py): the group's total
lag at each snapshot over the last N minutes, then the live figure.  The lag grows when
it never decreased across those points and ended above where it started; the verdict is
UNKNOWN unless the history covers the window (a snapshot at or before its start and no
gap longer than ``slack_ms``), so a stopped offset job can neither raise nor resolve.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from console.maintenance.history import offset_rows, queue_lag

LAG = "lag"
SECONDS_BEHIND = "seconds_behind"
GROWING = "growing"
CLIENTS = "clients"
KINDS = (LAG, SECONDS_BEHIND, GROWING, CLIENTS)

BREACHED = "breached"
CLEAR = "clear"
UNKNOWN = "unknown"
OFF = "off"  # no threshold of this kind: an open alert of it is resolved


@dataclass(frozen=True)
class Thresholds:
    """A group's thresholds (``GroupMonitor``); None (0 for ``min_clients``) is off."""

    min_clients: int = 0
    max_lag: int | None = None
    max_seconds_behind: float | None = None
    growing_minutes: int | None = None

    @classmethod
    def of(cls, monitor: Any) -> Thresholds:
        return cls(monitor.min_clients, monitor.max_lag, monitor.max_seconds_behind, monitor.growing_minutes)


@dataclass(frozen=True)
class Reading:
    """A group's live figures; None where they could not be read."""

    lag: int | None
    seconds_behind: float | None
    clients: int | None


UNREAD = Reading(None, None, None)


@dataclass(frozen=True)
class Growth:
    """The lag over a window: ``growing`` None when the history does not cover it."""

    growing: bool | None
    first: int | None = None
    last: int | None = None
    points: int = 0

    @property
    def delta(self) -> int | None:
        return None if self.first is None or self.last is None else self.last - self.first


@dataclass(frozen=True)
class Verdict:
    """What one kind says now: its state, the figure behind it and the threshold."""

    kind: str
    state: str
    value: float | None
    threshold: float | None
    message: str


# -- the offset history ---------------------------------------------------------------------


def lag_series(
    history_dir: Path, cluster: str, group: str, since_ms: int, until_ms: int
) -> list[tuple[int, int]]:
    """``(ts, total lag)`` of ``group`` at each history snapshot in [since, until].

    Each broker writes its own snapshots; the total at an instant adds every broker's
    latest figure, and starts once every broker in the window has one.
    """
    per_snapshot: dict[tuple[int, str], int] = {}
    for row in offset_rows(history_dir, since_ms, until_ms, containing=orjson.dumps(group)):
        try:
            ts = int(row["ts"])
            if row.get("cluster") != cluster or row.get("group") != group or not since_ms <= ts <= until_ms:
                continue
            lag = queue_lag(row)
            broker = str(row.get("broker_addr") or row.get("broker"))
        except (KeyError, TypeError, ValueError):
            continue
        per_snapshot[(ts, broker)] = per_snapshot.get((ts, broker), 0) + lag
    brokers = {broker for _, broker in per_snapshot}
    latest: dict[str, int] = {}
    series: list[tuple[int, int]] = []
    for (ts, broker), lag in sorted(per_snapshot.items()):
        latest[broker] = lag
        if len(latest) == len(brokers):
            if series and series[-1][0] == ts:
                series[-1] = (ts, sum(latest.values()))
            else:
                series.append((ts, sum(latest.values())))
    return series


def growth(series: list[tuple[int, int]], start_ms: int, slack_ms: int) -> Growth:
    """Whether the lag in ``series`` (ending with the live point) grew over the window
    starting at ``start_ms``: never decreased, last above first.  Unknown (None) unless a
    point sits at or before the start and no two points are more than ``slack_ms`` apart."""
    points = [(ts, lag) for ts, lag in series]
    if not points or points[0][0] > start_ms:
        return Growth(None, points=len(points))
    # The window's first point is the last one at or before its start.
    first_index = max(i for i, (ts, _) in enumerate(points) if ts <= start_ms)
    window = points[first_index:]
    if any(b[0] - a[0] > slack_ms for a, b in zip(window, window[1:], strict=False)):
        return Growth(None, window[0][1], window[-1][1], len(window))
    lags = [lag for _, lag in window]
    never_down = all(b >= a for a, b in zip(lags, lags[1:], strict=False))
    return Growth(never_down and lags[-1] > lags[0], lags[0], lags[-1], len(window))


# -- the verdicts ---------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def evaluate(limits: Thresholds, reading: Reading, grown: Growth | None = None) -> list[Verdict]:
    """One verdict per kind (``KINDS`` order) for a group's thresholds and live reading;
    ``grown`` is the growth over the last ``growing_minutes`` (None: not computed)."""
    verdicts = []
    if limits.max_lag is None:
        verdicts.append(Verdict(LAG, OFF, reading.lag, None, "no lag threshold"))
    elif reading.lag is None:
        verdicts.append(Verdict(LAG, UNKNOWN, None, limits.max_lag, "lag unknown"))
    else:
        over = reading.lag > limits.max_lag
        text = f"lag {reading.lag} messages is {'above' if over else 'within'} {limits.max_lag}"
        verdicts.append(Verdict(LAG, BREACHED if over else CLEAR, reading.lag, limits.max_lag, text))

    if limits.max_seconds_behind is None:
        verdicts.append(Verdict(SECONDS_BEHIND, OFF, reading.seconds_behind, None, "no time threshold"))
    elif reading.seconds_behind is None:
        verdicts.append(Verdict(SECONDS_BEHIND, UNKNOWN, None, limits.max_seconds_behind, "time unknown"))
    else:
        behind, limit = reading.seconds_behind, limits.max_seconds_behind
        over = behind > limit
        text = f"{_fmt(behind)} s behind is {'above' if over else 'within'} {_fmt(limit)} s"
        verdicts.append(Verdict(SECONDS_BEHIND, BREACHED if over else CLEAR, behind, limit, text))

    minutes = limits.growing_minutes
    if minutes is None:
        verdicts.append(Verdict(GROWING, OFF, None, None, "no growth threshold"))
    elif reading.lag == 0:  # nothing behind cannot be growing, whatever the history says
        verdicts.append(Verdict(GROWING, CLEAR, 0, minutes, "no lag"))
    elif grown is None or grown.growing is None or reading.lag is None:
        verdicts.append(Verdict(GROWING, UNKNOWN, None, minutes, f"no history covering {minutes} min"))
    else:
        delta = grown.delta or 0
        if grown.growing:
            text = f"lag grew by {delta} messages (to {grown.last}) over {minutes} min without dropping"
        else:
            text = f"lag did not keep growing over {minutes} min (now {grown.last})"
        verdicts.append(Verdict(GROWING, BREACHED if grown.growing else CLEAR, delta, minutes, text))

    if not limits.min_clients:
        verdicts.append(Verdict(CLIENTS, OFF, reading.clients, None, "no client threshold"))
    elif reading.clients is None:
        verdicts.append(Verdict(CLIENTS, UNKNOWN, None, limits.min_clients, "clients unknown"))
    else:
        under = reading.clients < limits.min_clients
        than = "fewer than" if under else "at least"
        text = f"{reading.clients} client(s) online, {than} {limits.min_clients}"
        verdicts.append(
            Verdict(CLIENTS, BREACHED if under else CLEAR, reading.clients, limits.min_clients, text)
        )
    return verdicts


# -- replication ----------------------------------------------------------------------------

REPLICATION = "replication"


def _bytes(value: int) -> str:
    """Bytes in words: 512 B, 3.2 MiB."""
    if value < 1024:
        return f"{value} B"
    size, unit = value / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def replication(
    connected: bool,
    behind_bytes: int | None,
    behind_ms: int | None,
    max_bytes: int,
    max_ms: int,
    down_why: str = "",
) -> Verdict:
    """A slave's verdict: breached when its HA link is down (``down_why`` says why, if known)
    or it is behind its master by more than ``max_bytes`` or ``max_ms`` (0: that limit is
    off); unknown when it is connected but the figures a limit needs could not be read.
    The value is the bytes behind (0 when unknown), the threshold ``max_bytes``."""
    value = behind_bytes if behind_bytes is not None else 0
    if not connected:
        text = "disconnected from its master" + (f" ({down_why})" if down_why else "")
        return Verdict(REPLICATION, BREACHED, value, max_bytes, text)
    over = []
    if max_bytes and behind_bytes is not None and behind_bytes > max_bytes:
        over.append(f"{_bytes(behind_bytes)} behind, above {_bytes(max_bytes)}")
    if max_ms and behind_ms is not None and behind_ms > max_ms:
        over.append(f"{_fmt(behind_ms / 1000)} s behind, above {_fmt(max_ms / 1000)} s")
    if over:
        return Verdict(REPLICATION, BREACHED, value, max_bytes, "; ".join(over))
    if (max_bytes and behind_bytes is None) or (max_ms and behind_ms is None):
        return Verdict(REPLICATION, UNKNOWN, None, max_bytes, "connected, how far behind unknown")
    words = _bytes(behind_bytes) if behind_bytes is not None else "?"
    if behind_ms is not None:
        words += f", {_fmt(behind_ms / 1000)} s"
    return Verdict(REPLICATION, CLEAR, value, max_bytes, f"connected, {words} behind: within the limits")
