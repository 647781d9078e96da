"""How a report's figures are shown: times, numbers, labels, and the pages of its tables.

One home for the representation: a report's times travel as epoch milliseconds (the
summary's ``peakMinute``, the table rows' JSON, the run's period) and are shown here as
UTC date-times (``2026-11-26 03:39 UTC``); counts get thousands separators and fractions a
few significant decimals (``35.7``, ``0.052``).  The templates reach these through the
``report_format`` filters; the run page's table of rows is built by ``table_view`` (cells
already formatted, each with the raw value to sort by, the paging sentence, the sortable
headers and their links).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from console.reports.tables import ColumnType

# What a column holds, said the way a person reads it (the data keeps its names; these
# say what the figures count: a producer here is a connection, ip:port, not a group).
COLUMN_LABELS = {
    "producers": "producer connections",
    "producer": "producer connection (born host)",
    "avg_size": "average size (bytes)",
    "max_size": "largest size (bytes)",
    "bytes": "bytes",
    "ts": "time",
    "queue_id": "queue",
    "consumer_offset": "consumer offset",
    "broker_offset": "broker offset",
    "seconds_behind": "seconds behind",
    "consume_rate": "consumed / s",
    "produce_rate": "produced / s",
    "drain_seconds": "drain estimate (s)",
    "first_lag": "first lag",
    "last_lag": "last lag",
    "max_lag": "max lag",
    "max_seconds_behind": "max seconds behind",
    "lag_slope_per_minute": "lag slope / min",
}
# The headline figures of a summary, as the comparison names them.
FIGURE_LABELS = {
    "messages": "messages",
    "bytes": "bytes",
    "producers": "producer connections",
    "producerGroups": "producer groups",
    "consumed": "messages consumed",
    "retryMessages": "retried messages",
    "dlqMessages": "dead-lettered messages",
    "retryShare": "retry share (of all messages)",
    "dlqShare": "DLQ share (of all messages)",
    "groups": "group / topic pairs",
    "growing": "pairs with growing lag",
    "stalled": "stalled pairs",
    "inputRows": "rows read",
    "inputBytes": "bytes read",
    "durationSeconds": "took (s)",
}
# A table opens sorted by its busiest figure, largest first: the first of these it has.
BUSIEST = ("messages", "consumed", "last_lag", "lag")


def as_epoch_ms(value: Any) -> int | None:
    """A report time as epoch ms, whatever it came as: epoch ms, a datetime, or an ISO 8601
    string (runs recorded before summaries carried epoch ms); None when it is none of them."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value) if value > 0 and math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return round(moment.timestamp() * 1000)
    if isinstance(value, str) and value:
        try:
            return as_epoch_ms(dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def format_time(value: Any) -> str:
    """A report time as a UTC date-time: to the minute when it is a whole minute (the
    reports' buckets), else to the second (a period's ends, history snapshots); '' when
    there is none."""
    ms = as_epoch_ms(value)
    if ms is None:
        return ""
    moment = dt.datetime.fromtimestamp(ms // 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC" if ms % 60_000 == 0 else "%Y-%m-%d %H:%M:%S UTC")


def format_number(value: Any) -> str:
    """A figure with thousands separators: whole numbers as they are (``12,345``), fractions
    to three significant digits but at most one decimal from 10 up (``35.7``, ``1.25``,
    ``0.052``, ``1,234``); '' for none, the text itself for what is not a number."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) >= 10:
            return f"{int(value):,}"
        size = abs(value)
        decimals = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
        text = f"{value:,.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value)


def format_percent(share: Any) -> str:
    """A share (0..1) as a percentage with a sensible number of decimals (``2.4 %``)."""
    if not isinstance(share, int | float) or isinstance(share, bool):
        return ""
    return f"{format_number(float(share) * 100)} %"


def column_label(name: str) -> str:
    """The header a person reads for a column of a report table."""
    return COLUMN_LABELS.get(name, name.replace("_", " "))


def figure_label(name: str) -> str:
    """The name a person reads for a summary figure (``producers``: producer connections)."""
    return FIGURE_LABELS.get(name, name)


def paging_text(offset: int, shown: int, count: int) -> str:
    """Where a page sits in its table: ``rows 1–19 of 19``; ``no rows`` for an empty table,
    and a sentence for a page past the end."""
    if count == 0:
        return "no rows"
    if shown == 0:
        return f"no rows here: the table has {format_number(count)} (go back to the first page)"
    return f"rows {format_number(offset + 1)}–{format_number(offset + shown)} of {format_number(count)}"


def default_sort(columns: list[str]) -> tuple[str | None, bool]:
    """The column a table opens sorted by and whether descending: its busiest figure first
    (``messages``, ``consumed``, ``last_lag``, ``lag``); file order when it has none."""
    for name in BUSIEST:
        if name in columns:
            return name, True
    return None, False


def first_direction_descending(kind: ColumnType) -> bool:
    """A first click on a header sorts figures and times largest/newest first, text A to Z."""
    return kind in ("int", "float", "time")


@dataclass(frozen=True)
class Cell:
    """One value of a table as shown: its text, the raw value to sort by, its full text
    (a cell's title, for long names), and how it is aligned (``num``, ``time``, ``name``)."""

    text: str
    sort: str
    title: str
    css: str


@dataclass(frozen=True)
class Header:
    """One column's header: its label, ``aria-sort`` (``ascending`` / ``descending`` /
    ``none``) and the link that sorts by it (the other way round when it is the sort)."""

    name: str
    label: str
    kind: ColumnType
    aria_sort: str
    href: str


def cell(value: Any, kind: ColumnType) -> Cell:
    """A value formatted for its column's type."""
    if value is None:
        return Cell("", "", "", "num" if kind in ("int", "float") else kind)
    if kind == "time":
        ms = as_epoch_ms(value)
        text = format_time(value)
        return Cell(text, str(ms if ms is not None else ""), text, "time")
    if kind in ("int", "float"):
        return Cell(format_number(value), repr(value), str(value), "num")
    if kind == "bool":
        return Cell("yes" if value else "no", "1" if value else "0", "", "bool")
    text = str(value)
    return Cell(text, text, text, "name")


def sort_links(
    base: dict[str, str], columns: list[str], types: dict[str, ColumnType], sort: str | None, descending: bool
) -> list[Header]:
    """The headers of a page sorted by ``sort``: each links to the page sorted by its column
    (from the first row), the sorted one to the other direction."""
    headers = []
    for name in columns:
        kind = types.get(name, "text")
        if name == sort:
            aria, next_descending = ("descending" if descending else "ascending"), not descending
        else:
            aria, next_descending = "none", first_direction_descending(kind)
        query = {**base, "sort": name, "order": "desc" if next_descending else "asc"}
        headers.append(Header(name, column_label(name), kind, aria, "?" + urlencode(query)))
    return headers


def parse_sort(columns: list[str], sort: str | None, order: str | None) -> tuple[str | None, bool]:
    """The sort a page asks for (``?sort=<column>&order=asc|desc``), else the table's
    default; an unknown column falls back to the default too."""
    if sort and sort in columns:
        return sort, order != "asc"
    return default_sort(columns)


def table_view(page: dict[str, Any], base: dict[str, str]) -> dict[str, Any]:
    """The run page's table of rows from ``tables.page``'s answer: headers with their sort
    links, formatted cells and the paging sentence."""
    columns: list[str] = page["columns"]
    types: dict[str, ColumnType] = page["types"]
    sorted_by = page.get("sort") or {}
    headers = sort_links(base, columns, types, sorted_by.get("column"), bool(sorted_by.get("descending")))
    rows = [[cell(row.get(c), types.get(c, "text")) for c in columns] for row in page["rows"]]
    return {
        "headers": headers,
        "rows": rows,
        "count": page["count"],
        "paging": paging_text(page["offset"], len(rows), page["count"]),
    }


def peak_topics(summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A traffic summary's busiest minute per topic, busiest first (then by name)."""
    peaks = (summary or {}).get("peakByTopic") or {}
    rows = [
        {"topic": topic, "minute": peak.get("minute"), "messages": peak.get("messages") or 0}
        for topic, peak in peaks.items()
        if isinstance(peak, dict)
    ]
    return sorted(rows, key=lambda r: (-r["messages"], r["topic"]))
