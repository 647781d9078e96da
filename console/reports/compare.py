"""Compare two succeeded runs of the same kind: headline figures side by side with their
deltas, and what changed per topic (traffic) or per group and topic (both kinds).

Run ``a`` is the baseline, ``b`` the one compared with it: a delta is ``b - a`` and a change
in percent is relative to ``a`` (None when ``a`` is 0).
"""

from __future__ import annotations

from typing import Any

from console.reports import tables
from console.reports.models import ReportRun

FIGURES = {
    ReportRun.TRAFFIC: (
        "messages",
        "bytes",
        "producers",
        "producerGroups",
        "consumed",
        "retryMessages",
        "dlqMessages",
        "retryShare",
        "dlqShare",
    ),
    ReportRun.LAG: ("groups",),
}
COMMON = ("inputRows", "inputBytes", "durationSeconds")


class NotComparable(ValueError):
    """The runs cannot be compared (the message says why)."""


def _delta(a: Any, b: Any) -> dict[str, Any]:
    if not (isinstance(a, int | float) and isinstance(b, int | float)):
        return {"a": a, "b": b, "delta": None, "percent": None}
    delta: float = b - a
    percent = round(100.0 * delta / a, 2) if a else None
    if isinstance(delta, float):
        delta = round(delta, 6)
    return {"a": a, "b": b, "delta": delta, "percent": percent}


def _figures(kind: str, sa: dict[str, Any], sb: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [{"figure": f, **_delta(sa.get(f), sb.get(f))} for f in (*FIGURES[kind], *COMMON)]
    if kind == ReportRun.LAG:
        for key in ("growing", "stalled"):
            rows.append({"figure": key, **_delta(len(sa.get(key) or []), len(sb.get(key) or []))})
    return rows


def _keyed(
    run: ReportRun, table: str, keys: tuple[str, ...], values: tuple[str, ...]
) -> dict[tuple, dict[str, Any]]:
    try:
        data = tables.read(run.output, run.kind, table)
    except tables.TableMissing:
        return {}
    return tables.column_sums(data, keys, values)


def _differences(
    a: dict[tuple, dict[str, Any]],
    b: dict[tuple, dict[str, Any]],
    keys: tuple[str, ...],
    values: tuple[str, ...],
) -> list[dict[str, Any]]:
    rows = []
    for key in sorted(set(a) | set(b), key=lambda k: tuple(str(x) for x in k)):
        row: dict[str, Any] = dict(zip(keys, key, strict=True))
        for value in values:
            row[value] = _delta(a.get(key, {}).get(value, 0), b.get(key, {}).get(value, 0))
        rows.append(row)
    first = values[0]
    return sorted(rows, key=lambda r: -abs(r[first]["delta"] or 0))


def _trend(run: ReportRun) -> dict[tuple, dict[str, Any]]:
    try:
        data = tables.read(run.output, run.kind, "lag_trend")
    except tables.TableMissing:
        return {}
    return {(r["group"], r["topic"]): r for r in tables.as_rows(data)}


def compare(a: ReportRun, b: ReportRun) -> dict[str, Any]:
    """The comparison of ``b`` against ``a`` (NotComparable when it makes no sense)."""
    if a.kind != b.kind:
        raise NotComparable(f"a {a.kind} report cannot be compared with a {b.kind} report")
    if a.cluster != b.cluster:
        raise NotComparable("both runs must be of the same cluster")
    for run in (a, b):
        if run.status != ReportRun.SUCCEEDED or not run.summary:
            raise NotComparable(f"run {run.id} has not succeeded ({run.status})")
    result: dict[str, Any] = {
        "kind": a.kind,
        "a": a.to_json(),
        "b": b.to_json(),
        "figures": _figures(a.kind, a.summary, b.summary),
    }
    if a.kind == ReportRun.TRAFFIC:
        keys, values = ("topic",), ("messages", "bytes")
        result["topics"] = _differences(
            _keyed(a, "topic_hour", keys, values), _keyed(b, "topic_hour", keys, values), keys, values
        )
        gkeys, gvalues = ("group", "topic"), ("consumed",)
        result["groups"] = _differences(
            _keyed(a, "consumption_minute", gkeys, gvalues),
            _keyed(b, "consumption_minute", gkeys, gvalues),
            gkeys,
            gvalues,
        )
    else:
        ta, tb = _trend(a), _trend(b)
        rows = []
        for key in sorted(set(ta) | set(tb)):
            ra, rb = ta.get(key, {}), tb.get(key, {})
            rows.append(
                {
                    "group": key[0],
                    "topic": key[1],
                    **{
                        col: _delta(ra.get(col), rb.get(col))
                        for col in ("last_lag", "max_lag", "max_seconds_behind", "drain_seconds")
                    },
                    "growing": {"a": ra.get("growing"), "b": rb.get("growing")},
                    "stalled": {"a": ra.get("stalled"), "b": rb.get("stalled")},
                }
            )
        result["groups"] = sorted(rows, key=lambda r: -abs(r["max_lag"]["delta"] or 0))
    return result
