"""Traffic over a day from the offset history's counters (what the Celery job records every
few seconds): messages put per minute, per broker or per topic, for the dashboard's charts.

Counters run from each broker's boot; a new ``boot_timestamp`` starts a new series, so a
restart is never read as negative traffic.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson


def _rows(history_dir: Path, day: dt.date) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((history_dir / "counters" / f"date={day.isoformat()}").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue  # a torn last line after a crash
    return rows


def puts_per_minute(
    history_dir: Path, day: dt.date, *, cluster: str, topic: str | None = None, by: str = "broker"
) -> dict[str, list[list[int]]]:
    """``{series: [[minute_ms, messages], ...]}``, one series per broker (``by="broker"``) or
    per topic (``by="topic"``), counting puts of ``topic`` only when it is given."""
    last: dict[tuple[str, str, int], int] = {}
    minutes: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for row in sorted(_rows(history_dir, day), key=lambda r: r["ts"]):
        if row.get("kind") != "put" or row.get("cluster") != cluster or (topic and row.get("topic") != topic):
            continue
        key = (row["broker_addr"], row["topic"], row.get("boot_timestamp", 0))
        previous = last.get(key)
        last[key] = row["total"]
        if previous is None or row["total"] < previous:
            continue
        series = row["broker"] if by == "broker" else row["topic"]
        minutes[series][row["ts"] // 60_000 * 60_000] += row["total"] - previous
    return {name: sorted([m, n] for m, n in points.items()) for name, points in sorted(minutes.items())}
