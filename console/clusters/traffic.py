"""Traffic over a day from the offset history's counters (what the Celery job records every
few seconds): messages put per minute, per broker or per topic, for the dashboard's charts.

Counters run from each broker's boot; a new ``boot_timestamp`` starts a new series, so a
restart is never read as negative traffic.  A series' first row of the day counts what came
before it that day (``history.counter_baseline``): a topic whose first burst came before the
platform's first snapshot is counted, in the minute of that snapshot.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from console.maintenance.history import counter_baseline


def _rows(history_dir: Path, day: dt.date, containing: bytes | None = None) -> list[dict[str, Any]]:
    """The day's counter rows; only lines holding ``containing`` when it is given (a cheap
    filter before JSON)."""
    rows = []
    for path in sorted((history_dir / "counters" / f"date={day.isoformat()}").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if containing is not None and containing not in line:
                continue
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue  # a torn last line after a crash
    return rows


@dataclass(frozen=True, slots=True)
class TrafficDay:
    """Messages put per minute over one day, and when the last snapshot of it was taken."""

    series: dict[str, list[list[int]]]  # {series: [[minute_ms, messages], ...]}
    as_of_ms: int | None  # the newest snapshot read, None when the day has none for the cluster

    def totals(self) -> dict[str, int]:
        """Messages per series over the day."""
        return {name: sum(n for _, n in points) for name, points in self.series.items()}

    def top(self, n: int = 10) -> list[tuple[str, int]]:
        """The ``n`` series with the most messages, most first (ties by name)."""
        return sorted(self.totals().items(), key=lambda item: (-item[1], item[0]))[:n]


def puts_day(
    history_dir: Path, day: dt.date, *, cluster: str, topic: str | None = None, by: str = "broker"
) -> TrafficDay:
    """Messages put per minute on ``day``: one series per broker (``by="broker"``) or per
    topic (``by="topic"``), counting puts of ``topic`` only when it is given."""
    last: dict[tuple[str, str, int], int] = {}
    minutes: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    as_of: int | None = None
    containing = orjson.dumps({"topic": topic})[1:-1] if topic else None  # b'"topic":"Orders"'
    for row in sorted(_rows(history_dir, day, containing), key=lambda r: r["ts"]):
        if row.get("kind") != "put" or row.get("cluster") != cluster:
            continue
        as_of = row["ts"]
        if topic and row.get("topic") != topic:
            continue
        key = (row["broker_addr"], row["topic"], row.get("boot_timestamp", 0))
        previous = last[key] if key in last else counter_baseline(row, day)
        last[key] = row["total"]
        if previous is None or row["total"] <= previous:
            continue
        series = row["broker"] if by == "broker" else row["topic"]
        minutes[series][row["ts"] // 60_000 * 60_000] += row["total"] - previous
    series = {name: sorted([m, n] for m, n in points.items()) for name, points in sorted(minutes.items())}
    return TrafficDay(series, as_of)


def topic_today(history_dir: Path, cluster: str, topic: str) -> dict[str, int | None]:
    """``{"messages": n, "asOf": ms}``: what ``topic`` stored today (UTC) by the counters, as
    the dashboard's busiest-topics table counts it."""
    today = dt.datetime.now(dt.UTC).date()
    day = puts_day(history_dir, today, cluster=cluster, topic=topic, by="topic")
    return {"messages": day.totals().get(topic, 0), "asOf": day.as_of_ms}
