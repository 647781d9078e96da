"""What the run page draws and lists, computed from a succeeded run's tables.

Series are ``{name: [[epoch ms, value], ...]}`` for ECharts' time axes.  Charts keep the
``TOP_SERIES`` largest series (the tables and downloads keep everything), and long series
are thinned to at most ``MAX_POINTS`` buckets (largest value per bucket: a peak is never
averaged away).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from console.reports import tables

TOP_SERIES = 10
MAX_POINTS = 1500
TOP_ROWS = 10  # per topic in the top tags / producers lists
HOURLY_AFTER_MS = 2 * 86_400_000  # longer periods chart the hourly table


def _series(
    data: pa.Table, name_cols: tuple[str, ...], time_col: str, value_col: str
) -> dict[str, list[list[float]]]:
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for row in tables.as_rows(data.select([*name_cols, time_col, value_col])):
        if row[time_col] is None or row[value_col] is None:
            continue
        name = " @ ".join(str(row[c]) for c in name_cols)
        points = series[name]
        points[row[time_col]] = points.get(row[time_col], 0) + row[value_col]
    return {name: sorted([t, v] for t, v in points.items()) for name, points in series.items()}


def _top(series: dict[str, list[list[float]]], by: str = "sum") -> dict[str, list[list[float]]]:
    def weight(points: list[list[float]]) -> float:
        values = [v for _, v in points]
        return (sum(values) if by == "sum" else max(values)) if values else 0

    names = sorted(series, key=lambda n: (-weight(series[n]), n))[:TOP_SERIES]
    return {n: _thin(series[n]) for n in sorted(names)}


def _thin(points: list[list[float]]) -> list[list[float]]:
    if len(points) <= MAX_POINTS:
        return points
    step = -(-len(points) // MAX_POINTS)
    return [max(points[i : i + step], key=lambda p: p[1]) for i in range(0, len(points), step)]


def _load(run: Any, table: str) -> pa.Table | None:
    try:
        return tables.read(run.output, run.kind, table)
    except tables.TableMissing:
        return None


def traffic(run: Any) -> dict[str, Any]:
    """Messages and bytes per topic over time, consumption per group, top tags, producer
    connections and producer groups (a run from before producer groups were counted has none)."""
    hourly = run.until - run.since > HOURLY_AFTER_MS
    per_time = _load(run, "topic_hour" if hourly else "topic_minute")
    time_col = "hour" if hourly else "minute"
    charts: dict[str, Any] = {"bucket": time_col, "missing": []}
    if per_time is not None:
        charts["messages"] = _top(_series(per_time, ("topic",), time_col, "messages"))
        charts["bytes"] = _top(_series(per_time, ("topic",), time_col, "bytes"))
    else:
        charts["missing"].append("topic_hour" if hourly else "topic_minute")
    consumption = _load(run, "consumption_minute")
    charts["consumed"] = (
        _top(_series(consumption, ("group", "topic"), "minute", "consumed"))
        if consumption is not None
        else {}
    )
    for name in ("top_tags", "top_producers", "producer_groups"):
        data = _load(run, name)
        charts[name] = (
            sorted(
                (r for r in tables.as_rows(data) if (r.get("rank") or 0) <= TOP_ROWS),
                key=lambda r: (r["topic"], r["rank"]),
            )
            if data is not None
            else []
        )
    return charts


def lag(run: Any) -> dict[str, Any]:
    """Lag and seconds behind per group and topic over time, and the trend table."""
    charts: dict[str, Any] = {"missing": []}
    per_group = _load(run, "lag_group")
    if per_group is not None:
        charts["lag"] = _top(_series(per_group, ("group", "topic"), "ts", "lag"), by="max")
        charts["secondsBehind"] = _top(
            _series(per_group, ("group", "topic"), "ts", "seconds_behind"), by="max"
        )
    else:
        charts["missing"].append("lag_group")
    trend = _load(run, "lag_trend")
    charts["trend"] = (
        sorted(
            tables.as_rows(trend),
            key=lambda r: (not r.get("growing"), not r.get("stalled"), -(r.get("last_lag") or 0)),
        )
        if trend is not None
        else []
    )
    return charts


def for_run(run: Any) -> dict[str, Any]:
    """The page's chart data for a succeeded run of either kind."""
    return traffic(run) if run.kind == "traffic" else lag(run)
